"""Issue 15: passing means nothing required is missing, one head per report, workflow identity.

Each defect end to end through the CLI against the sandbox, taught the real shapes: the base
branch's `refUpdateRule` and `rules` (RequiredStatusChecksParameters with integrationId), a
required context absent from the rollup, workflow files (`workflowRun.file.path`), a head that
moves between two requests, repository names in another spelling.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from github.Requester import Requester
from support import LOGIN, REPO, TOKEN, bot_comments, outside_allowlist, write_config, writes

from bot.cli import main
from bot.core.model import Kind, Policy, PullSnapshot, Signal, State, Verdict
from bot.core.reconcile import reconcile
from bot.service.webhooks.events import read_event
from bot.service.webhooks.inbox import Inbox
from bot.service.webhooks.receiver import Receiver
from bot.service.webhooks.signature import signature
from bot.state.store import Store
from bot_sandbox import Sandbox, World

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR_AGO = NOW - timedelta(hours=1)
DATA = Path(__file__).resolve().parent.parent / "data" / "real" / "webhooks"
DCO_APP_ID = 1861  # the DCO app's database id (bot_sandbox.world.KNOWN_APPS, as on GitHub)


def sha(n: int, fill: str = "a") -> str:
    return f"{n:07x}" + fill * 33


@dataclass
class Env:
    world: World
    sandbox: Sandbox
    tmp: Path

    def config(self, *, expected: list[str] | None = None, **policy: Any) -> str:
        path = write_config(self.tmp, self.sandbox, **policy)
        if expected is not None:
            names = ", ".join(json.dumps(n) for n in expected)
            path.write_text(path.read_text() + f"expected = [{names}]\n")
        return str(path)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    world = World()
    world.add_user(login=LOGIN, token=TOKEN)
    world.add_repo(REPO)
    with Sandbox(world) as sandbox:
        yield Env(world, sandbox, tmp_path)
        Requester.resetConnectionClasses()
        assert outside_allowlist(sandbox) == []


def pull(env: Env, number: int, **kw: Any) -> str:
    head = sha(number)
    env.world.add_pull(REPO, number, title=f"PR {number}", author="alice", head_sha=head, **kw)
    return head


def green(env: Env, head: str, name: str = "lint", **kw: Any) -> None:
    env.world.add_check_run(
        REPO, head, name=name, workflow=kw.pop("workflow", "ci"),
        started_at=kw.pop("started_at", HOUR_AGO), completed_at=HOUR_AGO, **kw,
    )  # fmt: skip


def show(env: Env, capsys: pytest.CaptureFixture[str], number: int, **kw: Any) -> Any:
    code = main(["show", f"{REPO}#{number}", "--format", "json", "--config", env.config(**kw)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def show_markdown(env: Env, capsys: pytest.CaptureFixture[str], number: int) -> str:
    code = main(["show", f"{REPO}#{number}", "--config", env.config()])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def once(env: Env, capsys: pytest.CaptureFixture[str], *args: str, **kw: Any) -> str:
    code = main(["once", "--config", env.config(**kw), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.err


def comment_of(env: Env, number: int) -> str:
    comments = bot_comments(env.world, number)
    assert len(comments) == 1
    body: str = comments[0]["body"]
    return body


def expected_of(report: Any) -> list[dict[str, Any]]:
    return [s for s in report["signals"] if s["kind"] == "expected"]


def operations(env: Env) -> list[str]:
    """The operation names of the GraphQL queries the bot sent, in order."""
    names = []
    for r in env.sandbox.requests:
        if r.service == "github" and r.path.endswith("graphql"):
            query = json.loads(r.body)["query"]
            names.append(query.split("(", 1)[0].removeprefix("query ").strip())
    return names


# -- 1. required checks that never reported -------------------------------------------------


def test_a_required_check_that_never_reported_is_a_signal_and_never_passing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 1)
    green(env, head, "lint")
    env.world.set_required_checks(REPO, ["lint", "ci / build"])
    report = show(env, capsys, 1)
    assert report["verdict"] == "pending"
    assert report["required_checks"] == {
        "read": True,
        "contexts": ["lint", "ci / build"],
        "rules": ["branch protection of main", "branch protection of main"],
        "apps": [None, None],
    }
    [never] = expected_of(report)
    assert never["name"] == "ci / build"
    assert (never["github_state"], never["state"], never["required"]) == (
        "expected",
        "pending",
        True,
    )
    assert never["url"] is None and never["app"] is None
    assert never["finding"] == (
        "Not reported on this commit; required by branch protection of `main`."
    )
    lint = next(s for s in report["signals"] if s["name"] == "lint")
    assert lint["required"] is True  # from the same rules

    once(env, capsys)
    body = comment_of(env, 1)
    # issue 28: named in the headline; its row says GitHub does not merge without it and why
    assert "### ⏳ Waiting · `ci / build` (required) never reported · 1 passing" in body
    row = next(line for line in body.splitlines() if line.startswith("- ⏳ `ci / build`"))
    assert "not reported on this commit" in row and "required" in row
    assert (
        "GitHub does not allow merging until it reports: it is required by branch protection "
        "of `main`." in body
    )


def test_a_ruleset_naming_an_app_is_satisfied_only_by_that_apps_check(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 2)
    green(env, head, "DCO")  # a check named DCO, but from GitHub Actions, not the DCO app
    green(env, head, "tests")
    env.world.add_ruleset(REPO, "Main", [("DCO", DCO_APP_ID), "tests"])
    report = show(env, capsys, 2)
    [never] = expected_of(report)
    assert never["name"] == "DCO" and never["required"] is True
    assert never["finding"] == (  # both apps named (issue 24)
        "Not reported on this commit; required by ruleset `Main`. Required from the app with "
        f"id {DCO_APP_ID}; reported by github-actions."
    )
    assert report["required_checks"]["rules"] == ["ruleset Main", "ruleset Main"]
    assert report["required_checks"]["apps"] == [DCO_APP_ID, None]
    assert report["verdict"] == "pending"

    env.world.add_check_run(
        REPO, head, name="DCO", app_slug="dco", started_at=HOUR_AGO, completed_at=HOUR_AGO
    )
    report = show(env, capsys, 2)
    assert expected_of(report) == [] and report["verdict"] == "passing"


def test_a_status_never_satisfies_a_context_a_ruleset_ties_to_an_app(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by an adversarial review: anyone's commit status named `DCO` was counted as the
    DCO app's check (GitHub's answer does not say which app posted a status) -> a false pass."""
    head = pull(env, 3)
    green(env, head, "tests")
    env.world.add_ruleset(REPO, "Main", [("DCO", DCO_APP_ID), "tests"])
    env.world.add_status(
        REPO, head, context="DCO", state="success", description="forged", created_at=HOUR_AGO
    )
    report = show(env, capsys, 3)
    assert report["verdict"] == "pending"
    [never] = expected_of(report)
    assert never["name"] == "DCO" and never["required"] is True
    assert never["finding"] == (
        "Not reported on this commit; required by ruleset `Main`. A commit status of this name"
        " is on the commit; GitHub does not say which app posted it."
    )
    once(env, capsys)
    body = comment_of(env, 3)
    head = next(ln for ln in body.splitlines() if not ln.startswith("<!--"))
    assert "### ⏳ Waiting" in body and "Passing" not in head
    assert "GitHub does not say which app posted it." in body


