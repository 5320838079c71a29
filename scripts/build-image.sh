#!/usr/bin/env bash
# Build the Dockerfile's image and run it, without a Docker engine and without a base-image
# registry: buildah (chroot isolation, vfs storage) builds the Dockerfile `--from` a base
# bootstrapped from Debian's packages (mmdebstrap: python3, pip, venv), which stands in for
# python:3.12-slim. Then, inside the image, as uid 10001: `ci-status-bot demo`, and
# `ci-status-bot run` against the built-in sandbox until the image's HEALTHCHECK command
# (GET /livez) passes.
#
#   scripts/build-image.sh            # what .ci/run calls
#   CISB_IMAGE_CACHE=/some/dir scripts/build-image.sh
#
# The bootstrapped base and buildah's storage (with the build's layers) are kept in
# $CISB_IMAGE_CACHE (default /var/cache/ci-status-bot), so a second run reuses both. Needs
# root (as CI and the development machines are); installs buildah and mmdebstrap when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${CISB_IMAGE_CACHE:-/var/cache/ci-status-bot}"
suite="${CISB_IMAGE_SUITE:-bookworm}"
image="localhost/ci-status-bot:ci"
started=$(date +%s)
say() { printf 'build-image: %s (%ss)\n' "$*" "$(( $(date +%s) - started ))"; }

if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq buildah mmdebstrap >/dev/null
fi
mkdir -p "$cache"
bah() {
  buildah --root "$cache/containers" --runroot "$cache/run" --storage-driver vfs "$@"
}

# 1. The base: Debian's python3 made to look like python:3.12-slim where the Dockerfile
#    relies on it (`python` and `pip` on PATH, pip installing into the system site, groupadd).
#    Its tag names the suite and this recipe, so a changed recipe bootstraps a new one.
recipe="$suite python3 python3-pip python3-venv ca-certificates v1"
tag="base-$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
base="localhost/ci-status-bot-base:$tag"
if ! bah inspect --type image "$base" >/dev/null 2>&1; then
  rootfs="$cache/$tag.rootfs"  # a directory: the bootstrapped file system
  if [ ! -d "$rootfs" ]; then
    rm -rf "$rootfs.part"
    say "bootstrapping the base from Debian $suite with mmdebstrap"
    mmdebstrap --quiet --variant=apt --include=python3,python3-pip,python3-venv,ca-certificates \
      --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
      --customize-hook='ln -sf /usr/bin/python3 "$1"/usr/local/bin/python' \
      --customize-hook='ln -sf /usr/bin/pip3 "$1"/usr/local/bin/pip' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
      "$suite" "$rootfs.part"
    mv "$rootfs.part" "$rootfs"
  fi
  say "importing the base as $base"
  ctr=$(bah from scratch)
  bah add --quiet "$ctr" "$rootfs" /
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd python3 "$ctr"
  bah commit --quiet --format docker --rm "$ctr" "$base" >/dev/null
fi

# 2. The image, from the Dockerfile as it is; the base replaces its FROM. The machine's CA
#    bundle is lent to the build's RUN steps (pip reaches PyPI through whatever this machine
#    trusts); nothing of it stays in the image.
#    The image is tagged with a digest of everything its COPY lines take (and the base), so a
#    tree whose inputs an earlier run already built is not built again (with vfs even cached
#    steps copy the whole file system, minutes on a loaded machine).
inputs=$(tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  --exclude=__pycache__ --exclude='*.py[cod]' -cf - Dockerfile .dockerignore pyproject.toml \
  README.md bot bot_sandbox templates config/bot.example.toml | sha256sum | cut -c1-16)
built="localhost/ci-status-bot:$tag-$inputs"
if bah inspect --type image "$built" >/dev/null 2>&1; then
  say "the image of these inputs is already built ($built)"
else
  say "building the Dockerfile from $base"
  bah bud --quiet --isolation chroot --format docker --layers \
    --build-arg "BASE=$base" --from "$base" \
    --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    -t "$built" -f Dockerfile . >/dev/null
