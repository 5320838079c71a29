"""The fault matrix: the real CLI, as a subprocess, against the sandbox's fault rules.

Every case asserts the exit status and the summary line, the number of the bot's comments on
each pull request (never more than one), that nothing was sent outside the allowlist, that no
secret appears in any output; the `run` cases also that SIGTERM ends whatever the service was
waiting for (the wait the bot logs as cut short, or the read it leaves after its grace).
"""

from __future__ import annotations

import base64
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from support import (
    ABANDONED,
    LOGIN,
    REPO,
    RTD,
    STOPPED,
    STOPPED_INTO,
    TOKEN,
    WAITING,
    LoggedRun,
    Waits,
    bot_comments,
    clean_env,
    cli,
    cut_short,
    outside_allowlist,
    seed_case,
    write_config,
    writes,
)

from bot.core.model import MARKER
from bot_sandbox import Recorded, Sandbox, World

OTHER = "octo/other"
RTD_TOKEN = "rtd-test-token"
SECRETS = (TOKEN, RTD_TOKEN)
COMMENTS = r"/repos/octo/omni/issues/\d+/comments"
BUILDS = rf"/projects/{RTD}/builds/"
GRAPHQL = r"/graphql"
CLI_TIMEOUT_S = 120  # a hang guard: a pagination loop fails instead of blocking the suite (a
# loaded machine takes many times longer than the 2-5 s of an idle one; 25 s was missed)


@dataclass
class Ctx:
    """One case's world, sandbox, config and a second origin that must never be asked."""

    world: World
    sandbox: Sandbox
    elsewhere: Sandbox
    config: Path
    tmp: Path
    sha: str
    waits: Waits = field(default_factory=Waits)  # the bot's waits, recorded, none taken


@dataclass(frozen=True)
class Case:
    """One fault, what the bot must do about it."""

    name: str
    arrange: Callable[[Ctx], None]
    exit: int
    summary: tuple[str, ...] = ()  # substrings of the summary line ("" : no cycle ran)
    comments: dict[tuple[str, int], int] = field(
        default_factory=lambda: {(REPO, 7430): 1, (OTHER, 1): 1}
    )
    check: Callable[[Ctx, subprocess.CompletedProcess[str]], None] | None = None
    config: Callable[[str, Ctx], str] | None = None


# -- building blocks ------------------------------------------------------------------------


def _world() -> tuple[World, str]:
    world = World()
    now = datetime.now(UTC)
    sha = seed_case(world, now=now)
    world.add_repo(OTHER)
    other_sha = "1" * 40
    world.add_pull(OTHER, 1, title="green", author="bob", head_sha=other_sha)
    world.add_check_run(OTHER, other_sha, name="tests", app_slug="github-actions",
                        workflow="ci", started_at=now, completed_at=now)  # fmt: skip
    return world, sha


def _config(tmp: Path, sandbox: Sandbox) -> Path:
    path = write_config(tmp, sandbox)
    text = path.read_text(encoding="utf-8")
    text = text.replace("[readthedocs]\n", f'[readthedocs]\ntoken = "{RTD_TOKEN}"\n')
    path.write_text(text + f'[[repos]]\nname = "{OTHER}"\n', encoding="utf-8")
    return path


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _gh_fail(method: str, path: str, status: int, **kw: Any) -> Callable[[Ctx], None]:
    def arrange(ctx: Ctx) -> None:
        ctx.sandbox.fail(method, path, status, **kw)

    return arrange


def _rtd_fail(status: int, **kw: Any) -> Callable[[Ctx], None]:
    return _gh_fail("GET", BUILDS, status, **kw)


def _repeat_pull_cursor(payload: Any) -> Any:
    """A page of open pull requests names a next page at the cursor it was asked with (the
    repository's other queries, which `when` matches too, are answered as they are)."""
    page = ((payload.get("data") or {}).get("repository") or {}).get("pullRequests")
    if page is not None:
        page["pageInfo"] = {"hasNextPage": True, "endCursor": _cursor(0)}
    return payload


