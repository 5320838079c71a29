"""The newcomer's path: the quickstart's last command keeps a page up; the sandbox's --help."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import httpx
from support import LOOPBACK, clean_env


def test_demo_serve_keeps_the_sandbox_and_the_page_up_until_ctrl_c() -> None:
    """`demo --serve` prints the page's URL; the page answers with the demo's pull requests;
    SIGINT (Ctrl-C) stops it with exit 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "demo", "--serve"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = _served_url(proc)
        page = _get_when_up(url)
        assert page.status_code == 200
        assert "octo/omni" in page.text and "7431" in page.text
        assert LOOPBACK.get(url + "livez", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def _served_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"demo ended before serving: {proc.communicate()[1]}")
        found = re.search(r"the triage page is at (http://127\.0\.0\.1:\d+/)", line)
        if found and "Ctrl-C" in line:
            return found[1]
    raise AssertionError("demo --serve never printed the page's URL")


def _get_when_up(url: str) -> httpx.Response:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            answer = LOOPBACK.get(url, timeout=10)
        except httpx.TransportError:
            time.sleep(0.2)
            continue
        if answer.status_code == 200:
            return answer
        time.sleep(0.2)
    raise AssertionError("the page never answered")


def test_the_standalone_sandbox_explains_itself() -> None:
    """`python -m bot_sandbox --help` and `serve --help` say what it is and what options do."""
    top = subprocess.run(
        [sys.executable, "-m", "bot_sandbox", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert top.returncode == 0
    assert "fake GitHub" in top.stdout and "Read the Docs" in top.stdout
    serve = subprocess.run(
        [sys.executable, "-m", "bot_sandbox", "serve", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert serve.returncode == 0
    for text in ("--port PORT", "any free port", "--scenario", "--prs", "--latency-ms MS",
                 "--webhook-url URL", "github.api_url", "SIGTERM or Ctrl-C"):  # fmt: skip
        assert text in serve.stdout, text
