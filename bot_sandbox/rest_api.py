"""GitHub REST routes of the sandbox, answered from the World with GitHub-shaped payloads."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import unquote, urlencode

from bot_sandbox.world import (
    API,
    JSON,
    WEB,
    Answer,
    Call,
    CheckRunRec,
    RepoRec,
    World,
    app_json,
    check_run_json,
    comment_json,
    commit_json,
    compare_json,
    installation_json,
    integration_json,
    iso,
    node_id,
    pull_json,
    repo_json,
    status_json,
    user_json,
)

DOCS = "https://docs.github.com/rest"
MAX_COMMENT = 65536
T = TypeVar("T")
Handler = Callable[[Call, dict[str, str]], Answer]


def error(status: int, message: str, doc: str = DOCS, **extra: Any) -> Answer:
    """A GitHub error answer: message, documentation_url and status."""
    return Answer(
        status, {"message": message, **extra, "documentation_url": doc, "status": str(status)}
    )


def not_found() -> Answer:
    """GitHub's 404."""
    return error(404, "Not Found")


@dataclass(frozen=True)
class Route:
    """One REST endpoint."""

    method: str
    pattern: re.Pattern[str]
    kind: str
    handler: Handler
    auth: str = "token"  # "token" (user or installation token) or "jwt" (the app itself)


_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
ROUTES: list[Route] = []


def route(
    method: str, pattern: str, kind: str, *, auth: str = "token"
) -> Callable[[Handler], Handler]:
    """Register a handler for METHOD + path regex."""

    def register(func: Handler) -> Handler:
        ROUTES.append(Route(method, re.compile(pattern), kind, func, auth))
        return func

    return register


def normalize(world: World, path: str) -> str:
    """Map /repositories/{id}/... onto /repos/{owner}/{name}/..."""
    found = re.match(r"/repositories/(\d+)(/.*)?$", path)
    if found is None:
        return path
    rec = world.repos_by_id.get(int(found.group(1)))
    if rec is None:
        return path
    return f"/repos/{rec.full_name}{found.group(2) or ''}"


