# ci-status-bot: the same install steps as the pip install (docs/running/pip.md).
# BASE: CI builds this file from a Debian-bootstrapped stand-in (scripts/build-image.sh).
ARG BASE=python:3.12-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (cached while only the source and the README change).
COPY pyproject.toml ./
RUN python -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb')); print('\n'.join(d['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt

# Then the project itself (pyproject.toml names README.md as its readme).
COPY README.md ./
COPY bot/ bot/
COPY bot_sandbox/ bot_sandbox/
COPY templates/ templates/
RUN pip install --no-deps . \
 && groupadd --gid 10001 bot \
 && useradd --create-home --uid 10001 --gid 10001 bot \
 && mkdir -p /app/config /app/state \
 && chown 10001:10001 /app/state

COPY config/bot.example.toml /app/config/bot.example.toml

# A numeric user, so that Kubernetes' runAsNonRoot can verify it: bind-mounted state folders
# must be writable by uid 10001 (docs/running/docker.md).
USER 10001:10001
# Mount your configuration at /app/config/bot.toml and keep the state on a volume.
VOLUME ["/app/state"]
ENV CI_STATUS_BOT_STATE__PATH=/app/state/ci-status-bot.sqlite3 \
    CI_STATUS_BOT_SERVER__HOST=0.0.0.0

# The page, /livez, /readyz, /metrics and /webhook: reachable only where you publish the port.
EXPOSE 8080
# /livez over loopback with the image's own Python (slim images have no curl); the port is
# server.port: set CI_STATUS_BOT_SERVER__PORT when you change it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/livez' % os.environ.get('CI_STATUS_BOT_SERVER__PORT', '8080'), timeout=4)"]

CMD ["ci-status-bot", "run"]
