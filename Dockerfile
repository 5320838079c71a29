# ci-status-bot: the same install steps as the README's pip steps.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (cached while only the source changes).
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb')); print('\n'.join(d['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt

# Then the project itself.
COPY bot/ bot/
COPY bot_sandbox/ bot_sandbox/
COPY templates/ templates/
RUN pip install --no-deps . \
 && useradd --create-home --uid 10001 bot \
 && mkdir -p /app/config /app/state \
 && chown bot:bot /app/state

COPY config/bot.example.toml /app/config/bot.example.toml

USER bot
# Mount your configuration at /app/config/bot.toml and keep the state on a volume.
VOLUME ["/app/state"]
ENV CI_STATUS_BOT_STATE__PATH=/app/state/ci-status-bot.sqlite3

CMD ["ci-status-bot", "run"]
