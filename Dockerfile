# Tollgate web, worker and beat image (one image, three commands; see docker-compose.yml).
# pango, harfbuzz and a font are WeasyPrint's (the gate report's PDF); chromium is Kaleido's,
# which draws the report's charts to SVG (docs/dashboards.md).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    TOLLGATE_VAR_DIR=/var/lib/tollgate
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssh-client \
        libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core chromium \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /app tollgate \
    && mkdir -p /var/lib/tollgate && chown tollgate /var/lib/tollgate
WORKDIR /app
COPY pyproject.toml ./
COPY config ./config
COPY gates ./gates
COPY documents ./documents
COPY runners ./runners
COPY simhost ./simhost
COPY worker ./worker
RUN pip install .
COPY manage.py ./
COPY templates ./templates
COPY static ./static
# collectstatic needs settings but no secrets of the deployment: give it throwaway ones.
RUN SECRET_KEY=collectstatic-only-not-a-secret-key-0123456789abcdef0123456789 \
    python manage.py collectstatic --noinput -v0
USER tollgate
EXPOSE 8000
CMD ["gunicorn", "-c", "python:config.gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "30"]