def _context_cursor_repeats(ctx: Ctx) -> None:
    """octo/other#1 has 101 contexts; the page past the first 100 repeats its cursor."""
    now = datetime.now(UTC)
    for index in range(100):
        ctx.world.add_check_run(OTHER, "1" * 40, name=f"job {index}", app_slug="github-actions",
                                workflow="matrix", started_at=now, completed_at=now)  # fmt: skip

    def repeat(payload: Any) -> Any:
        contexts = payload["data"]["repository"]["p0"]["statusCheckRollup"]["contexts"]
        contexts["pageInfo"] = {"hasNextPage": True, "endCursor": _cursor(100)}
        return payload

    ctx.sandbox.fail("POST", GRAPHQL, 200, times=-1, when="MoreContexts", transform=repeat)


def _comment_link_loop(ctx: Ctx) -> None:
    _rest_listing(ctx)
    url = f"{ctx.sandbox.github_url}/repos/{REPO}/issues/7430/comments?page=2"
    ctx.sandbox.fail("GET", r"/repos/octo/omni/issues/7430/comments", 200, times=-1,
                     body="[]", headers={"Link": f'<{url}>; rel="next"'})  # fmt: skip


def _rest_listing(ctx: Ctx) -> None:
    """The batched GraphQL listing of comments fails: each pull request's are listed over REST."""
    ctx.sandbox.fail("POST", GRAPHQL, 502, times=-1, when="PullComments")


def _bad_rest_listing(ctx: Ctx) -> None:
    _rest_listing(ctx)
    ctx.sandbox.fail("GET", COMMENTS, 200, times=-1, body="{not json")


def _rtd_next_repeats(ctx: Ctx) -> None:
    def same(page: Any) -> Any:
        page["next"] = f"{ctx.sandbox.rtd_url}/projects/{RTD}/builds/?commit={ctx.sha}&limit=100"
        return page

    ctx.sandbox.fail("GET", BUILDS, 200, times=-1, transform=same)


def _rtd_next_elsewhere(ctx: Ctx) -> None:
    def foreign(page: Any) -> Any:
        page["next"] = f"{ctx.elsewhere.rtd_url}/projects/{RTD}/builds/?commit={ctx.sha}&offset=1"
        page["count"] = 2
        return page

    ctx.sandbox.fail("GET", BUILDS, 200, times=-1, transform=foreign)


def _retry_after_date(seconds: float) -> Callable[[Ctx], None]:
    def when() -> str:  # read when the sandbox answers
        return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)

    def arrange(ctx: Ctx) -> None:
        ctx.sandbox.fail("GET", BUILDS, 429, headers={"Retry-After": when})

    return arrange


def _limit_once(reset_in_s: float, *, times: int = 1) -> Callable[[Ctx], None]:
    """The first GraphQL request (`times` of them) meets an exhausted primary limit that
    resets `reset_in_s` after the answer."""

    def reset() -> str:  # read when the sandbox answers
        return str(int(time.time() + reset_in_s))

    def arrange(ctx: Ctx) -> None:
        ctx.sandbox.fail("POST", GRAPHQL, 403, times=times,
                         headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
                         body={"message": "API rate limit exceeded"})  # fmt: skip

    return arrange


def _check_waited_for_reset(ctx: Ctx, _: Any) -> None:
    graphql = [r for r in ctx.sandbox.requests if r.path == "/graphql"]
    assert (
        graphql[0].status == 403
        and max(ctx.waits.between(graphql[0].at, graphql[1].at), default=0.0) >= 1.0
    )


def _primary_limit(resource: str, reset_in_s: float) -> Callable[[Ctx], None]:
    def arrange(ctx: Ctx) -> None:
        ctx.sandbox.set_rate_limit(resource, remaining=0, reset_in_s=reset_in_s)

    return arrange