def test_a_configured_expected_context_that_never_reported(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 3)
    green(env, head, "lint")
    report = show(env, capsys, 3, expected=["DCO", "lint"])
    [never] = expected_of(report)
    assert never["name"] == "DCO" and never["required"] is False
    assert never["finding"] == "Not reported on this commit; expected by this bot's configuration."
    assert report["verdict"] == "pending"
    once(env, capsys, expected=["DCO"])
    body = comment_of(env, 3)
    assert "Expected by this bot's configuration." in body
    # interface.md: optional rows need no mark once the required set was read (it was)
    row = next(line for line in body.splitlines() if line.startswith("- ") and "`DCO`" in line)
    assert "not reported on this commit" in row
    assert "required" not in row and "optional" not in row


def test_rules_that_cannot_be_read_are_said_once_and_the_rest_carries_on(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 4)
    green(env, head, "lint")
    env.world.set_required_checks(REPO, ["ci / build"])
    env.world.refuse_rules(REPO, "Resource not accessible by integration")
    report = show(env, capsys, 4)
    assert report["required_checks"]["read"] is False
    assert "Resource not accessible by integration" in report["required_checks"]["error"]
    assert expected_of(report) == []
    once(env, capsys)
    body = comment_of(env, 4)
    assert body.count("could not be read") == 1
    assert "The checks required on main could not be read" in body
    once(env, capsys)  # nothing changed: the note is not a new fact each cycle
    assert [r for r in writes(env.sandbox) if r.method == "PATCH"] == []


