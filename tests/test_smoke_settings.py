from django.conf import settings


def test_settings_use_postgres_in_tests():
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