def match(world: World, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route and path parameters for a request, or None."""
    path = normalize(world, path)
    for candidate in ROUTES:
        if candidate.method != method:
            continue
        found = candidate.pattern.fullmatch(path)
        if found:
            return candidate, found.groupdict()
    return None


# -- helpers ---------------------------------------------------------------------------------


def _repo(call: Call, params: dict[str, str]) -> RepoRec | None:
    return call.world.find_repo(f"{params['owner']}/{params['repo']}")


def _json_body(call: Call) -> Any:
    import json

    try:
        return json.loads(call.body or b"{}")
    except ValueError:
        return None


def paginate(
    call: Call, rec: RepoRec, items: Sequence[T], *, default: int = 30
) -> tuple[list[T], dict[str, str]]:
    """One page of items and GitHub's Link header (absolute /repositories/{id} URLs)."""
    per_page = max(1, min(100, call.int_arg("per_page", default)))
    page = max(1, call.int_arg("page", 1))
    start = (page - 1) * per_page
    chunk = list(items[start : start + per_page])
    last = max(1, -(-len(items) // per_page))
    if last == 1 and page == 1:
        return chunk, {}
    rest = re.sub(r"^/repos/[^/]+/[^/]+", "", normalize(call.world, call.path))
    base = f"{call.github_url}/repositories/{rec.id}{rest}"

    def link(number: int, rel: str) -> str:
        query = [(k, v) for k, vs in call.query.items() if k != "page" for v in vs]
        query.append(("page", str(number)))
        return f'<{base}?{urlencode(query)}>; rel="{rel}"'

    links = []
    if page > 1:
        links.append(link(min(page - 1, last), "prev"))
    if page < last:
        links.append(link(page + 1, "next"))
        links.append(link(last, "last"))
    if page > 1:
        links.append(link(1, "first"))
    return chunk, {"Link": ", ".join(links)}


def resolve_ref(rec: RepoRec, ref: str) -> str | None:
    """A full sha for a sha, unique sha prefix or pull head branch name."""
    if ref in rec.commits:
        return ref
    if len(ref) >= 7 and re.fullmatch(r"[0-9a-f]+", ref):
        hits = [sha for sha in rec.commits if sha.startswith(ref)]
        if len(hits) == 1:
            return hits[0]
    for pull in rec.pulls.values():
        if pull.head_ref == ref or ref == f"refs/pull/{pull.number}/head":
            return pull.head_sha
    return None


def _no_commit(ref: str) -> Answer:
    return error(422, f"No commit found for SHA: {ref}", f"{DOCS}/commits/commits#get-a-commit")


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# -- accounts and apps -----------------------------------------------------------------------


@route("GET", r"/user", "user")
def get_user(call: Call, params: dict[str, str]) -> Answer:
    """GET /user (an installation token is refused, as on GitHub)."""
    assert call.login is not None
    if call.login.endswith("[bot]"):
        return error(
            403,
            "Resource not accessible by integration",
            f"{DOCS}/users/users#get-the-authenticated-user",
        )
    return Answer(200, user_json(call.world.user(call.login)))


@route("GET", r"/users/(?P<login>[^/]+)", "users")
def get_user_by_login(call: Call, params: dict[str, str]) -> Answer:
    """GET /users/{login}."""
    rec = call.world.users.get(params["login"])
    return Answer(200, user_json(rec)) if rec else not_found()


@route("GET", r"/app", "app", auth="jwt")
def get_app(call: Call, params: dict[str, str]) -> Answer:
    """GET /app (the app named by the JWT)."""
    app = call.world.apps.get(call.login or "")
    return Answer(200, app_json(app)) if app else not_found()


@route("GET", _REPO + r"/installation", "installation", auth="jwt")
def get_installation(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/installation."""
    full = f"{params['owner']}/{params['repo']}"
    app = call.world.installation_for(call.login or "", full)
    if app is None or full not in call.world.repos:
        return error(
            404,
            "Not Found",
            f"{DOCS}/apps/apps#get-a-repository-installation-for-the-authenticated-app",
        )
    return Answer(200, installation_json(app, params["owner"]))


@route("GET", r"/app/installations", "app_installations", auth="jwt")
def list_app_installations(call: Call, params: dict[str, str]) -> Answer:
    """GET /app/installations: every installation of the App named by the JWT (paginated)."""
    found = call.world.app_installations(call.login or "")
    per_page = max(1, min(100, call.int_arg("per_page", 30)))
    page = max(1, call.int_arg("page", 1))
    chunk = found[(page - 1) * per_page : page * per_page]
    headers: dict[str, str] = {}
    if page * per_page < len(found):
        query = urlencode({"per_page": per_page, "page": page + 1})
        headers["Link"] = f'<{call.github_url}/app/installations?{query}>; rel="next"'
    body = [installation_json(a, a.account or _owner_of(a)) for a in chunk]
    return Answer(200, body, headers=headers)


def _owner_of(app: Any) -> str:
    return app.repos[0].split("/", 1)[0] if app.repos else f"account-{app.installation_id}"


@route("GET", r"/installation/repositories", "installation_repositories")
def list_installation_repositories(call: Call, params: dict[str, str]) -> Answer:
    """GET /installation/repositories: the repositories the installation token reaches."""
    rec = call.world.token_record(call.token or "")
    app = (
        None
        if rec is None or rec.installation_id is None
        else (call.world.app_by_installation(rec.installation_id))
    )
    if app is None:
        doc = f"{DOCS}/apps/installations#list-repositories-accessible-to-the-app-installation"
        return error(403, "This endpoint requires an installation token", doc)
    repos = [r for name in app.repos if (r := call.world.find_repo(name)) is not None]
    per_page = max(1, min(100, call.int_arg("per_page", 30)))
    page = max(1, call.int_arg("page", 1))
    chunk = repos[(page - 1) * per_page : page * per_page]
    headers: dict[str, str] = {}
    if page * per_page < len(repos):
        query = urlencode({"per_page": per_page, "page": page + 1})
        headers["Link"] = f'<{call.github_url}/installation/repositories?{query}>; rel="next"'
    body = {
        "total_count": len(repos),
        "repository_selection": "selected",
        "repositories": [repo_json(r, world=call.world) for r in chunk],
    }
    return Answer(200, body, headers=headers)


@route("POST", r"/app/installations/(?P<iid>\d+)/access_tokens", "access_tokens", auth="jwt")
def create_access_token(call: Call, params: dict[str, str]) -> Answer:
    """POST /app/installations/{id}/access_tokens: a fresh one-hour token."""
    app = call.world.app_by_installation(int(params["iid"]))
    if app is None or app.slug != call.login:
        return not_found()
    if app.suspended_at is not None:
        doc = f"{DOCS}/apps/apps#create-an-installation-access-token-for-an-app"
        return error(403, "This installation has been suspended", doc)
    token = "ghs_" + secrets.token_hex(18)
    rec = call.world.issue_installation_token(app, token)
    return Answer(
        201,
        {
            "token": token,
            "expires_at": iso(rec.expires_at),
            "permissions": {"checks": "read", "issues": "write", "metadata": "read"},
            "repository_selection": "selected",
        },
    )


# -- repositories and pulls -----------------------------------------------------------------


@route("GET", _REPO, "repo")
def get_repo(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}."""
    rec = _repo(call, params)
    return Answer(200, repo_json(rec, world=call.world)) if rec else not_found()


@route("GET", _REPO + r"/pulls", "pulls.list")
def list_pulls(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/pulls (state, sort, direction, per_page, page)."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    state = call.arg("state", "open")
    pulls = [p for p in rec.pulls.values() if state == "all" or p.state == state]
    sort = call.arg("sort", "created")
    direction = call.arg("direction", "desc")
    key: Callable[[Any], Any] = {
        "updated": lambda p: (p.updated_at, p.number),
        "popularity": lambda p: p.number,
        "long-running": lambda p: (p.created_at, p.number),
    }.get(sort or "created", lambda p: (p.created_at, p.number))
    pulls.sort(key=key, reverse=direction != "asc")
    page, headers = paginate(call, rec, pulls)
    return Answer(200, [pull_json(call.world, rec, p) for p in page], headers=headers)


@route("GET", _REPO + r"/pulls/(?P<number>\d+)", "pulls.get")
def get_pull(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/pulls/{n}."""
    rec = _repo(call, params)
    pull = rec.pulls.get(int(params["number"])) if rec else None
    if rec is None or pull is None:
        return error(404, "Not Found", f"{DOCS}/pulls/pulls#get-a-pull-request")
    return Answer(200, pull_json(call.world, rec, pull, full=True))


@route("GET", _REPO + r"/issues/(?P<number>\d+)", "issues.get")
def get_issue(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/issues/{n} (pull requests only)."""
    rec = _repo(call, params)
    pull = rec.pulls.get(int(params["number"])) if rec else None
    if rec is None or pull is None:
        return error(404, "Not Found", f"{DOCS}/issues/issues#get-an-issue")
    data = pull_json(call.world, rec, pull)
    issue = {
        k: data[k]
        for k in (
            "url", "id", "node_id", "html_url", "number", "state", "locked", "title", "user",
            "body", "labels", "assignee", "assignees", "milestone", "created_at", "updated_at",
            "closed_at", "author_association", "draft",
        )
    }  # fmt: skip
    issue["url"] = data["issue_url"]
    issue["comments_url"] = data["comments_url"]
    issue["comments"] = len(call.world.comment_records(rec.full_name, pull.number))
    issue["pull_request"] = {
        "url": data["url"],
        "html_url": data["html_url"],
        "diff_url": data["diff_url"],
        "patch_url": data["patch_url"],
        "merged_at": None,
    }
    return Answer(200, issue)


@route("GET", _REPO + r"/commits/(?P<ref>[^/]+)", "commits.get")
def get_commit(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/commits/{ref} (a minimal commit)."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    sha = resolve_ref(rec, params["ref"])
    if sha is None:
        return _no_commit(params["ref"])
    return Answer(200, commit_json(rec, rec.commits[sha]))


@route("GET", _REPO + r"/branches/(?P<branch>[^/?#]+)", "branches.get")
def get_branch(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/branches/{branch}: the shape a read token gets (a real answer:
    tests/data/real/branch_protected.json), branch protection's checks with their app_id."""
    rec = _repo(call, params)
    branch = unquote(params["branch"])
    if rec is None:
        return not_found()
    refused = rec.branch_errors.get(branch)
    if refused is not None:
        return error(refused, "Resource not accessible by integration")
    names = rec.required_checks.get(branch)
    pins = rec.required_apps.get(branch, {})
    checks = [{"context": n, "app_id": pins.get(n)} for n in names or ()]
    protection: dict[str, Any] = {
        "enabled": names is not None,
        "required_status_checks": {
            "enforcement_level": "non_admins" if names else "off",
            "contexts": list(names or ()),
            "checks": checks,
        },
    }
    api = f"{API}/repos/{rec.full_name}"
    return Answer(
        200,
        {
            "name": branch,
            "_links": {
                "self": f"{api}/branches/{branch}",
                "html": f"{WEB}/{rec.full_name}/tree/{branch}",
            },
            "protected": names is not None,
            "protection": protection,
            "protection_url": f"{api}/branches/{branch}/protection",
        },
    )


@route("GET", _REPO + r"/compare/(?P<base>[^?#]+?)\.\.\.(?P<head>[^/?#]+)", "compare")
def compare(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/compare/{base}...{head}: GitHub's shape (tests/data/real/dco/
    compare.json), one commit a page; either side a branch or a commit, the merge base the
    World's (of the two commits)."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    world, asked = call.world, (unquote(params["base"]), params["head"])
    head, branch = resolve_ref(rec, asked[1]), world.is_branch(rec.full_name, asked[0])
    base = world.branch_tip(rec.full_name, asked[0]) if branch else resolve_ref(rec, asked[0])
    if head is None or base is None:
        return not_found()
    merge = world.merge_base(rec.full_name, asked[0] if branch else base, head)
    if merge is None:
        return error(404, f"No common ancestor between {asked[0]} and {asked[1]}.", DOCS)
    answer = compare_json(rec, asked, base, head, merge)
    answer["commits"] = answer["commits"][: call.int_arg("per_page", 250)]
    return Answer(200, answer)


# -- checks and statuses --------------------------------------------------------------------


def _runs_for(call: Call, rec: RepoRec, sha: str) -> list[CheckRunRec]:
    world = call.world
    if call.arg("filter", "latest") == "all":
        runs = world.all_check_runs(rec.full_name, sha)
    else:
        runs = world.latest_check_runs(rec.full_name, sha)
    if call.arg("check_name"):
        runs = [r for r in runs if r.name == call.arg("check_name")]
    if call.arg("status"):
        runs = [r for r in runs if r.status == call.arg("status")]
    if call.arg("app_id"):
        runs = [
            r
            for r in runs
            if (integration_json(r.app_slug) or {}).get("id") == call.int_arg("app_id", -1)
        ]
    return sorted(runs, key=lambda r: r.id, reverse=True)


@route("GET", _REPO + r"/commits/(?P<ref>[^/]+)/check-runs", "check-runs.list")
def list_check_runs(call: Call, params: dict[str, str]) -> Answer:
    """GET .../commits/{ref}/check-runs (filter=latest|all, status, check_name, paginated)."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    sha = resolve_ref(rec, params["ref"])
    if sha is None:
        return _no_commit(params["ref"])
    runs = _runs_for(call, rec, sha)
    page, headers = paginate(call, rec, runs)
    body = {"total_count": len(runs), "check_runs": [check_run_json(call.world, r) for r in page]}
    return Answer(200, body, headers=headers)


@route("GET", _REPO + r"/check-runs/(?P<id>\d+)", "check-runs.get")
def get_check_run(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/check-runs/{id}."""
    run = call.world.check_runs.get(int(params["id"]))
    if run is None or run.repo != f"{params['owner']}/{params['repo']}":
        return not_found()
    return Answer(200, check_run_json(call.world, run))


@route("GET", _REPO + r"/check-runs/(?P<id>\d+)/annotations", "check-runs.annotations")
def list_annotations(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/check-runs/{id}/annotations (paginated, as created)."""
    run = call.world.check_runs.get(int(params["id"]))
    rec = _repo(call, params)
    if run is None or rec is None or run.repo != rec.full_name:
        return not_found()
    page, headers = paginate(call, rec, list(run.annotations))
    blob = f"{WEB}/{rec.full_name}/blob/{run.head_sha}"
    body = [{**a, "blob_href": f"{blob}/{a['path']}"} for a in page]
    return Answer(200, body, headers=headers)


def _suite_json(call: Call, rec: RepoRec, suite_id: int) -> JSON:
    suite = rec.suites[suite_id]
    runs = [r for r in rec.checks.get(suite.head_sha, []) if r.suite_id == suite_id]
    if any(r.status != "completed" for r in runs):
        status, conclusion = "in_progress", None
    else:
        status = "completed"
        conclusions = {r.conclusion for r in runs}
        conclusion = next(
            (
                c
                for c in ("action_required", "cancelled", "timed_out", "failure", "neutral")
                if c in conclusions
            ),
            "success",
        )
    return {
        "id": suite.id,
        "node_id": node_id("CheckSuite", suite.id),
        "head_branch": None,
        "head_sha": suite.head_sha,
        "status": status,
        "conclusion": conclusion,
        "url": f"{API}/repos/{rec.full_name}/check-suites/{suite.id}",
        "before": None,
        "after": suite.head_sha,
        "pull_requests": [],
        "app": integration_json(suite.app_slug),
        "created_at": iso(suite.created_at),
        "updated_at": iso(
            max(
                (r.completed_at or r.started_at or suite.created_at for r in runs),
                default=suite.created_at,
            )
        ),
        "latest_check_runs_count": len({r.name for r in runs}),
        "check_runs_url": f"{API}/repos/{rec.full_name}/check-suites/{suite.id}/check-runs",
        "rerequestable": True,
        "runs_rerequestable": False,
    }


@route("GET", _REPO + r"/check-suites/(?P<id>\d+)", "check-suites.get")
def get_check_suite(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/check-suites/{id}."""
    rec = _repo(call, params)
    if rec is None or int(params["id"]) not in rec.suites:
        return not_found()
    return Answer(200, _suite_json(call, rec, int(params["id"])))


@route("GET", _REPO + r"/actions/runs/(?P<id>\d+)", "actions.runs.get")
def get_workflow_run(call: Call, params: dict[str, str]) -> Answer:
    """GET /repos/{o}/{r}/actions/runs/{id}: a workflow run with its triggering `event`."""
    rec = _repo(call, params)
    run_id = int(params["id"])
    suite = next((s for s in rec.suites.values() if s.run_id == run_id), None) if rec else None
    if rec is None or suite is None:
        return not_found()
    base = f"{API}/repos/{rec.full_name}"
    pulls = [p for p in rec.pulls.values() if p.head_sha == suite.head_sha]
    return Answer(
        200,
        {
            "id": run_id,
            "name": suite.workflow,
            "node_id": node_id("WorkflowRun", run_id),
            "head_branch": pulls[0].head_ref if pulls else None,
            "head_sha": suite.head_sha,
            "run_number": run_id % 10000,
            "event": suite.event,
            "status": _suite_json(call, rec, suite.id)["status"],
            "conclusion": _suite_json(call, rec, suite.id)["conclusion"],
            "check_suite_id": suite.id,
            "url": f"{base}/actions/runs/{run_id}",
            "html_url": f"https://github.com/{rec.full_name}/actions/runs/{run_id}",
            "created_at": iso(suite.created_at),
            "pull_requests": [],
        },
    )


@route("GET", _REPO + r"/commits/(?P<ref>[^/]+)/check-suites", "check-suites.list")
def list_check_suites(call: Call, params: dict[str, str]) -> Answer:
    """GET .../commits/{ref}/check-suites."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    sha = resolve_ref(rec, params["ref"])
    if sha is None:
        return _no_commit(params["ref"])
    ids = sorted(s.id for s in rec.suites.values() if s.head_sha == sha)
    page, headers = paginate(call, rec, ids)
    body = {"total_count": len(ids), "check_suites": [_suite_json(call, rec, i) for i in page]}
    return Answer(200, body, headers=headers)


def combined_state(states: Sequence[str]) -> str:
    """The combined state of commit statuses (pending when there are none)."""
    if any(s in ("error", "failure") for s in states):
        return "failure"
    if not states or any(s == "pending" for s in states):
        return "pending"
    return "success"


@route("GET", _REPO + r"/commits/(?P<ref>[^/]+)/status", "status.combined")
def combined_status(call: Call, params: dict[str, str]) -> Answer:
    """GET .../commits/{ref}/status: latest per context, paginated (30 by default)."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    sha = resolve_ref(rec, params["ref"])
    if sha is None:
        return _no_commit(params["ref"])
    latest = call.world.latest_statuses(rec.full_name, sha)
    page, headers = paginate(call, rec, latest)
    body = {
        "state": combined_state([s.state for s in latest]),
        "statuses": [status_json(call.world, rec, s, with_creator=False) for s in page],
        "sha": sha,
        "total_count": len(latest),
        "repository": repo_json(rec, world=call.world),
        "commit_url": f"{API}/repos/{rec.full_name}/commits/{sha}",
        "url": f"{API}/repos/{rec.full_name}/commits/{sha}/status",
    }
    return Answer(200, body, headers=headers)


@route("GET", _REPO + r"/commits/(?P<ref>[^/]+)/statuses", "statuses.list")
@route("GET", _REPO + r"/statuses/(?P<ref>[^/]+)", "statuses.list")
def list_statuses(call: Call, params: dict[str, str]) -> Answer:
    """GET .../commits/{ref}/statuses: the full history, newest first."""
    rec = _repo(call, params)
    if rec is None:
        return not_found()
    sha = resolve_ref(rec, params["ref"])
    if sha is None:
        return Answer(200, [])
    history = sorted(rec.statuses.get(sha, []), key=lambda s: (s.created_at, s.id), reverse=True)
    page, headers = paginate(call, rec, history)
    return Answer(
        200, [status_json(call.world, rec, s, with_creator=True) for s in page], headers=headers
    )


# -- comments (the bot's only write) ---------------------------------------------------------


@route("GET", _REPO + r"/issues/(?P<number>\d+)/comments", "comments.list")
def list_comments(call: Call, params: dict[str, str]) -> Answer:
    """GET .../issues/{n}/comments (ascending id, since, per_page, page)."""
    rec = _repo(call, params)
    if rec is None or int(params["number"]) not in rec.pulls:
        return not_found()
    comments = call.world.comment_records(rec.full_name, int(params["number"]))
    since = _parse_time(call.arg("since"))
    if since is not None:
        comments = [c for c in comments if c.updated_at >= since]
    page, headers = paginate(call, rec, comments)
    return Answer(200, [comment_json(call.world, c) for c in page], headers=headers)


def _body_problem(payload: Any, doc: str) -> Answer | None:
    if not isinstance(payload, dict) or not isinstance(payload.get("body"), str):
        return error(422, 'Invalid request.\n\n"body" wasn\'t supplied.', doc)
    if len(payload["body"]) > MAX_COMMENT:
        return error(
            422,
            "Validation Failed",
            doc,
            errors=[
                {
                    "resource": "IssueComment",
                    "code": "unprocessable",
                    "field": "data",
                    "message": f"Body is too long (maximum is {MAX_COMMENT} characters)",
                }
            ],
        )
    return None


@route("POST", _REPO + r"/issues/(?P<number>\d+)/comments", "comments.create")
def create_comment(call: Call, params: dict[str, str]) -> Answer:
    """POST .../issues/{n}/comments: a comment by the token's login."""
    rec = _repo(call, params)
    if rec is None or int(params["number"]) not in rec.pulls:
        return not_found()
    payload = _json_body(call)
    problem = _body_problem(payload, f"{DOCS}/issues/comments#create-an-issue-comment")
    if problem:
        return problem
    assert call.login is not None
    with call.world.lock:
        if call.world.twin_creates > 0:  # another run created it a moment before this one
            call.world.twin_creates -= 1
            call.world.add_comment(
                rec.full_name, int(params["number"]), author=call.login, body=payload["body"]
            )
        data = call.world.add_comment(
            rec.full_name, int(params["number"]), author=call.login, body=payload["body"]
        )
    return Answer(201, data, headers={"Location": data["url"]})


def _own_comment(call: Call, params: dict[str, str]) -> tuple[int, Answer | None]:
    rec = _repo(call, params)
    comment = call.world.comment_recs.get(int(params["id"]))
    if rec is None or comment is None or comment.deleted or comment.repo != rec.full_name:
        return 0, not_found()
    return comment.id, None


@route("GET", _REPO + r"/issues/comments/(?P<id>\d+)", "comments.get")
def get_comment(call: Call, params: dict[str, str]) -> Answer:
    """GET .../issues/comments/{id}."""
    ident, problem = _own_comment(call, params)
    if problem:
        return problem
    return Answer(200, comment_json(call.world, call.world.comment_recs[ident]))


def _not_author(call: Call, ident: int, doc: str) -> Answer | None:
    if call.world.comment_recs[ident].author == call.login:
        return None
    if (call.login or "").endswith("[bot]"):
        return error(403, "Resource not accessible by integration", doc)
    return error(403, "Must have admin rights to Repository.", doc)


@route("PATCH", _REPO + r"/issues/comments/(?P<id>\d+)", "comments.edit")
def edit_comment(call: Call, params: dict[str, str]) -> Answer:
    """PATCH .../issues/comments/{id} (only the author may)."""
    doc = f"{DOCS}/issues/comments#update-an-issue-comment"
    ident, problem = _own_comment(call, params)
    if problem:
        return problem
    payload = _json_body(call)
    problem = _not_author(call, ident, doc) or _body_problem(payload, doc)
    if problem:
        return problem
    return Answer(200, call.world.edit_comment(ident, payload["body"], editor=call.login))


@route("DELETE", _REPO + r"/issues/comments/(?P<id>\d+)", "comments.delete")
def delete_comment(call: Call, params: dict[str, str]) -> Answer:
    """DELETE .../issues/comments/{id} (only the author may)."""
    ident, problem = _own_comment(call, params)
    if problem:
        return problem
    problem = _not_author(call, ident, f"{DOCS}/issues/comments#delete-an-issue-comment")
    if problem:
        return problem
    call.world.delete_comment(ident)
    return Answer(204)


# -- rate limit ------------------------------------------------------------------------------


@route("GET", r"/rate_limit", "rate_limit")
def rate_limit(call: Call, params: dict[str, str]) -> Answer:
    """GET /rate_limit (filled in by the server, which owns the counters)."""
    return Answer(200, None, charge=False)


# -- endpoints that alter CI: recorded, answered, never executed ---------------------------


def _ack(status: int) -> Handler:
    def answer(call: Call, params: dict[str, str]) -> Answer:
        return Answer(status, None if status == 204 else {})

    return answer


for _pattern, _kind in (
    (r"/check-runs/\d+/rerequest", "ci.rerequest-check-run"),
    (r"/check-suites/\d+/rerequest", "ci.rerequest-check-suite"),
    (r"/actions/runs/\d+/rerun", "ci.rerun"),
    (r"/actions/runs/\d+/rerun-failed-jobs", "ci.rerun-failed-jobs"),
    (r"/actions/jobs/\d+/rerun", "ci.rerun-job"),
    (r"/actions/runs/\d+/approve", "ci.approve"),
    (r"/actions/runs/\d+/cancel", "ci.cancel"),
    (r"/actions/runs/\d+/force-cancel", "ci.force-cancel"),
):
    route("POST", _REPO + _pattern, _kind)(_ack(202 if "cancel" in _kind else 201))
route("POST", _REPO + r"/dispatches", "ci.repository-dispatch")(_ack(204))
route("POST", _REPO + r"/actions/workflows/[^/]+/dispatches", "ci.workflow-dispatch")(_ack(204))


@route("POST", _REPO + r"/statuses/(?P<sha>[0-9a-fA-F]+)", "ci.create-status")
def create_status(call: Call, params: dict[str, str]) -> Answer:
    """POST /repos/{o}/{r}/statuses/{sha}: a plausible 201, nothing stored."""
    payload = _json_body(call) or {}
    now = iso(call.world.now())
    full = f"{params['owner']}/{params['repo']}"
    login = call.login or "unknown"
    return Answer(
        201,
        {
            "url": f"{API}/repos/{full}/statuses/{params['sha']}",
            "id": 1,
            "node_id": node_id("StatusContext", 1),
            "state": payload.get("state"),
            "description": payload.get("description"),
            "target_url": payload.get("target_url"),
            "context": payload.get("context", "default"),
            "created_at": now,
            "updated_at": now,
            "creator": user_json(call.world.user(login)),
        },
    )


@route("POST", _REPO + r"/check-runs", "ci.create-check-run")
@route("PATCH", _REPO + r"/check-runs/(?P<id>\d+)", "ci.update-check-run")
def create_check_run(call: Call, params: dict[str, str]) -> Answer:
    """POST/PATCH check runs: a plausible answer, nothing stored."""
    payload = _json_body(call) or {}
    full = f"{params['owner']}/{params['repo']}"
    now = iso(call.world.now() - timedelta(seconds=0))
    ident = int(params.get("id") or 1)
    return Answer(
        201 if call.method == "POST" else 200,
        {
            "id": ident,
            "name": payload.get("name"),
            "head_sha": payload.get("head_sha"),
            "url": f"{API}/repos/{full}/check-runs/{ident}",
            "status": payload.get("status", "queued"),
            "conclusion": payload.get("conclusion"),
            "started_at": now,
            "completed_at": None,
            "output": {"title": None, "summary": None, "text": None, "annotations_count": 0},
            "check_suite": {"id": 1},
            "app": None,
            "pull_requests": [],
        },
    )


@route("POST", _REPO + r"/check-suites", "ci.create-check-suite")
def create_check_suite(call: Call, params: dict[str, str]) -> Answer:
    """POST check-suites: a plausible answer, nothing stored."""
    payload = _json_body(call) or {}
    return Answer(201, {"id": 1, "head_sha": payload.get("head_sha"), "status": "queued"})
