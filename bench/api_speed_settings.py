"""Settings for bench/api_speed.py only: production settings plus a URL map that adds the bare
endpoint. Never used by the service; `config.urls` never routes the bare endpoint."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "api_speed_urls"