def _reread_rate_limited(ctx: Ctx) -> None:
    """The comment exists; the facts change; the pre-edit re-read meets a rate limit."""
    first = cli("once", "--config", str(ctx.config), sleep=ctx.waits)
    assert first.returncode == 0, first.stderr
    now = datetime.now(UTC)
    ctx.world.add_check_run(REPO, ctx.sha, name="lint", app_slug="github-actions",
                            workflow="lint", conclusion="failure", started_at=now,
                            completed_at=now)  # fmt: skip
    ctx.sandbox.fail("POST", GRAPHQL, 403, when="query Comments(", times=-1,
                     headers={"Retry-After": "120"},
                     body={"message": "You have exceeded a secondary rate limit."})  # fmt: skip
    ctx.sandbox.clear_requests()


def _secondary_on_create(ctx: Ctx) -> None:
    ctx.sandbox.fail("POST", COMMENTS, 403, times=-1, headers={"Retry-After": "60"},
                     body={"message": "You have exceeded a secondary rate limit."})  # fmt: skip


def _posts(sandbox: Sandbox) -> list[Recorded]:
    return [w for w in writes(sandbox) if w.method == "POST"]


def _rtd_gap(ctx: Ctx) -> float:
    """The longest wait the bot took between the throttled read and its retry."""
    times = [r.at for r in ctx.sandbox.requests if r.service == "rtd" and "/builds/" in r.path]
    assert len(times) >= 2, "the throttled read was not retried"
    return max(ctx.waits.between(times[0], times[1]), default=0.0)


def _check_rtd_waited(least: float) -> Callable[[Ctx, Any], None]:
    def check(ctx: Ctx, _: Any) -> None:
        assert _rtd_gap(ctx) >= least
        assert _rtd_read(ctx)

    return check


def _rtd_read(ctx: Ctx) -> bool:
    """Whether the builds were read (the cancelled newest build's notifications were asked)."""
    return any(
        r.service == "rtd" and r.path.endswith("/notifications/") for r in ctx.sandbox.requests
    )


def _check_not_verified(ctx: Ctx, _: Any) -> None:
    assert not _rtd_read(ctx)  # RTD could not be read: the comment claims nothing from it


def _check_never_asked_elsewhere(ctx: Ctx, result: Any) -> None:
    assert ctx.elsewhere.requests == [], "a request went to a host that is not configured"
    _check_not_verified(ctx, result)


def _check_three_posts(ctx: Ctx, _: Any) -> None:
    posts = _posts(ctx.sandbox)
    assert [p.status for p in posts if p.path.endswith("/7430/comments")] == [502, 502, 201]
    lists = [r for r in ctx.sandbox.requests if r.method == "GET" and "/7430/comments" in r.path]
    listed = [r for r in ctx.sandbox.requests if b"PullComments" in r.body and b"omni" in r.body]
    assert len(listed) == 1 and len(lists) >= 2  # looked before every create: never blind


def _closed_port_config(text: str, ctx: Ctx) -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return text.replace(ctx.sandbox.base_url, f"http://127.0.0.1:{port}", 1)


def _rtd_closed_port(text: str, ctx: Ctx) -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return text.replace(
        f'api_url = "{ctx.sandbox.rtd_url}"', f'api_url = "http://127.0.0.1:{port}/rtd/api/v3"'
    )


def _rtd_timeout_config(text: str, _: Ctx) -> str:
    return text.replace("[readthedocs]\n", "[readthedocs]\ntimeout_seconds = 0.5\n")


NONE_WRITTEN: dict[tuple[str, int], int] = {(REPO, 7430): 0, (OTHER, 1): 0}
ONLY_OTHER: dict[tuple[str, int], int] = {(REPO, 7430): 0, (OTHER, 1): 1}
PULL_PAGE_OMNI = '"name": "omni"'

