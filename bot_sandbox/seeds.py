"""Ready-made worlds: the demo pull requests (seed case first) and a large one for benchmarks."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from bot_sandbox.world import World

LOGIN = "ci-status-bot"
TOKEN = "sandbox-token"
DEMO_REPO = "octo/omni"
DEMO_RTD = "omni-docs"
SCALE_REPO = "octo/big"
SCALE_RTD = "big-docs"

RTD_PENDING = "Read the Docs build is in progress!"
RTD_SUCCESS = "Read the Docs build succeeded!"
RTD_FAILED = "Read the Docs build failed!"

DCO_SUMMARY = (
    "There is one commit incorrectly signed off.  This means that the author of this commit "
    "failed to include a Signed-off-by line in the commit message.\n\n"
    "To avoid having PRs blocked in the future, always include "
    "`Signed-off-by: Author Name <authoremail@example.com>` in *every* commit message. "
    "You can also do this automatically by using the -s flag (i.e., `git commit -s`).\n\n"
    "Here is how to fix the problem so that this code can be merged.\n\n"
    "---\n\n"
    "### Rebase the branch\n\n"
    "If you have a local git environment and meet the criteria below, one option is to "
    "rebase the branch and add your Signed-off-by lines in the new commits.\n\n"
    "---\n\n"
    "Details:\n\n"
)


def _sha(seed: str, prefix: str = "") -> str:
    digest = hashlib.sha1(seed.encode()).hexdigest()
    return (prefix + digest)[:40]


def _ensure_account(world: World) -> None:
    with world.lock:
        if TOKEN not in world.tokens:
            world.add_user(login=LOGIN, token=TOKEN)


def _rtd_build_url(slug: str, build_id: int) -> str:
    return f"https://readthedocs.org/projects/{slug}/builds/{build_id}/"


def _green_checks(world: World, repo: str, sha: str, at: datetime) -> list[str]:
    world.add_check_run(
        repo,
        sha,
        name="DCO",
        app_slug="dco",
        started_at=at,
        completed_at=at,
        title="DCO",
        summary="All commits are signed off!",
        details_url="https://github.com/dcoapp/app#how-it-works",
    )
    for offset, py in ((1, "3.11"), (2, "3.12")):
        world.add_check_run(
            repo,
            sha,
            name=f"build-wheel ({py})",
            app_slug="github-actions",
            workflow="wheels",
            started_at=at + timedelta(minutes=offset),
            completed_at=at + timedelta(minutes=offset + 4),
        )
    world.add_check_run(
        repo,
        sha,
        name="pre-commit",
        app_slug="pre-commit-ci",
        started_at=at + timedelta(minutes=1),
        completed_at=at + timedelta(minutes=2),
        details_url=f"https://results.pre-commit.ci/run/github/1/{int(at.timestamp())}",
    )
    return ["DCO", "build-wheel (3.11)", "build-wheel (3.12)", "pre-commit"]


def seed_demo(world: World, *, now: datetime | None = None) -> dict[str, Any]:
    """Seed ci-status-bot (token sandbox-token), octo/omni PRs 7430-7434 and RTD omni-docs."""
    now = now or world.now()
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    now = now.astimezone(UTC)
    morning = now.replace(hour=9, minute=12, second=0, microsecond=0)
    if morning > now:
        morning -= timedelta(days=1)
    _ensure_account(world)
    world.add_repo(DEMO_REPO)
    world.add_rtd_project(DEMO_RTD)
    pulls: dict[int, dict[str, Any]] = {}

    # 7430: the seed case - green checks, RTD status pending forever, build cancelled on RTD.
    sha = _sha("omni-7430", "eb46d06")
    world.add_pull(
        DEMO_REPO,
        7430,
        title="Add the omni resolver",
        author="alice",
        head_sha=sha,
        draft=True,
        labels=("docs",),
        created_at=morning - timedelta(hours=3),
    )
    checks = _green_checks(world, DEMO_REPO, sha, morning - timedelta(minutes=10))
    world.add_status(
        DEMO_REPO,
        sha,
        context=f"docs/readthedocs.org:{DEMO_RTD}",
        state="pending",
        description=RTD_PENDING,
        target_url=_rtd_build_url(DEMO_RTD, 34894885),
        created_at=morning,
        creator="read-the-docs-community[bot]",
    )
    world.add_rtd_build(
        DEMO_RTD,
        id=34894885,
        commit=sha,
        version="7430",
        state="cancelled",
        success=False,
        created=morning,
        finished=None,
        duration=0,
    )
    world.add_rtd_notification(DEMO_RTD, 34894885, "build:user:cancelled")
    pulls[7430] = {
        "head_sha": sha,
        "case": "seed: checks pass; RTD status pending on GitHub, build cancelled on RTD",
        "passing": checks,
        "rtd_build": 34894885,
        "expected_verdict": "incomplete",
    }

    # 7431: one failing test job.
    sha = _sha("omni-7431")
    at = now - timedelta(minutes=50)
    world.add_pull(
        DEMO_REPO,
        7431,
        title="Speed up the parser",
        author="bob",
        head_sha=sha,
        created_at=now - timedelta(hours=5),
    )
    world.add_check_run(DEMO_REPO, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at)
    world.add_check_run(
        DEMO_REPO,
        sha,
        name="tests (3.11)",
        workflow="tests",
        started_at=at,
        completed_at=at + timedelta(minutes=7),
    )
    world.add_check_run(
        DEMO_REPO,
        sha,
        name="tests (3.12)",
        workflow="tests",
        conclusion="failure",
        started_at=at,
        completed_at=at + timedelta(minutes=6),
        title="1 failed, 812 passed",
        summary="tests/test_parser.py::test_unicode_escape FAILED",
        annotations=(
            {
                "path": "tests/test_parser.py",
                "start_line": 88,
                "annotation_level": "failure",
                "message": "AssertionError: assert '\\u00e9' == 'é'",
            },
            {
                "path": ".github",
                "start_line": 31,
                "annotation_level": "failure",
                "message": "Process completed with exit code 1.",
            },
        ),
    )
    pulls[7431] = {"head_sha": sha, "case": "tests (3.12) failed", "expected_verdict": "failing"}

    # 7432: RTD finished successfully; GitHub still shows the status pending.
    sha = _sha("omni-7432")
    at = now - timedelta(hours=3)
    world.add_pull(
        DEMO_REPO,
        7432,
        title="Document the config file",
        author="carol",
        head_sha=sha,
        labels=("docs",),
        created_at=now - timedelta(days=1),
    )
    world.add_check_run(DEMO_REPO, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at)
    world.add_status(
        DEMO_REPO,
        sha,
        context=f"docs/readthedocs.org:{DEMO_RTD}",
        state="pending",
        description=RTD_PENDING,
        target_url=_rtd_build_url(DEMO_RTD, 34894990),
        created_at=at,
        creator="read-the-docs-community[bot]",
    )
    world.add_rtd_build(
        DEMO_RTD,
        id=34894990,
        commit=sha,
        version="7432",
        state="finished",
        success=True,
        created=at,
        finished=at + timedelta(minutes=2),
        duration=118,
    )
    pulls[7432] = {
        "head_sha": sha,
        "case": "RTD build finished (success) while GitHub still shows pending",
        "rtd_build": 34894990,
    }

    # 7433: DCO action_required, one offending commit.
    sha = _sha("omni-7433")
    at = now - timedelta(minutes=30)
    world.add_pull(
        DEMO_REPO,
        7433,
        title="Fix typo in README",
        author="dana",
        head_sha=sha,
        created_at=now - timedelta(hours=2),
    )
    world.add_commit(
        DEMO_REPO,
        sha,
        message="Fix typo in README",
        author_name="Dana Doe",
        author_email="dana@example.org",
        date=at,
    )
    offending = (
        f"Commit sha: [{sha[:7]}](https://github.com/{DEMO_REPO}/pull/7433/commits/{sha}), "
        "Author: Dana Doe, Committer: Dana Doe; The sign-off is missing."
    )
    world.add_check_run(
        DEMO_REPO,
        sha,
        name="DCO",
        app_slug="dco",
        conclusion="action_required",
        started_at=at,
        completed_at=at,
        title="DCO",
        summary=DCO_SUMMARY + offending,
        details_url="https://github.com/dcoapp/app#how-it-works",
    )
    world.add_check_run(
        DEMO_REPO, sha, name="pre-commit", app_slug="pre-commit-ci", started_at=at, completed_at=at
    )
    pulls[7433] = {"head_sha": sha, "case": "DCO action_required", "expected_verdict": "failing"}

    # 7434: everything green, RTD included.
    sha = _sha("omni-7434")
    at = now - timedelta(hours=1)
    world.add_pull(
        DEMO_REPO,
        7434,
        title="Bump version to 2.4.0",
        author="erin",
        head_sha=sha,
        created_at=now - timedelta(hours=1, minutes=10),
    )
    checks = _green_checks(world, DEMO_REPO, sha, at)
    world.add_rtd_build(
        DEMO_RTD,
        id=34895012,
        commit=sha,
        version="7434",
        state="finished",
        success=True,
        created=at,
        finished=at + timedelta(minutes=2),
        duration=101,
    )
    # The same commit built as the branch version `latest` too: it never settles the PR's status.
    world.add_rtd_build(
        DEMO_RTD,
        id=34895013,
        commit=sha,
        version="latest",
        state="finished",
        success=True,
        created=at + timedelta(minutes=5),
        finished=at + timedelta(minutes=7),
        duration=97,
    )
    world.add_status(
        DEMO_REPO,
        sha,
        context=f"docs/readthedocs.org:{DEMO_RTD}",
        state="success",
        description=RTD_SUCCESS,
        target_url=f"https://{DEMO_RTD}--7434.org.readthedocs.build/en/7434/",
        created_at=at + timedelta(minutes=2),
        creator="read-the-docs-community[bot]",
    )
    pulls[7434] = {"head_sha": sha, "case": "all green", "expected_verdict": "passing"}

    return {
        "repo": DEMO_REPO,
        "login": LOGIN,
        "token": TOKEN,
        "rtd_project": DEMO_RTD,
        "now": now,
        "pulls": pulls,
    }


def seed_scale(
    world: World,
    *,
    prs: int,
    checks: int,
    now: datetime | None = None,
    rng_seed: int = 0,
    repos: int = 1,
    failing_fraction: float | None = None,
) -> dict[str, Any]:
    """Seed octo/big with `prs` open PRs of `checks` contexts each (some heads > 100).

    With `repos` > 1 the pull requests are spread over octo/big-00, octo/big-01, ... (numbers
    stay unique across them, so each has its own Read the Docs builds). Each check run fails
    with 3 % chance, unless `failing_fraction` is given: then that fraction of heads fails,
    each with one failing check run. A failing Actions run carries GitHub Actions' annotations
    (a test's failure and the generic exit-code one).
    """
    now = (now or world.now()).astimezone(UTC)
    rng = random.Random(rng_seed)
    _ensure_account(world)
    names = [SCALE_REPO] if repos <= 1 else [f"{SCALE_REPO}-{i:02d}" for i in range(repos)]
    for name in names:
        world.add_repo(name)
        world.set_required_checks(name, ["DCO", "job-001", "ci/external-00"])  # protection
        world.add_ruleset(name, "Main", [("DCO", 1861), "job-002"])  # the DCO app's id
    world.add_rtd_project(SCALE_RTD)
    big = set(range(0, prs, max(1, prs // max(2, prs // 200)))) if prs else set()
    rtd_cases = {"running": 0, "cancelled": 0, "finished": 0}
    with world.lock:
        for index in range(prs):
            number = 1000 + index
            sha = f"{rng.getrandbits(160):040x}"
            created = now - timedelta(hours=rng.randint(1, 24 * 30))
            world.add_pull(
                names[index % len(names)],
                number,
                title=f"Change {number}",
                author=f"dev{index % 37}",
                head_sha=sha,
                draft=index % 9 == 0,
                created_at=created,
            )
            count = max(checks, 120) if index in big else checks
            fails = None if failing_fraction is None else rng.random() < failing_fraction
            _scale_contexts(world, rng, sha, count, now, names[index % len(names)], fails=fails)
            if index % 10 == 0:
                case = _scale_docs(
                    world, rng, number, sha, now, index // 10 % 3, names[index % len(names)]
                )
                rtd_cases[case] += 1
    return {
        "repo": names[0],
        "repos": names,
        "login": LOGIN,
        "token": TOKEN,
        "rtd_project": SCALE_RTD,
        "prs": prs,
        "checks": checks,
        "big_heads": sorted(1000 + i for i in big),
        "rtd_cases": rtd_cases,
        "failing_fraction": failing_fraction,
    }


def _age(rng: random.Random) -> timedelta:
    """Minutes or hours ago, never 60-200 minutes: with the default 120-minute stale limit no
    signal turns stale during a benchmark run, so "nothing changed" really means nothing."""
    minutes = rng.randint(5, 55) if rng.random() < 0.5 else rng.randint(200, 600)
    return timedelta(minutes=minutes)


def _scale_contexts(
    world: World,
    rng: random.Random,
    sha: str,
    count: int,
    now: datetime,
    repo: str = SCALE_REPO,
    *,
    fails: bool | None = None,
) -> None:
    """A head's contexts; `fails` (when not None) says whether exactly one check run fails."""
    statuses = count // 10
    failing = rng.randrange(1, count - statuses) if fails and count - statuses > 1 else None
    for k in range(count - statuses):
        roll = rng.random()
        at = now - _age(rng)
        if k == 0:
            world.add_check_run_record(
                repo, sha, name="DCO", app_slug="dco", started_at=at, completed_at=at
            )
            continue
        status, conclusion = "completed", "success"
        conclusion_or_none: str | None
        if fails is None and roll < 0.03:
            conclusion = "failure"
        elif fails is not None and roll < 0.03:
            pass  # the failure, if any, is the chosen run's
        elif roll < 0.06:
            status = "in_progress"
        elif roll < 0.08:
            conclusion = "skipped"
        if k == failing:
            status, conclusion = "completed", "failure"
        conclusion_or_none = None if status == "in_progress" else conclusion
        world.add_check_run_record(
            repo,
            sha,
            name=f"job-{k:03d}",
            workflow=f"ci-{k % 4}",
            status=status,
            conclusion=conclusion_or_none,
            started_at=at,
            completed_at=at + timedelta(minutes=3),
            annotations=failure_annotations(k) if conclusion_or_none == "failure" else (),
        )
    for k in range(statuses):
        at = now - _age(rng)
        world.add_status(
            repo,
            sha,
            context=f"ci/external-{k:02d}",
            state="success",
            description="Build finished.",
            created_at=at,
        )


def failure_annotations(k: int) -> tuple[dict[str, Any], ...]:
    """What GitHub Actions leaves on a failed test job: the test's failure, then its own
    generic line (the shape of real Actions annotations: path `.github` for the latter)."""
    return (
        {
            "path": f"tests/test_job_{k:03d}.py",
            "start_line": 10 + k,
            "annotation_level": "failure",
            "message": f"AssertionError: assert {k} == {k + 1}",
        },
        {
            "path": ".github",
            "start_line": 40,
            "annotation_level": "failure",
            "message": "Process completed with exit code 1.",
        },
    )


def _scale_docs(
    world: World,
    rng: random.Random,
    number: int,
    sha: str,
    now: datetime,
    case: int,
    repo: str = SCALE_REPO,
) -> str:
    build_id = 40000000 + number
    at = now - _age(rng)
    context = f"docs/readthedocs.org:{SCALE_RTD}"
    target = _rtd_build_url(SCALE_RTD, build_id)
    if case == 0:
        world.add_status(
            repo,
            sha,
            context=context,
            state="pending",
            description=RTD_PENDING,
            target_url=target,
            created_at=at,
        )
        world.add_rtd_build(
            SCALE_RTD,
            id=build_id,
            commit=sha,
            version=str(number),
            state="building",
            success=None,
            created=at,
        )
        return "running"
    if case == 1:
        world.add_status(
            repo,
            sha,
            context=context,
            state="pending",
            description=RTD_PENDING,
            target_url=target,
            created_at=at,
        )
        world.add_rtd_build(
            SCALE_RTD,
            id=build_id,
            commit=sha,
            version=str(number),
            state="cancelled",
            success=False,
            created=at,
            duration=0,
        )
        world.add_rtd_notification(SCALE_RTD, build_id, "build:user:cancelled")
        return "cancelled"
    world.add_rtd_build(
        SCALE_RTD,
        id=build_id,
        commit=sha,
        version=str(number),
        state="finished",
        success=True,
        created=at,
        finished=at + timedelta(minutes=2),
        duration=120,
    )
    world.add_status(
        repo,
        sha,
        context=context,
        state="success",
        description=RTD_SUCCESS,
        target_url=f"https://{SCALE_RTD}--{number}.org.readthedocs.build/en/{number}/",
        created_at=at + timedelta(minutes=2),
    )
    return "finished"


def change_heads(
    world: World, fraction: float, rng_seed: int = 0, *, repo: str | None = None
) -> list[dict[str, Any]]:
    """Give `fraction` of open heads a new check state (a rerun with the other conclusion)."""
    rng = random.Random(rng_seed)
    changed: list[dict[str, Any]] = []
    with world.lock:
        names = [repo] if repo else sorted(world.repos)
        pulls = [
            (name, pull)
            for name in names
            for pull in sorted(world.repo(name).pulls.values(), key=lambda p: p.number)
            if pull.state == "open"
        ]
        if not pulls or fraction <= 0:
            return changed
        chosen = rng.sample(pulls, min(len(pulls), max(1, round(fraction * len(pulls)))))
        for name, pull in sorted(chosen, key=lambda item: (item[0], item[1].number)):
            runs = world.latest_check_runs(name, pull.head_sha)
            now = world.now()
            if not runs:
                world.add_status(
                    name,
                    pull.head_sha,
                    context="ci/sandbox-change",
                    state="success",
                    description="Changed by the sandbox.",
                    created_at=now,
                )
                changed.append(
                    {
                        "repo": name,
                        "number": pull.number,
                        "head_sha": pull.head_sha,
                        "context": "ci/sandbox-change",
                        "state": "success",
                    }
                )
                continue
            old = rng.choice(runs)
            new = "failure" if old.conclusion == "success" else "success"
            suite = world.repo(name).suites[old.suite_id]
            world.add_check_run_record(
                name,
                pull.head_sha,
                name=old.name,
                app_slug=suite.app_slug,
                workflow=suite.workflow,
                conclusion=new,
                started_at=now,
                completed_at=now,
                annotations=failure_annotations(len(changed)) if new == "failure" else (),
            )
            changed.append(
                {
                    "repo": name,
                    "number": pull.number,
                    "head_sha": pull.head_sha,
                    "context": old.name,
                    "state": new,
                }
            )
    return changed
