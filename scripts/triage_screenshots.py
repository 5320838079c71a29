"""Screenshots for the README: the triage page and `report`'s table, from a real sandbox cycle.

    python scripts/triage_screenshots.py [--out docs/img]

Seeds the loopback sandbox (the demo pull requests plus a few more), runs a real
`ci-status-bot once`, then `report --format html` and `report`, and photographs both in
Debian's headless chromium (Selenium, /usr/bin/chromedriver; nothing is downloaded).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from bot_sandbox import Sandbox, World
from bot_sandbox.seeds import DEMO_REPO, TOKEN, seed_demo

OTHER = "octo/cli"


def seed(world: World) -> None:
    """The demo pull requests, and a pending, a stale and a second repository's (whose
    required DCO check never reported)."""
    now = datetime.now(UTC)
    seed_demo(world, now=now - timedelta(minutes=1))
    for number, started, title in (
        (7440, now - timedelta(minutes=25), "Parse TOML arrays of tables"),
        (7441, now - timedelta(hours=4), "Cache the resolver's answers between runs"),
    ):
        sha = hashlib.sha1(str(number).encode()).hexdigest()
        world.add_pull(DEMO_REPO, number, title=title, author="frank", head_sha=sha)
        world.add_check_run(DEMO_REPO, sha, name="lint", app_slug="github-actions",
                            workflow="ci", started_at=started, completed_at=started)  # fmt: skip
        world.add_check_run(DEMO_REPO, sha, name="tests (3.13)", app_slug="github-actions",
                            workflow="ci", status="in_progress", started_at=started)  # fmt: skip
    world.add_repo(OTHER)
    world.set_required_checks(OTHER, ["tests", "DCO"])  # the DCO app never reports on #88
    sha = hashlib.sha1(b"cli-88").hexdigest()
    world.add_pull(OTHER, 88, title="Add --json to `omni check`", author="gina", head_sha=sha,
                   draft=True)  # fmt: skip
    world.add_check_run(OTHER, sha, name="tests", app_slug="github-actions", workflow="ci",
                        conclusion="failure", started_at=now, completed_at=now)  # fmt: skip


def config(tmp: Path, sandbox: Sandbox) -> Path:
    """A config file pointing at the sandbox."""
    path = tmp / "bot.toml"
    path.write_text(
        f'[github]\napi_url = "{sandbox.github_url}"\ntoken = "{TOKEN}"\n'
        f'[readthedocs]\napi_url = "{sandbox.rtd_url}"\nbusiness_api_url = "{sandbox.rtd_url}"\n'
        f'[state]\npath = "{tmp / "state.sqlite3"}"\n'
        f'[[repos]]\nname = "{DEMO_REPO}"\n[[repos]]\nname = "{OTHER}"\n',
        encoding="utf-8",
    )
    return path


def bot(*args: str) -> str:
    """Run the real command line; its standard output."""
    done = subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout


def browser(width: int, height: int) -> webdriver.Chrome:
    """Headless Debian chromium."""
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--hide-scrollbars", f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"),
                            options=options)  # fmt: skip


TERMINAL = """<!doctype html><meta charset="utf-8"><style>
body {{ margin: 0; background: #1e1e1e; }}
pre {{ margin: 0; padding: 14px 16px; color: #d4d4d4;
       font: 13px/1.4 "DejaVu Sans Mono", monospace; }}
.failing {{ color: #f14c4c; }} .incomplete {{ color: #c586c0; }} .pending {{ color: #e5c07b; }}
.passing {{ color: #23d18b; }} .prompt {{ color: #9cdcfe; }}
</style><pre><span class="prompt">$ ci-status-bot report</span>
{body}</pre>"""


def terminal_html(text: str) -> str:
    """The table as a terminal would colour it."""
    lines = []
    for line in html.escape(text).splitlines():
        word = line.split(" ", 1)[0]
        if word in {"failing", "incomplete", "pending", "passing"}:
            line = f'<span class="{word}">{word}</span>{line[len(word) :]}'
        lines.append(line)
    return TERMINAL.format(body="\n".join(lines))


def main() -> int:
    """Make docs/img/triage-page.png and docs/img/triage-table.png."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/img", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    world = World()
    seed(world)
    with Sandbox(world) as sandbox, tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        cfg = str(config(tmp, sandbox))
        bot("once", "--config", cfg)
        bot("report", "--config", cfg, "--format", "html", "--output", str(tmp / "page.html"))
        table = bot("report", "--config", cfg)
        (tmp / "table.html").write_text(terminal_html(table), encoding="utf-8")
        driver = browser(1280, 980)
        try:
            driver.get((tmp / "page.html").as_uri())
            driver.save_screenshot(str(args.out / "triage-page.png"))
            # 80 columns of 13 px DejaVu Sans Mono, as tall as every line of the table
            driver.set_window_size(700, 400)
            driver.get((tmp / "table.html").as_uri())
            inner = driver.execute_script("return window.innerHeight")
            need = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(700, 400 - inner + need)
            driver.save_screenshot(str(args.out / "triage-table.png"))
        finally:
            driver.quit()
    print(table, end="")
    print(f"wrote {args.out / 'triage-page.png'} and {args.out / 'triage-table.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
