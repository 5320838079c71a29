"""The served triage page in a real headless browser (Debian's chromium, driven by Selenium)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import REPO, free_port, seed_case, serve_config, start_run, stop, wait_ready

from bot_sandbox import Sandbox, World

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
OTHER = "octo/other"
NOW = datetime.now(UTC).replace(microsecond=0)

pytestmark = pytest.mark.skipif(
    not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)


def seed(world: World) -> None:
    """Four pull requests in two repositories: failing, incomplete draft, passing, pending."""
    seed_case(world, now=NOW)  # octo/omni#7430: draft, incomplete
    for number, conclusion in ((7, "failure"), (8, "success")):
        sha = f"{number:040x}"
        world.add_pull(REPO, number, title=f"Change {number}", author="bob", head_sha=sha)
        world.add_check_run(REPO, sha, name="tests", app_slug="github-actions", workflow="ci",
                            conclusion=conclusion, started_at=NOW, completed_at=NOW)  # fmt: skip
    world.add_check_run(REPO, f"{7:040x}", name="DCO", app_slug="dco",
                        conclusion="action_required", started_at=NOW, completed_at=NOW)  # fmt: skip
    world.add_repo(OTHER)
    world.set_required_checks(OTHER, ["DCO"])  # the DCO app never reports on octo/other#9
    sha = "9" * 40
    world.add_pull(OTHER, 9, title="Other <b>repo</b> change", author="carol", head_sha=sha)
    world.add_check_run(OTHER, sha, name="build", app_slug="github-actions", workflow="ci",
                        status="in_progress", started_at=NOW)  # fmt: skip


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("browser")
    world = World()
    seed(world)
    port = free_port()
    with Sandbox(world) as sandbox:
        config = serve_config(tmp, sandbox, port)
        config.write_text(config.read_text() + f'[[repos]]\nname = "{OTHER}"\n')
        proc = start_run(config)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, proc)
            yield url
        finally:
            stop(proc)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# The page refreshes its data every 2 s here, replacing the rows, the summary, the counts and
# the repository buttons: the test never holds an element across a step. What it reads, it
# reads in one script (what the page says now); what it clicks, it finds at that moment.
PAGE_GUARD_S = 60  # a hang guard for what the page is to say (a loaded machine is slow)


def visible(driver: Any) -> list[str]:
    """The pull requests whose rows are shown, top to bottom."""
    pulls: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('#rows tr'))"
        ".filter(function (r) { return r.offsetParent !== null; })"
        ".map(function (r) { return r.getAttribute('data-pull'); });"
    )
    return pulls


def says(driver: Any, selector: str, attribute: str | None = None) -> str | None:
    """The text (or an attribute) of what `selector` names now; None when nothing does."""
    value: str | None = driver.execute_script(
        "var e = document.querySelector(arguments[0]), name = arguments[1];"
        "return e === null ? null : name === null ? e.innerText : e.getAttribute(name);",
        selector,
        attribute,
    )
    return value


def press(driver: Any, selector: str) -> None:
    """Click what `selector` names; found again if a refresh replaced it before the click."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(5):  # a click on a replaced element is refused before it is made
        try:
            driver.find_element("css selector", selector).click()
            return
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{selector} was replaced under every click")


def click(driver: Any, group: str, value: str) -> None:
    press(driver, f'[data-filter="{group}"] button[data-value="{value}"]')


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PAGE_GUARD_S
    while not check():
        assert time.monotonic() < deadline, f"the page never showed {what}"
        time.sleep(0.1)


