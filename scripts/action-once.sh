#!/usr/bin/env bash
# The command of the GitHub Action (action.yml's last step runs this file, and
# tests/e2e/test_action.py runs that step as written): one cycle of the bot, configured from
# the action's inputs.
# Secrets reach the bot only through the environment, and only when the input is not empty
# (an empty input never overrides a key of the configuration file).
set -euo pipefail

if [ -z "${INPUT_CONFIG:-}" ]; then
  echo "ci-status-bot action: the 'config' input is empty" >&2
  exit 2
fi
export CI_STATUS_BOT_CONFIG="$INPUT_CONFIG"
if [ -n "${INPUT_GITHUB_TOKEN:-}" ]; then
  export CI_STATUS_BOT_GITHUB__TOKEN="$INPUT_GITHUB_TOKEN"
fi
if [ -n "${INPUT_READTHEDOCS_TOKEN:-}" ]; then
  export CI_STATUS_BOT_READTHEDOCS__TOKEN="$INPUT_READTHEDOCS_TOKEN"
fi
if [ -n "${INPUT_READTHEDOCS_BUSINESS_TOKEN:-}" ]; then
  export CI_STATUS_BOT_READTHEDOCS__BUSINESS_TOKEN="$INPUT_READTHEDOCS_BUSINESS_TOKEN"
fi

# The state: a SQLite file in the folder the workflow names (restored by actions/cache), else
# none at all (state.path = ""): the comment's hidden stamp carries what the next run needs.
if [ -n "${INPUT_STATE_DIR:-}" ]; then
  mkdir -p "$INPUT_STATE_DIR"
  export CI_STATUS_BOT_STATE__PATH="$INPUT_STATE_DIR/ci-status-bot.sqlite3"
else
  export CI_STATUS_BOT_STATE__PATH=""
fi

args=(once)
if [ "${INPUT_DRY_RUN:-false}" = "true" ]; then
  args+=(--dry-run)
fi
# The job summary (the run's page): the triage table of what this run saw.
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  args+=(--summary "$GITHUB_STEP_SUMMARY")
fi
exec ci-status-bot "${args[@]}"