fi
bah tag "$built" "$image"
healthcheck=$(bah inspect --type image --format '{{.Docker.Config.Healthcheck.Test}}' "$image")
user=$(bah inspect --type image --format '{{.Docker.Config.User}}' "$image")
say "built $image (user $user; healthcheck $healthcheck)"
case "$healthcheck" in *livez*) ;; *) echo "build-image: the image lost its HEALTHCHECK" >&2; exit 1;; esac
[ "$user" = "10001:10001" ] || { echo "build-image: the image runs as '$user', not 10001" >&2; exit 1; }

ctr=$(bah from --quiet "$image")
trap 'bah rm "$ctr" >/dev/null 2>&1 || true' EXIT
inside() { bah run --isolation chroot --user 10001:10001 "$ctr" -- "$@"; }

# 3. The demo, as the image's user.
say "ci-status-bot demo inside the image, as uid 10001"
inside sh -c 'id -u; ci-status-bot demo' >/tmp/cisb-image-demo.txt 2>&1 || {
  cat /tmp/cisb-image-demo.txt >&2; echo "build-image: the demo failed in the image" >&2; exit 1; }
[ "$(head -n 1 /tmp/cisb-image-demo.txt)" = "10001" ] || {
  echo "build-image: the demo did not run as uid 10001" >&2; exit 1; }
grep -F 'requests to the sandbox:' /tmp/cisb-image-demo.txt

# 4. `run` against the sandbox (one process inside the image), until /livez answers through
#    the image's own HEALTHCHECK command; then SIGTERM, which must end it with exit 0.
say "ci-status-bot run inside the image against the sandbox, probing /livez"
probe=$(bah inspect --type image --format '{{index .Docker.Config.Healthcheck.Test 3}}' "$image")
inside sh -c '
  set -eu
  cd /tmp
  python -m bot_sandbox serve > sandbox.json & sandbox=$!
  for _ in $(seq 100); do [ -s sandbox.json ] && break; sleep 0.1; done
  export CI_STATUS_BOT_GITHUB__API_URL=$(python -c "import json; print(json.load(open(\"sandbox.json\"))[\"github_url\"])")
  rtd=$(python -c "import json; print(json.load(open(\"sandbox.json\"))[\"rtd_url\"])")
  export CI_STATUS_BOT_READTHEDOCS__API_URL=$rtd CI_STATUS_BOT_READTHEDOCS__BUSINESS_API_URL=$rtd
  export CI_STATUS_BOT_GITHUB__TOKEN=$(python -c "import json; print(json.load(open(\"sandbox.json\"))[\"token\"])")
  export CI_STATUS_BOT_REPOS="[{\"name\": \"$(python -c "import json; print(json.load(open(\"sandbox.json\"))[\"repo\"])")\"}]"
  export CI_STATUS_BOT_STATE__PATH=/tmp/state.sqlite3 CI_STATUS_BOT_SERVER__HOST=127.0.0.1
  ci-status-bot run > run.log 2>&1 & bot=$!
  ok=""
  for _ in $(seq 60); do
    if python -c "$1" 2>/dev/null; then ok=yes; break; fi
    sleep 0.5
  done
  code=0
  if kill -TERM "$bot" 2>/dev/null; then wait "$bot" || code=$?; else wait "$bot" || code=$?; ok=""; fi
  kill -TERM "$sandbox" 2>/dev/null || true
  if [ -z "$ok" ]; then cat run.log; echo "/livez never answered" >&2; exit 1; fi
  [ "$code" = 0 ] || { cat run.log; echo "run exited $code on SIGTERM" >&2; exit 1; }
  echo "/livez answered the HEALTHCHECK command; run stopped with exit 0 on SIGTERM"
' probe "$probe"
# vfs keeps a full copy of every layer: drop the images no tag or newer layer refers to any
# more (an earlier build's), so the cache holds one build's layers, not every build's.
for old in $(bah images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/ci-status-bot:base-' \
               | grep -v -x "$built"); do
  bah rmi "$old" >/dev/null 2>&1 || true
done
bah rmi --prune >/dev/null 2>&1 || true
say "done"