def test_filters_sorting_and_refresh_in_a_real_browser(
    base: str, browser: Any, tmp_path: Path
) -> None:
    browser.get(base + "/?refresh=2")
    assert browser.title == "CI triage · 4 open pull requests"
    everything = ["octo/omni#7", "octo/omni#7430", "octo/other#9", "octo/omni#8"]
    assert visible(browser) == everything  # failing, incomplete, pending, passing
    summary = says(browser, "#summary") or ""
    assert "1\nfailing" in summary.replace(" failing", "\nfailing")
    assert "1 docs build cancelled, stale or unknown" in summary.replace("\n", " ")

    click(browser, "verdict", "failing")
    assert visible(browser) == ["octo/omni#7"]
    assert says(browser, "#shown") == "1"
    click(browser, "verdict", "passing")  # two verdicts: either one
    assert visible(browser) == ["octo/omni#7", "octo/omni#8"]
    click(browser, "verdict", "failing")
    click(browser, "verdict", "passing")
    assert visible(browser) == everything

    click(browser, "draft", "only")
    assert visible(browser) == ["octo/omni#7430"]
    click(browser, "draft", "exclude")  # one choice at a time
    assert visible(browser) == ["octo/omni#7", "octo/other#9", "octo/omni#8"]
    click(browser, "draft", "exclude")

    click(browser, "repo", OTHER)
    assert visible(browser) == ["octo/other#9"]
    assert "Other <b>repo</b> change" in (says(browser, "#rows") or "")

    text = browser.find_element("id", "text-filter")  # the refresh leaves the filters' inputs
    click(browser, "repo", OTHER)
    text.send_keys("omni resolver")
    assert visible(browser) == ["octo/omni#7430"]
    text.clear()
    text.send_keys("DCO")  # #7's failing DCO, #9's DCO never reported (7430's passed: no)
    assert visible(browser) == ["octo/omni#7", "octo/other#9"]
    assert "DCO" in (says(browser, 'tr[data-pull="octo/omni#7"]') or "")
    text.clear()
    text.send_keys("docs/readthedocs")  # issue 28: the cancelled docs build is named
    assert visible(browser) == ["octo/omni#7430"]
    row = browser.find_element("css selector", 'tr[data-pull="octo/omni#7430"]').text
    assert "cancelled: docs/readthedocs.org:omni-docs" in row
    text.clear()
    text.send_keys("never reported")  # by its state word
    assert visible(browser) == ["octo/other#9"]
    text.clear()
    text.send_keys(" ")  # an input event with an empty filter
    assert visible(browser) == everything

    click(browser, "checks", "never-reported")  # a required check that never reported
    assert visible(browser) == ["octo/other#9"]
    assert "never reported: DCO" in (says(browser, "#rows") or "")
    click(browser, "checks", "never-reported")
    assert visible(browser) == everything

    press(browser, 'th[data-sort="pull"]')
    assert visible(browser) == ["octo/omni#7", "octo/omni#8", "octo/omni#7430", "octo/other#9"]
    press(browser, 'th[data-sort="pull"]')
    assert visible(browser)[0] == "octo/other#9"
    press(browser, 'th[data-sort="urgency"]')
    assert visible(browser) == everything

    click(browser, "verdict", "failing")
    clicked = browser.execute_script("return document.body.dataset.refreshedAt || ''")
    # the page says a refresh ended after the click: the data was reloaded, the filter kept
    wait_for(lambda: (says(browser, "body", "data-refreshed-at") or "") > clicked, "a refresh")
    assert visible(browser) == ["octo/omni#7"]
    assert says(browser, '[data-value="failing"]', "aria-pressed") == "true"

    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; })"
    )
    assert resources and all(name.startswith(base) for name in resources)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    shot = tmp_path / "triage.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_page_is_readable_on_a_phone(base: str, browser: Any, tmp_path: Path) -> None:
    browser.set_window_size(390, 844)
    browser.get(base + "/")
    assert not browser.find_element("css selector", "#pulls thead").is_displayed()
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0
    click(browser, "verdict", "incomplete")
    assert visible(browser) == ["octo/omni#7430"]
    assert browser.save_screenshot(str(tmp_path / "triage-phone.png"))


def test_the_page_filters_by_failing_check(base: str, browser: Any) -> None:
    """Issue 27: the failing checks are grouped, each with the count of pull requests it fails;
    choosing one shows only the pull requests it fails."""
    browser.get(base + "/")
    buttons = browser.find_elements("css selector", '[data-filter="check"] button')
    labels = [b.text for b in buttons]
    assert "DCO · 1" in labels and "tests · 1" in labels, labels
    tests = next(b for b in buttons if b.text == "tests · 1")
    tests.click()
    assert visible(browser) == ["octo/omni#7"]
    assert tests.get_attribute("aria-pressed") == "true"
    click(browser, "verdict", "passing")  # with another filter: both must hold
    assert visible(browser) == []
    click(browser, "verdict", "passing")
    tests.click()
    assert visible(browser) == ["octo/omni#7", "octo/omni#7430", "octo/other#9", "octo/omni#8"]
