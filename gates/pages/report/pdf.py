"""HTML to PDF with WeasyPrint, for the gate report. I/O: reads our static files; nothing else.

The fetcher serves only our own static files (the report's stylesheet) and `data:` URLs (the
charts, drawn to SVG beforehand): a page never makes the server fetch another URL, whatever a
spec or a decision's text holds.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import unquote, urlsplit

import weasyprint
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from weasyprint.urls import URLFetcher, URLFetcherResponse

# Any absolute URL will do: links resolve against it, and the fetcher reads only the path.
BASE_URL = "https://tollgate.invalid/"


def html_to_pdf(html: str) -> bytes:
    document = weasyprint.HTML(string=html, base_url=BASE_URL, url_fetcher=StaticOnlyFetcher())
    return document.write_pdf()


class StaticOnlyFetcher(URLFetcher):
    def fetch(self, url: str, headers: dict | None = None) -> URLFetcherResponse:
        if url.startswith("data:"):
            return super().fetch(url, headers)
        path = static_file(urlsplit(url).path)
        if path is None:
            raise ValueError(f"the report loads only its own static files, not {url}")
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return URLFetcherResponse(url, path.read_bytes(), {"Content-Type": content_type})


def static_file(url_path: str) -> Path | None:
    """The file behind a /static/ URL: collected (hashed names in production) or found."""
    prefix = settings.STATIC_URL
    if not url_path.startswith(prefix):
        return None
    name = unquote(url_path.removeprefix(prefix))
    if ".." in Path(name).parts:
        return None
    if staticfiles_storage.exists(name):
        return Path(staticfiles_storage.path(name))
    found = finders.find(name)
    return Path(found) if found else None