def test_an_expected_context_goes_stale_after_the_limit_and_never_passes() -> None:
    from bot.core.model import RequiredChecks, RequiredContext, Rule
    from bot.core.required import HEAD_SEEN_KEY

    head = "c" * 40
    checks = RequiredChecks("main", read=True, contexts=(
        RequiredContext("DCO", (Rule("branch protection", "main"),)),
    ))  # fmt: skip
    snapshot = PullSnapshot(
        repo=REPO, number=5, title="t", author="a", draft=False, head_sha=head, url="u",
        signals=(Signal("lint", Kind.CHECK_RUN, "success", completed_at=HOUR_AGO),),
        required_checks=checks, base="main",
    )  # fmt: skip
    policy = Policy(stale_after=timedelta(minutes=120))
    fresh = reconcile(snapshot, {}, policy, now=NOW, first_seen={HEAD_SEEN_KEY: HOUR_AGO})
    assert fresh.verdict is Verdict.PENDING
    old = NOW - timedelta(hours=3)
    stale = reconcile(snapshot, {}, policy, now=NOW, first_seen={HEAD_SEEN_KEY: old})
    row = next(r for r in stale.rows if r.signal.kind is Kind.EXPECTED)
    assert row.state is State.STALE and row.since == old
    assert stale.verdict is Verdict.INCOMPLETE
    assert "longer than the 120-minute limit" in (row.finding or "")