CASES = [
    Case("no fault", lambda ctx: None, 0, ("comments created 2",)),
    Case("GraphQL 502 twice, then answers", _gh_fail("POST", GRAPHQL, 502, times=2), 0,
         ("comments created 2",)),
    Case("GraphQL connection dropped once", _gh_fail("POST", GRAPHQL, 0, times=1), 0,
         ("comments created 2",)),
    Case("GraphQL 502 for the first repository", _gh_fail("POST", GRAPHQL, 502, times=-1,
         when=PULL_PAGE_OMNI), 1, ("could not process: octo/omni",), ONLY_OTHER),
    Case("GraphQL errors at 200", _gh_fail("POST", GRAPHQL, 200, times=-1, when=PULL_PAGE_OMNI,
         body={"data": None, "errors": [{"message": "Something went wrong"}]}), 1,
         ("could not process: octo/omni",), ONLY_OTHER),
    Case("GraphQL '{not json' for the first repository",
         _gh_fail("POST", GRAPHQL, 200, times=1, when=PULL_PAGE_OMNI, body="{not json"), 1,
         ("could not process: octo/omni",), ONLY_OTHER),
    Case("GraphQL cursor repeats", _gh_fail("POST", GRAPHQL, 200, times=-1, when=PULL_PAGE_OMNI,
         transform=_repeat_pull_cursor), 1, ("could not process: octo/omni",)),
    Case("GraphQL contexts cursor repeats", _context_cursor_repeats, 1,
         ("could not process: octo/other",), {(REPO, 7430): 1, (OTHER, 1): 0}),
    Case("REST comment list: Link repeats", _comment_link_loop, 1,
         ("could not process: octo/omni#7430",), ONLY_OTHER),
    Case("REST comment list: '{not json'", _bad_rest_listing, 1,
         ("could not process: octo/omni#7430",), ONLY_OTHER),
    Case("create answered 502 twice, then 201", _gh_fail("POST", COMMENTS, 502, times=2), 0,
         ("comments created 2",), check=_check_three_posts),
    Case("create answered 502 after it landed", _gh_fail("POST", COMMENTS, 502, apply=True), 0,
         ("comments created 2",)),
    Case("secondary rate limit on the creates", _secondary_on_create, 1,
         ("GitHub refused", "octo/omni#7430", "octo/other#1"), NONE_WRITTEN),
    Case("secondary rate limit on a read (retry-after 1)", _gh_fail("POST", GRAPHQL, 403,
         times=1, headers={"Retry-After": "1"}), 0, ("comments created 2",)),
    Case("primary limit exhausted, reset in an hour", _primary_limit("graphql", 3600), 1,
         ("could not process: octo/omni", "octo/other"), NONE_WRITTEN),
    Case("primary limit exhausted, reset in 2 s", _limit_once(2), 0,
         ("comments created 2",), check=_check_waited_for_reset),
    Case("rate limit during the pre-edit re-read", _reread_rate_limited, 1,
         ("octo/omni#7430",)),
    Case("RTD down (503)", _rtd_fail(503, times=-1), 0, ("comments created 2",),
         check=_check_not_verified),
    Case("RTD '{not json'", _rtd_fail(200, times=-1, body="{not json"), 0,
         ("comments created 2",), check=_check_not_verified),
    Case("RTD timeout", _rtd_fail(200, times=-1, apply=True, delay_s=1.5), 0,
         ("comments created 2",), check=_check_not_verified, config=_rtd_timeout_config),
    Case("RTD connection refused", lambda ctx: None, 0, ("comments created 2",),
         check=_check_not_verified, config=_rtd_closed_port),
    Case("RTD 429 Retry-After 1 s", _rtd_fail(429, headers={"Retry-After": "1"}), 0,
         ("comments created 2",), check=_check_rtd_waited(1.0)),
    Case("RTD 429 Retry-After as an HTTP date", _retry_after_date(2.0), 0,
         ("comments created 2",), check=_check_rtd_waited(1.0)),
    Case("RTD next repeats", _rtd_next_repeats, 0, ("comments created 2",),
         check=_check_not_verified),
    Case("RTD next to another origin", _rtd_next_elsewhere, 0, ("comments created 2",),
         check=_check_never_asked_elsewhere),
    Case("GitHub connection refused", lambda ctx: None, 1, (), NONE_WRITTEN,
         config=_closed_port_config),
]  # fmt: skip


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[Ctx]:
    world, sha = _world()
    with Sandbox(world) as sandbox, Sandbox(World()) as elsewhere:
        yield Ctx(world, sandbox, elsewhere, _config(tmp_path, sandbox), tmp_path, sha)


