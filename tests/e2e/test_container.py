"""The image's steps without a Docker engine: the Dockerfile's settings, its HEALTHCHECK command
run against a real `ci-status-bot run` with the image's environment, and the build context."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from support import LOOPBACK, clean_env, seed_case, write_config

from bot_sandbox import Sandbox, World

ROOT = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined), in order."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.partition(" ") for line in lines if line and line[0] != "#")
    ]


def image_env() -> dict[str, str]:
    """The ENV the image sets (KEY=VALUE pairs)."""
    found: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ENV":
            found.update(dict(re.findall(r"(\S+?)=(\S+)", rest)))
    return found


def healthcheck() -> list[str]:
    """The HEALTHCHECK's command, exec form."""
    rest = next(rest for word, rest in instructions() if word == "HEALTHCHECK")
    return list(json.loads(rest[rest.index("CMD") + 3 :]))


def test_the_image_runs_as_a_numeric_user_exposes_8080_and_serves_on_all_interfaces() -> None:
    steps = instructions()
    users = [rest for word, rest in steps if word == "USER"]
    assert users and re.fullmatch(r"\d+(:\d+)?", users[-1]) and users[-1].startswith("10001")
    assert ("EXPOSE", "8080") in steps
    assert image_env()["CI_STATUS_BOT_SERVER__HOST"] == "0.0.0.0"
    assert healthcheck()[0] == "python"  # slim images have no curl


def test_the_build_context_leaves_out_the_venv_git_state_and_caches() -> None:
    ignored = set((ROOT / ".dockerignore").read_text(encoding="utf-8").split())
    assert {".venv", ".git", "state", "**/__pycache__", ".pytest_cache", "*.pem"} <= ignored
    copied = [rest.split()[0].rstrip("/") for word, rest in instructions() if word == "COPY"]
    assert "bot_sandbox" in copied  # `demo` needs the sandbox package
    assert not [c for c in copied if c in ignored]


def test_the_healthcheck_passes_on_a_running_service_and_fails_without_one(
    tmp_path: Path,
) -> None:
    """The image's HEALTHCHECK, as written, against `run` configured by the image's ENV."""
    world = World()
    seed_case(world, now=datetime.now(UTC))
    port = _free_port()
    env = {
        **clean_env(),
        "CI_STATUS_BOT_SERVER__HOST": image_env()["CI_STATUS_BOT_SERVER__HOST"],
        "CI_STATUS_BOT_SERVER__PORT": str(port),
    }
    with Sandbox(world) as sandbox:
        config = write_config(tmp_path, sandbox)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            _wait_live(port, proc)
            check = _healthcheck(env)
            assert check.returncode == 0, check.stderr
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert _healthcheck(env).returncode != 0


def _healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = healthcheck()
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        command, env={**env, "PATH": path}, capture_output=True, text=True, timeout=30, check=False
    )


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_live(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            if LOOPBACK.get(f"http://127.0.0.1:{port}/livez", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the service never answered /livez")