def test_the_required_set_is_read_once_per_base_branch_and_cached(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    for number in range(10, 16):
        green(env, pull(env, number), "lint")
    env.world.set_required_checks(REPO, ["lint"])
    once(env, capsys)
    assert operations(env).count("RequiredChecks") == 1  # one query for six pull requests
    env.sandbox.clear_requests()
    once(env, capsys)
    assert "RequiredChecks" not in operations(env)  # cached per repository + base branch
    db = sqlite3.connect(env.tmp / "state.sqlite3")
    assert db.execute("SELECT repo, base FROM required_sets").fetchall() == [(REPO, "main")]


# -- 2. one head per report -----------------------------------------------------------------


def _force_push_between_pages(env: Env, number: int, *, on: str) -> tuple[str, str]:
    """Head A: 150 checks, job-120 failing; B: 150 green. The head moves to B just before the
    bot's first follow-up query of kind `on`."""
    head_a, head_b = sha(number), sha(number, "b")
    env.world.add_pull(REPO, number, title="t", author="alice", head_sha=head_a)
    for i in range(150):
        conclusion = "failure" if i == 120 else "success"
        green(env, head_a, f"job-{i:03d}", conclusion=conclusion)
        green(env, head_b, f"job-{i:03d}")
    moved: list[bool] = []

    def push(world: World, operation: str | None) -> None:
        if operation == on and not moved:
            moved.append(True)
            world.set_head(REPO, number, head_b)

    env.world.on_graphql(push)
    return head_a, head_b


def test_a_force_push_between_two_pages_never_mixes_two_commits_in_the_cycle(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head_a, _ = _force_push_between_pages(env, 20, on="MoreContexts")
    once(env, capsys)
    body = comment_of(env, 20)
    assert "### ❌ Failing" in body and "`job-120`" in body
    assert head_a[:7] in body


def test_a_force_push_between_two_pages_never_mixes_two_commits_in_show(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head_a, _ = _force_push_between_pages(env, 21, on="LearnRequired")
    report = show(env, capsys, 21)
    assert report["head_sha"] == head_a
    assert report["verdict"] == "failing"
    assert len(report["signals"]) == 150


def test_follow_up_pages_are_read_by_commit_not_by_pull_request(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head_a, _ = _force_push_between_pages(env, 22, on="never")
    once(env, capsys)
    follow_ups = [
        json.loads(r.body)
        for r in env.sandbox.requests
        if r.path.endswith("graphql") and '"query MoreContexts' in r.body.decode()[:30]
    ]
    assert follow_ups and all(b["variables"]["o0"] == head_a for b in follow_ups)
    assert all("pullRequest(" not in b["query"] for b in follow_ups)


# -- 3. workflow identity ---------------------------------------------------------------------


def test_two_workflow_files_with_one_name_are_two_signals(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 30)
    earlier = HOUR_AGO - timedelta(minutes=30)
    env.world.add_check_run(
        REPO, head, name="build", workflow="CI", workflow_path=".github/workflows/ci.yml",
        conclusion="failure", started_at=earlier, completed_at=earlier,
    )  # fmt: skip
    env.world.add_check_run(
        REPO, head, name="build", workflow="CI", workflow_path=".github/workflows/nightly.yml",
        started_at=HOUR_AGO, completed_at=HOUR_AGO,
    )  # fmt: skip
    report = show(env, capsys, 30)
    assert report["verdict"] == "failing"
    paths = sorted(s["workflow_path"] for s in report["signals"])
    assert paths == [".github/workflows/ci.yml", ".github/workflows/nightly.yml"]
    once(env, capsys)
    body = comment_of(env, 30)
    failing = next(line for line in body.splitlines() if line.startswith("- ❌"))
    assert "`build`" in failing and "(`.github/workflows/ci.yml`) · failed" in failing
    assert "- `build` (`.github/workflows/nightly.yml`)" in body


def test_the_passing_list_tells_a_push_run_from_a_pull_request_run(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 31)
    green(env, head, "gitleaks", event="push")
    green(env, head, "gitleaks", event="pull_request")
    once(env, capsys)
    body = comment_of(env, 31)
    assert "- `gitleaks` (`push`)" in body and "- `gitleaks` (`pull_request`)" in body


# -- 8. repository names ignore case ------------------------------------------------------------


def test_a_repository_named_in_another_spelling_is_the_configured_one(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 40)
    green(env, head, "lint")
    once(env, capsys)
    env.sandbox.clear_requests()
    once(env, capsys, "--repo", "Octo/Omni")
    assert writes(env.sandbox) == []
    assert len(bot_comments(env.world, 40)) == 1
    db = sqlite3.connect(env.tmp / "state.sqlite3")
    assert {r for (r,) in db.execute("SELECT repo FROM triage")} == {REPO}
    assert {r for (r,) in db.execute("SELECT repo FROM comments")} == {REPO}
    report = show(env, capsys, 40)
    code = main(["show", "OCTO/omni#40", "--format", "json", "--config", env.config()])
    assert code == 0 and json.loads(capsys.readouterr().out)["repo"] == report["repo"] == REPO


# -- 9. webhooks: a new base, changed rules -----------------------------------------------------


def _payload(env: Env, **fields: Any) -> dict[str, Any]:
    return {"repository": {"full_name": REPO}, **fields}


def test_a_pull_request_edited_to_a_new_base_is_marked(env: Env) -> None:
    payload = _payload(
        env, action="edited", number=50,
        pull_request={"number": 50, "head": {"sha": sha(50)}, "state": "open"},
        changes={"base": {"ref": {"from": "main"}, "sha": {"from": "0" * 40}}},
    )  # fmt: skip
    reading = read_event("pull_request", payload, repos={REPO: REPO})
    assert reading.outcome == "marked" and reading.marks[0].number == 50
    title_only = {**payload, "changes": {"title": {"from": "old"}}}
    assert read_event("pull_request", title_only, repos={REPO: REPO}).outcome == "ignored-action"


@pytest.mark.parametrize("event", ["branch_protection_rule", "repository_ruleset"])
def test_a_rules_event_drops_the_required_set_of_that_repository(
    env: Env, tmp_path: Path, event: str
) -> None:
    from bot.core.model import RequiredChecks, RequiredContext

    store = Store.open(tmp_path / "s.sqlite3")
    checks = RequiredChecks("main", read=True, contexts=(RequiredContext("lint", ()),))
    store.remember_required_sets(REPO, {"main": checks}, now=NOW)
    store.remember_required_sets("octo/other", {"main": checks}, now=NOW)
    receiver = Receiver(
        secrets=["s"], repos=[REPO, "octo/other"], inbox=Inbox(),
        note_delivery=lambda *a: True, on_first_mark=lambda: None,
        clock=lambda: NOW, on_rules_changed=store.forget_required,
    )  # fmt: skip
    body = json.dumps(_payload(env, action="edited", rule={"id": 1, "name": "main"})).encode()
    headers = {
        "x-github-event": event,
        "x-github-delivery": "d-1",
        "x-hub-signature-256": signature(body, "s"),
    }
    answer = receiver.handle(headers, body)
    assert answer.status == 202
    assert store.required_sets(REPO, ["main"], now=NOW) == {}
    assert store.required_sets("octo/other", ["main"], now=NOW) == {"main": checks}


def test_the_sandbox_sends_the_rules_and_base_events(env: Env) -> None:
    seen: list[tuple[str, str]] = []
    env.world.listeners.append(lambda w, event, action, repo, rec: seen.append((event, action)))
    pull(env, 51)
    env.world.set_required_checks(REPO, ["lint"])
    env.world.add_ruleset(REPO, "Main", ["tests"])
    env.world.set_base(REPO, 51, "release")
    assert seen[-3:] == [
        ("branch_protection_rule", "edited"),
        ("repository_ruleset", "created"),
        ("pull_request", "edited"),
    ]


# -- 10. a queued run without a start ---------------------------------------------------------


def test_a_queued_run_is_dated_by_the_bot_never_by_a_made_up_github_time(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """GitHub gives a queued run no time: the row says when this bot first saw it, in `show`
    as in the comment (the renderer says "GitHub gives no time for it" where it has none)."""
    head = pull(env, 60)
    green(env, head, "lint")
    env.world.add_check_run(REPO, head, name="deploy", workflow="ci", status="queued")
    report = show(env, capsys, 60)
    queued = next(s for s in report["signals"] if s["name"] == "deploy")
    assert queued["since"] is not None and queued["since_source"] == "first_seen"
    row = next(line for line in show_markdown(env, capsys, 60).splitlines() if "deploy" in line)
    assert "first seen by this bot" in row


@pytest.mark.parametrize("name", ["edited", "created"])
def test_a_recorded_branch_protection_rule_delivery_drops_the_required_set(
    tmp_path: Path, name: str
) -> None:
    """octokit/webhooks' recorded payloads (tests/data/real/webhooks/PROVENANCE.md)."""
    from bot.core.model import RequiredChecks

    body = (DATA / f"branch_protection_rule_{name}.payload.json").read_bytes()
    repo = json.loads(body)["repository"]["full_name"]
    dropped: list[str] = []
    receiver = Receiver(
        secrets=["s"], repos=[repo.upper()], inbox=Inbox(),
        note_delivery=lambda *a: True, on_first_mark=lambda: None,
        clock=lambda: NOW, on_rules_changed=dropped.append,
    )  # fmt: skip
    headers = {
        "x-github-event": "branch_protection_rule",
        "x-github-delivery": f"d-{name}",
        "x-hub-signature-256": signature(body, "s"),
    }
    answer = receiver.handle(headers, body)
    assert (answer.status, answer.outcome) == (202, "rules-changed")
    assert dropped == [repo.upper()]  # the configured spelling
    store = Store.open(tmp_path / "s.sqlite3")
    store.remember_required_sets(repo, {"main": RequiredChecks("main", read=True)}, now=NOW)
    assert store.forget_required(repo) == 1


def test_without_a_state_the_comment_dates_how_long_the_head_is_known(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scheduled Action starts with no state: the since of a never-reported row comes from
    the comment's stamp, so nothing is re-dated and nothing is edited."""
    from bot.core.required import HEAD_SEEN_KEY
    from bot.render.stamp import parse_stamp

    head = pull(env, 70)
    green(env, head, "lint")
    env.world.set_required_checks(REPO, ["ci / build"])
    once(env, capsys)
    first = comment_of(env, 70)
    stamp = parse_stamp(first)
    assert stamp is not None and stamp.seen(head, HEAD_SEEN_KEY) is not None
    for _ in range(2):
        (env.tmp / "state.sqlite3").unlink()
        env.sandbox.clear_requests()
        once(env, capsys)
        assert writes(env.sandbox) == []
        assert comment_of(env, 70) == first


def test_show_prints_the_comment_the_bot_keeps_with_a_state_and_without(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` dates a never-reported row as the comment does: from the state, or where there is
    none from the comment's stamp (read-only: it writes nothing and creates no state), so its
    markdown is the comment's body and its JSON says the same `since`."""
    from bot.core.required import HEAD_SEEN_KEY
    from bot.render.stamp import parse_stamp

    head = pull(env, 71)
    green(env, head, "lint")
    env.world.set_required_checks(REPO, ["ci / build"])
    once(env, capsys)
    body = comment_of(env, 71)
    stamp = parse_stamp(body)
    assert stamp is not None
    since = stamp.seen(head, HEAD_SEEN_KEY)
    assert since is not None
    state = env.tmp / "state.sqlite3"
    for kept in (True, False):
        if not kept:
            state.unlink()
        env.sandbox.clear_requests()
        [never] = expected_of(show(env, capsys, 71))
        assert never["since"] == since.strftime("%Y-%m-%dT%H:%M:%SZ"), kept
        assert show_markdown(env, capsys, 71).rstrip("\n") == body, kept
        assert writes(env.sandbox) == []
    assert not state.exists()  # show never creates a state


def test_a_failed_re_read_of_the_rules_keeps_the_last_good_set_and_edits_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The required set is read again when its hour is up; a 502 on that read is no new fact:
    the set last read stands (as RTD's last good evidence does) and the comment stays."""
    from bot.state.store import to_text

    head = pull(env, 80)
    green(env, head, "lint")
    env.world.set_required_checks(REPO, ["lint", "ci / build"])
    once(env, capsys)
    first = comment_of(env, 80)
    assert "`ci / build`" in first
    with sqlite3.connect(env.tmp / "state.sqlite3") as db:
        aged = db.execute(
            "UPDATE required_sets SET read_at = ?", (to_text(NOW - timedelta(hours=2)),)
        )
        assert aged.rowcount == 1
    env.sandbox.fail("POST", "/graphql", 502, times=-1, when="query RequiredChecks")
    env.sandbox.clear_requests()
    once(env, capsys)
    assert "RequiredChecks" in operations(env)  # it was asked again, and failed
    assert writes(env.sandbox) == []
    assert comment_of(env, 80) == first


def test_a_stamp_someone_else_edited_is_not_trusted_on_the_rest_path(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """REST's comment listing says nothing of the last editor: before trusting the stamp of a
    comment found that way the bot asks GitHub who edited it last (`show`, and `once` when the
    GraphQL listing failed), so a forged observed time is never printed nor adopted."""
    import base64

    head = pull(env, 72)
    green(env, head, "lint")
    env.world.add_check_run(REPO, head, name="tests", workflow="ci", conclusion="failure",
                            started_at=HOUR_AGO, completed_at=HOUR_AGO)  # fmt: skip
    once(env, capsys)
    [comment] = bot_comments(env.world, 72)
    marker, line, rest = comment["body"].split("\n", 2)
    data = line.split()[3]
    stamp = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
    stamp["o"] = 978_307_200 * 10**6  # 2001-01-01
    forged = base64.urlsafe_b64encode(json.dumps(stamp, separators=(",", ":")).encode())
    body = "\n".join([marker, line.replace(data, forged.decode().rstrip("=")), rest])
    env.world.edit_comment(comment["id"], body, editor="mallory")
    (env.tmp / "state.sqlite3").unlink()
    from bot.render.stamp import parse_stamp

    shown = show_markdown(env, capsys, 72)
    assert "2001" not in shown
    stamp_shown = parse_stamp(shown)  # dated now, not by the forged stamp
    assert stamp_shown is not None and stamp_shown.observed_at >= NOW - timedelta(minutes=5)
    env.sandbox.fail("POST", "/graphql", 502, times=-1, when="query PullComments")
    once(env, capsys)
    kept = comment_of(env, 72)
    assert "2001" not in kept
    stamp_kept = parse_stamp(kept)
    assert stamp_kept is not None and stamp_kept.observed_at >= NOW - timedelta(minutes=5)


# -- issue 24 item 6: rulesets that require nothing, organisation rulesets ------------------------


def test_a_ruleset_in_evaluate_mode_or_disabled_requires_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 24)
    green(env, head, "lint")
    env.world.add_ruleset(REPO, "Trial", ["e2e"], enforcement="EVALUATE")
    env.world.add_ruleset(REPO, "Old", ["integration"], enforcement="DISABLED")
    report = show(env, capsys, 24)
    assert expected_of(report) == []
    assert report["required_checks"]["contexts"] == []
    assert report["verdict"] == "passing"


def test_an_organisation_ruleset_on_the_base_branch_counts_like_a_repository_one(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 25)
    green(env, head, "lint")
    env.world.add_ruleset(REPO, "Org policy", ["security"], source="Organization")
    report = show(env, capsys, 25)
    [never] = expected_of(report)
    assert never["name"] == "security" and never["required"] is True
    assert never["finding"] == "Not reported on this commit; required by ruleset `Org policy`."
    assert report["verdict"] == "pending"


# -- issue 24 item 5: a required check pinned to an app by branch protection ----------------------

ACTIONS_APP_ID = 15368  # GitHub Actions' app id (bot_sandbox.world.KNOWN_APPS, as on GitHub)


def test_a_context_branch_protection_pins_to_an_app_is_not_reported_by_another_app(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Classic protection's "expected source": `DCO` pinned to the DCO app, reported only by a
    GitHub Actions check of that name, is not reported (GitHub keeps waiting); the finding
    names both apps. The pin is read from REST's branch answer (read access)."""
    head = pull(env, 26)
    green(env, head, "DCO")  # GitHub Actions' check named DCO
    green(env, head, "tests")
    env.world.set_required_checks(REPO, [("DCO", DCO_APP_ID), "tests"])
    report = show(env, capsys, 26)
    [never] = expected_of(report)
    assert never["name"] == "DCO" and never["required"] is True
    assert never["finding"] == (
        "Not reported on this commit; required by branch protection of `main`. Required from "
        f"the app with id {DCO_APP_ID}; reported by github-actions."
    )
    assert report["verdict"] == "pending"
    assert report["required_checks"]["apps"] == [DCO_APP_ID, None]
    env.world.add_check_run(
        REPO, head, name="DCO", app_slug="dco", started_at=HOUR_AGO, completed_at=HOUR_AGO
    )
    assert show(env, capsys, 26)["verdict"] == "passing"


def test_pins_that_cannot_be_read_are_said_once(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    head = pull(env, 27)
    green(env, head, "DCO")
    env.world.set_required_checks(REPO, [("DCO", DCO_APP_ID)])
    env.world.repo(REPO).branch_errors["main"] = 403
    body = show_markdown(env, capsys, 27)
    said = "Which app branch protection of main requires each check from could not be read"
    assert body.count(said) == 1, body
    report = show(env, capsys, 27)
    assert report["verdict"] == "passing"  # the name is reported; the note says what is unknown