def _counts(world: World) -> dict[tuple[str, int], int]:
    def own(repo: str, number: int) -> int:
        return sum(
            1
            for c in world.comments(repo, number)
            if c["user"]["login"] == LOGIN and c["body"].startswith(MARKER)
        )

    return {(REPO, 7430): own(REPO, 7430), (OTHER, 1): own(OTHER, 1)}


def _assert_clean(ctx: Ctx, *outputs: str) -> None:
    refused = outside_allowlist(ctx.sandbox)
    assert refused == [], f"requests outside the allowlist: {refused}"
    for text in outputs:
        for secret in SECRETS:
            assert secret not in text, "a secret was printed"
        assert "Traceback" not in text


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_once_under_fault(ctx: Ctx, case: Case) -> None:
    if case.config is not None:
        ctx.config.write_text(case.config(ctx.config.read_text(encoding="utf-8"), ctx))
    case.arrange(ctx)
    result = cli("once", "--config", str(ctx.config), timeout=CLI_TIMEOUT_S, sleep=ctx.waits)
    summary = next((ln for ln in result.stdout.splitlines() if ln.startswith("cycle:")), "")
    assert result.returncode == case.exit, (result.stdout, result.stderr)
    if case.summary or case.exit == 0:
        assert summary, f"no summary line: {result.stdout!r} {result.stderr!r}"
    for text in case.summary:
        assert text in summary, summary
    assert _counts(ctx.world) == case.comments
    if case.exit == 1:
        assert result.stderr.strip(), "exit 1 says why"
    _assert_clean(ctx, result.stdout, result.stderr)
    if case.check is not None:
        case.check(ctx, result)


# -- kill -9 at a random point of the writes -------------------------------------------------


def test_kill_9_at_a_random_point_of_the_writes_leaves_one_comment_each(ctx: Ctx) -> None:
    now = datetime.now(UTC)
    for number in (7501, 7502):
        sha = f"{number:040x}"
        ctx.world.add_pull(REPO, number, title=f"pr {number}", author="bob", head_sha=sha)
        ctx.world.add_check_run(REPO, sha, name="tests", app_slug="github-actions",
                                workflow="ci", started_at=now, completed_at=now)  # fmt: skip
    seed = random.randrange(1 << 30)
    delay = random.Random(seed).uniform(0.0, 3.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "once", "--config", str(ctx.config)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not writes(ctx.sandbox) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    proc.kill()
    proc.communicate(timeout=10)
    result = cli("once", "--config", str(ctx.config), timeout=CLI_TIMEOUT_S, sleep=ctx.waits)
    assert result.returncode == 0, (seed, result.stderr)
    for number in (7430, 7501, 7502):
        assert len(bot_comments(ctx.world, number)) == 1, f"seed {seed}, killed after {delay:.2f}s"
    _assert_clean(ctx, result.stdout, result.stderr)


# -- `run` stops at once, whatever it is waiting for ----------------------------------------
# What is asserted is what the bot says it waited for, on its own monotonic clock (its log),
# never how fast this machine runs: a loaded machine stretches every wall-clock figure alike.
# The seconds from SIGTERM to exit are the figures of benchmarks/stop.py, which runs these
# same cases.


@dataclass(frozen=True)
class Wait:
    """A fault that makes `run` wait, how to tell from the log that it is met, and what the
    stop must have ended: "wait" (a wait of the bot's own of at least `least_s`, ended by the
    stop), "read" (a read in flight, left after the grace) or "idle" (between cycles)."""

    name: str
    arrange: Callable[[Ctx], None]
    met: Callable[[Ctx, str], bool]
    ended: str = "wait"
    least_s: float = 0.0
    policy: dict[str, Any] = field(default_factory=dict)


def _waiting(least_s: float) -> Callable[[Ctx, str], bool]:
    """Met once the bot logs that it began a wait of at least `least_s`."""
    return lambda ctx, log: any(float(s) >= least_s for s in WAITING.findall(log))


def _read_held(ctx: Ctx, log: str) -> bool:
    """Met once the sandbox holds a GraphQL answer back (it records a request on arrival)."""
    return any(r.path == "/graphql" for r in ctx.sandbox.requests)


def _cycle_ended(ctx: Ctx, log: str) -> bool:
    return "cycle:" in log


def _wait(name: str, arrange: Callable[[Ctx], None], least_s: float, **policy: Any) -> Wait:
    return Wait(name, arrange, _waiting(least_s), "wait", least_s, policy)


WAITS = [
    _wait("RTD 429 Retry-After 30 s", _rtd_fail(429, times=-1, headers={"Retry-After": "30"}),
          30.0),
    # a date has whole seconds: 29 s and a fraction may be left when the bot reads it
    _wait("RTD 429 Retry-After as a date 30 s ahead", _retry_after_date(30), 29.0),
    # the reset is 50 s from the answer, however long start-up took (less what a loaded
    # machine takes between the sandbox's answer and the bot's reading it: 7 s at load 25)
    _wait("GitHub primary limit, reset in 50 s", _limit_once(50, times=-1), 30.0),
    _wait("GitHub 502 backoff", _gh_fail("POST", GRAPHQL, 502, times=-1), 1.0),
    Wait("GitHub cursor repeats", _gh_fail("POST", GRAPHQL, 200, times=-1,
         when=PULL_PAGE_OMNI, transform=_repeat_pull_cursor), _cycle_ended, "idle"),
    Wait("a slow answer (25 s)", _gh_fail("POST", GRAPHQL, 200, times=1, apply=True,
         delay_s=25), _read_held, "read"),
    _wait("write pacing 30 s", lambda ctx: None, 25.0, min_seconds_between_writes=30.0),
]  # fmt: skip


@dataclass(frozen=True)
class Stop:
    """`run` stopped inside a fault: its exit status, stdout and log, and the seconds from
    SIGTERM to exit (measured for benchmarks/stop.py; the tests do not assert them)."""

    returncode: int
    out: str
    log: str
    took_s: float


def stop_inside(ctx: Ctx, wait: Wait) -> Stop:
    """Start `run` on the case's world, SIGTERM it once the fault is met, see it exit."""
    extra = "".join(f"{k} = {v!r}\n" for k, v in wait.policy.items())
    text = ctx.config.read_text(encoding="utf-8").replace("[policy]\n", "[policy]\n" + extra)
    head, _, repos = text.partition("[[repos]]")
    ctx.config.write_text(f'{head}[log]\nlevel = "DEBUG"\n[[repos]]{repos}', encoding="utf-8")
    wait.arrange(ctx)
    run = LoggedRun(ctx.config, ctx.tmp)
    try:
        run.wait_until(lambda log: wait.met(ctx, log), "the fault was met")
    finally:
        took = run.stop()
    return Stop(run.proc.returncode, run.out_path.read_text(encoding="utf-8"), run.log(), took)


@pytest.mark.parametrize("wait", WAITS, ids=[w.name for w in WAITS])
def test_run_stops_at_once_whatever_it_waits_for(ctx: Ctx, wait: Wait) -> None:
    stop = stop_inside(ctx, wait)
    assert stop.returncode == 0, stop.log
    assert STOPPED.search(stop.log), stop.log[-2000:]  # the service's shutdown ran to its end
    if wait.ended == "wait":  # the wait the fault asked for, cut short by the stop
        assert cut_short(stop.log, least_s=wait.least_s), stop.log[-2000:]
        assert ABANDONED not in stop.log  # the cycle ended as its wait did: nothing left behind
    elif wait.ended == "read":  # the read in flight is not waited for past the grace
        assert ABANDONED in stop.log, stop.log[-2000:]
    else:  # between cycles: nothing of the bot's own was waiting
        assert not STOPPED_INTO.search(stop.log) and ABANDONED not in stop.log, stop.log[-2000:]
    assert all(n <= 1 for n in _counts(ctx.world).values())
    _assert_clean(ctx, stop.out, stop.log)
