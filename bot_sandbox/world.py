"""The sandbox's state: users, apps, repositories, pulls, checks, statuses, comments, RTD builds."""

from __future__ import annotations

import base64
import hashlib
import itertools
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

API = "https://api.github.com"
WEB = "https://github.com"
RTD_API = "https://readthedocs.org/api/v3"
APP_PERMISSIONS = {  # what the bot's App asks for (README, "Credentials")
    "checks": "read", "issues": "write", "metadata": "read", "pull_requests": "read",
    "statuses": "read",
}  # fmt: skip
ACTIONS_APP_ID = 15368  # the `github-actions` App that issues GITHUB_TOKEN

JSON = dict[str, Any]

RTD_STATE_NAMES = {
    "triggered": "Triggered",
    "cloning": "Cloning",
    "installing": "Installing",
    "building": "Building",
    "uploading": "Uploading",
    "finished": "Finished",
    "cancelled": "Cancelled",
}

RTD_MESSAGES = {
    "build:user:cancelled": ("Build cancelled manually.", "The user has cancelled this build."),
    "build:app:terminated-due-inactivity": (
        "Build terminated due to inactivity",
        "This build was terminated due to inactivity.",
    ),
    "build:user:exit-code-183": (
        "Build skipped manually",
        "This build was skipped because the command exited with code 183.",
    ),
}

KNOWN_APPS: dict[str, tuple[int, str, str]] = {
    "dco": (1861, "DCO", "dcoapp"),
    "github-actions": (15368, "GitHub Actions", "github"),
    "pre-commit-ci": (68672, "pre-commit.ci", "pre-commit-ci"),
    "read-the-docs-community": (32843, "Read the Docs Community", "readthedocs"),
}


def iso(value: datetime | None) -> str | None:
    """Format an aware datetime the way GitHub does (UTC, seconds, Z)."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rtd_iso(value: datetime | None) -> str | None:
    """Format an aware datetime the way RTD API v3 does."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, ident: int) -> str:
    """A GitHub-looking global node id."""
    return base64.b64encode(f"0{len(kind)}:{kind}{ident}".encode()).decode()


ANNOTATION_LEVELS = ("notice", "warning", "failure")


def _annotation(given: JSON) -> JSON:
    """A check-run annotation as REST lists it (the fields GitHub always gives filled in)."""
    level = given.get("annotation_level", "failure")
    if level not in ANNOTATION_LEVELS:
        raise ValueError(f"annotation_level must be one of {ANNOTATION_LEVELS}, not {level!r}")
    start = int(given.get("start_line", 1))
    return {
        "path": str(given["path"]),
        "start_line": start,
        "start_column": given.get("start_column"),
        "end_line": int(given.get("end_line", start)),
        "end_column": given.get("end_column"),
        "annotation_level": level,
        "title": given.get("title", ""),
        "message": str(given["message"]),
        "raw_details": given.get("raw_details", ""),
    }


def _require_aware(value: datetime | None, what: str) -> None:
    if value is not None and value.tzinfo is None:
        raise ValueError(f"{what} must be an aware datetime")


@dataclass
class UserRec:
    """A GitHub account (user or bot)."""

    login: str
    id: int

    @property
    def is_bot(self) -> bool:
        """True for "<slug>[bot]" accounts."""
        return self.login.endswith("[bot]")


@dataclass
class AppRec:
    """A GitHub App and its one installation."""

    slug: str
    app_id: int
    installation_id: int
    repos: tuple[str, ...]
    name: str
    # what the installation was granted (GET /repos/{o}/{r}/installation says it)
    permissions: Mapping[str, str] = field(default_factory=lambda: dict(APP_PERMISSIONS))
    public_key_pem: str | None = None  # set: a JWT must carry a signature this key verifies
    suspended_at: datetime | None = None  # suspended: no new token, and its tokens refused
    account: str = ""  # the owner it is installed on ("": the first repository's owner)


@dataclass
class TokenRec:
    """An accepted token."""

    login: str
    expires_at: datetime | None = None
    installation_id: int | None = None
    scopes: str | None = None  # a classic token's X-OAuth-Scopes, e.g. "public_repo, read:org"
    # a fine-grained or installation token's permissions (None: not limited by the sandbox)
    permissions: Mapping[str, str] | None = None


@dataclass
class CommitRec:
    """A commit (only what the fake serves)."""

    sha: str
    message: str
    author_name: str
    author_email: str
    date: datetime
    parents: tuple[str, ...] = ()  # its parent commits (none: a root, or not known)


@dataclass
class SuiteRec:
    """A check suite: one app (and workflow) on one commit."""

    id: int
    head_sha: str
    app_slug: str | None
    workflow: str | None
    created_at: datetime
    run_id: int | None
    event: str | None = None  # the workflow run's triggering event (push, pull_request...)
    workflow_path: str | None = None  # the workflow file (`workflowRun.file.path`)


@dataclass
class CheckRunRec:
    """A check run."""

    id: int
    repo: str
    head_sha: str
    name: str
    app_slug: str | None
    status: str
    conclusion: str | None
    started_at: datetime | None
    completed_at: datetime | None
    details_url: str | None
    suite_id: int
    workflow: str | None
    title: str | None
    summary: str | None
    text: str | None
    event: str | None = None  # the workflow run's triggering event; None outside Actions
    workflow_path: str | None = None  # the workflow file; None outside Actions
    # as REST's annotation objects: path, start_line, end_line, annotation_level, message, ...
    annotations: tuple[JSON, ...] = ()


@dataclass
class RulesetRec:
    """An active repository ruleset with a "require status checks" rule."""

    id: int
    name: str
    branches: tuple[str, ...]  # the branch names it targets
    checks: tuple[tuple[str, int | None], ...]  # (context, integrationId or None)
    enforcement: str = "ACTIVE"  # or EVALUATE (insights only) or DISABLED: GraphQL's enum
    source: str = "Repository"  # or "Organization": an organisation ruleset on this branch


@dataclass
class StatusRec:
    """One commit status as posted (history is kept)."""

    id: int
    sha: str
    context: str
    state: str
    description: str | None
    target_url: str | None
    created_at: datetime
    creator: str


@dataclass
class PullRec:
    """A pull request."""

    number: int
    id: int
    title: str
    author: str
    head_sha: str
    draft: bool
    labels: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    closed_at: datetime | None = None
    body: str | None = None
    head_ref: str = ""
    base_ref: str = "main"
    base_changed_from: str | None = None  # the base before the last `edited` that changed it


@dataclass
class QueueEntryRec:
    """A pull request's entry in its base branch's merge queue (GraphQL MergeQueueEntry)."""

    number: int
    branch: str  # the base branch whose queue holds it
    state: str  # MergeQueueEntryState: QUEUED, AWAITING_CHECKS, MERGEABLE, UNMERGEABLE, LOCKED
    position: int
    enqueued_at: datetime
    head_sha: str | None  # the merge-group commit (None: not created yet)
    base_sha: str | None
    head_ref: str  # refs/heads/gh-readonly-queue/<base>/pr-<N>-<base sha>


@dataclass
class CommentRec:
    """An issue comment."""

    id: int
    repo: str
    number: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime
    deleted: bool = False
    last_edited_at: datetime | None = None  # GraphQL lastEditedAt: None until someone edits it
    editor: str | None = None  # GraphQL editor: who made the last edit
    # GraphQL userContentEdits, oldest first: (editor, editedAt); the first edit also records
    # the original text's entry (its author, when it was created), as GitHub's history shows
    edits: list[tuple[str, datetime]] = field(default_factory=list)


@dataclass
class RepoRec:
    """A repository and everything attached to it."""

    id: int
    full_name: str
    private: bool
    default_branch: str
    created_at: datetime
    pulls: dict[int, PullRec] = field(default_factory=dict)
    commits: dict[str, CommitRec] = field(default_factory=dict)
    checks: dict[str, list[CheckRunRec]] = field(default_factory=dict)
    suites: dict[int, SuiteRec] = field(default_factory=dict)
    current_suite: dict[tuple[str, str | None, str | None, str | None], int] = field(
        default_factory=dict
    )
    statuses: dict[str, list[StatusRec]] = field(default_factory=dict)
    heads: dict[str, set[int]] = field(default_factory=dict)
    # (base branch, head sha) -> their merge base, where a test set one for the branch as it is
    # (else the commits' own ancestry, else the branch's first commit)
    merge_bases: dict[tuple[str, str], str] = field(default_factory=dict)
    # branch protection: base branch -> names of required checks and statuses
    required_checks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # branch protection's app pins ("expected source"): base branch -> context -> app id
    required_apps: dict[str, dict[str, int]] = field(default_factory=dict)
    # base branch -> the status REST answers on GET .../branches/{branch} (pins unreadable)
    branch_errors: dict[str, int] = field(default_factory=dict)
    rulesets: list[RulesetRec] = field(default_factory=list)
    # base branch -> the error GitHub gives on that ref's `rules` (a token that may not read them)
    rules_errors: dict[str, str] = field(default_factory=dict)
    # branch -> its commits, newest first (Ref.target.history), where a test pushed some
    branch_commits: dict[str, list[str]] = field(default_factory=dict)
    # branch -> the error GitHub answers on its Ref.target (a tip it will not give)
    tip_errors: dict[str, str] = field(default_factory=dict)
    # merge queues by base branch: checkResponseTimeout in minutes (None: GitHub gives none)
    merge_queues: dict[str, int | None] = field(default_factory=dict)
    queue_entries: dict[int, QueueEntryRec] = field(default_factory=dict)  # by pull number
    # an error GitHub answers on mergeQueue(branch:) (a token that may not read it), by branch
    queue_errors: dict[str, str] = field(default_factory=dict)
    entry_errors: dict[int, str] = field(default_factory=dict)  # ... on a mergeQueueEntry

    def required_for(self, branch: str) -> list[tuple[str, int | None, str]]:
        """(context, integrationId, where) GitHub requires on `branch`: protection, rulesets."""
        pins = self.required_apps.get(branch, {})
        found: list[tuple[str, int | None, str]] = [
            (c, pins.get(c), "protection") for c in self.required_checks.get(branch, ())
        ]
        for ruleset in self.rulesets:
            if branch in ruleset.branches and ruleset.enforcement == "ACTIVE":
                found.extend((c, app, ruleset.name) for c, app in ruleset.checks)
        return found

    def open_pulls_at(self, sha: str) -> list[PullRec]:
        """Open pull requests whose head is `sha`."""
        return [
            self.pulls[n] for n in sorted(self.heads.get(sha, ())) if self.pulls[n].state == "open"
        ]

    @property
    def owner(self) -> str:
        """The owner login."""
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The short name."""
        return self.full_name.split("/", 1)[1]


@dataclass
class RtdBuildRec:
    """A Read the Docs build."""

    id: int
    project: str
    commit: str | None
    version: str
    state: str
    success: bool | None
    created: datetime
    finished: datetime | None
    duration: int | None


@dataclass
class RtdProjectRec:
    """A Read the Docs project."""

    slug: str
    site: str
    builds: dict[int, RtdBuildRec] = field(default_factory=dict)
    notifications: dict[int, list[JSON]] = field(default_factory=dict)
    # version slug -> type: "external" (a pull request, slug = its number), "branch" or "tag"
    versions: dict[str, str] = field(default_factory=dict)


class World:
    """Everything the fake GitHub and Read the Docs know; thread-safe through one lock."""

    def __init__(self, *, clock: Callable[[], datetime] | None = None) -> None:
        """Start an empty world; `clock` (aware UTC) defaults to the wall clock."""
        self.lock = threading.RLock()
        self._clock = clock or (lambda: datetime.now(UTC))
        self.rtd_require_token = False
        self.users: dict[str, UserRec] = {}
        self.tokens: dict[str, TokenRec] = {}
        self.apps: dict[str, AppRec] = {}
        self.installations: dict[int, AppRec] = {}  # an App may be installed on several owners
        self.token_lifetime = timedelta(hours=1)  # how long an installation token lasts
        self.repos: dict[str, RepoRec] = {}
        self.repos_by_id: dict[int, RepoRec] = {}
        self.check_runs: dict[int, CheckRunRec] = {}
        self.comment_recs: dict[int, CommentRec] = {}
        # Creates answered as if another run of the bot created the same comment a moment
        # before (two stateless runs at once): each of the next `twin_creates` creates makes two.
        self.twin_creates = 0
        self.rtd_projects: dict[str, RtdProjectRec] = {}
        self.rtd_tokens: set[str] = set()
        # called (under the lock) on changes GitHub sends webhooks for: (world, event, action,
        # repo, record); see bot_sandbox/webhook_sender.py
        self.listeners: list[Callable[[World, str, str, str, Any], None]] = []
        self.graphql_hooks: list[Callable[[World, str | None], None]] = []
        self._ids = {
            "user": itertools.count(583231),
            "repo": itertools.count(700000001),
            "pull": itertools.count(2100000001),
            "check": itertools.count(1500000001),
            "suite": itertools.count(1300000001),
            "run": itertools.count(1700000001),
            "status": itertools.count(1800000001),
            "comment": itertools.count(1900000001),
            "ruleset": itertools.count(4100001),
            "notification": itertools.count(1001),
            "rtd": itertools.count(30000001),
        }

    # -- time and ids -------------------------------------------------------------------------

    def now(self) -> datetime:
        """The world's current time (aware UTC)."""
        return self._clock()

    def next_id(self, kind: str) -> int:
        """A fresh id of one kind."""
        return next(self._ids[kind])

    def _changed(self, event: str, action: str, repo: str, record: Any) -> None:
        """Tell the listeners (webhook senders) about a change GitHub would deliver."""
        for listener in self.listeners:
            listener(self, event, action, repo, record)

    # -- accounts ---------------------------------------------------------------------------

    def user(self, login: str) -> UserRec:
        """The account with this login, created on first use."""
        with self.lock:
            rec = self.users.get(login)
            if rec is None:
                rec = UserRec(login=login, id=self.next_id("user"))
                self.users[login] = rec
            return rec

    def add_user(
        self,
        login: str,
        token: str | None = None,
        *,
        scopes: str | None = None,
        permissions: Mapping[str, str] | None = None,
    ) -> JSON:
        """Add an account; `token` (if given) authenticates as it (`scopes`: a classic
        token's; `permissions`: a fine-grained token's, enforced on the REST routes)."""
        with self.lock:
            rec = self.user(login)
            if token is not None:
                granted = None if permissions is None else dict(permissions)
                self.tokens[token] = TokenRec(login=login, scopes=scopes, permissions=granted)
            return user_json(rec)

    def add_app(
        self,
        slug: str,
        app_id: int,
        installation_id: int,
        repos: Sequence[str] = (),
        *,
        name: str | None = None,
        permissions: Mapping[str, str] | None = None,
        public_key_pem: str | None = None,
    ) -> JSON:
        """Add a GitHub App installed on `repos`; its installation tokens act as "<slug>[bot]".

        Called again with the same slug and another installation id, it installs the same App
        on more repositories (another organisation): each installation reaches only its own.
        `permissions`: what the installation was granted (default: what the bot asks for);
        `public_key_pem`: the App's key, so that a JWT signed with another key is refused.
        """
        with self.lock:
            granted = dict(APP_PERMISSIONS if permissions is None else permissions)
            app = AppRec(
                slug, app_id, installation_id, tuple(repos), name or slug, granted, public_key_pem
            )
            self.installations[installation_id] = app
            known = self.apps.get(slug)
            if known is None or known.installation_id == installation_id:
                self.apps[slug] = app
            self.user(f"{slug}[bot]")
            return app_json(app)

    def app_by_installation(self, installation_id: int) -> AppRec | None:
        """The app owning an installation id (that installation's record)."""
        return self.installations.get(installation_id)

    def installation_for(self, slug: str, repo: str) -> AppRec | None:
        """The installation of App `slug` that covers `repo`, if any."""
        return next(
            (a for a in self.installations.values() if a.slug == slug and repo in a.repos), None
        )

    def issue_installation_token(self, app: AppRec, token: str) -> TokenRec:
        """Register a fresh installation token (one hour)."""
        with self.lock:
            rec = TokenRec(
                login=f"{app.slug}[bot]",
                expires_at=self.now() + self.token_lifetime,
                installation_id=app.installation_id,
            )
            self.tokens[token] = rec
            return rec

    def app_installations(self, slug: str) -> list[AppRec]:
        """Every installation of App `slug` (GET /app/installations), by id."""
        with self.lock:
            return sorted(
                (a for a in self.installations.values() if a.slug == slug),
                key=lambda a: a.installation_id,
            )

    def suspend_installation(self, installation_id: int) -> None:
        """Suspend an installation: GitHub then refuses its tokens (new and issued)."""
        with self.lock:
            self.installations[installation_id].suspended_at = self.now()

    def delete_installation(self, installation_id: int) -> None:
        """Uninstall: the installation and every token it issued are gone."""
        with self.lock:
            gone = self.installations.pop(installation_id)
            for token, rec in list(self.tokens.items()):
                if rec.installation_id == installation_id:
                    del self.tokens[token]
            if self.apps.get(gone.slug) is gone:
                rest = self.app_installations(gone.slug)
                if rest:
                    self.apps[gone.slug] = rest[0]

    def set_installation_repos(self, installation_id: int, repos: Sequence[str]) -> None:
        """Change which repositories an installation covers (added or removed on GitHub)."""
        with self.lock:
            self.installations[installation_id].repos = tuple(repos)

    def add_actions_token(
        self, token: str, repo: str, *, permissions: Mapping[str, str] | None = None
    ) -> TokenRec:
        """A workflow's GITHUB_TOKEN: an installation token of the `github-actions` App that
        reaches only the workflow's repository and acts as `github-actions[bot]`;
        `permissions`: the workflow's `permissions:` block (None: not limited)."""
        with self.lock:
            app = AppRec("github-actions", ACTIONS_APP_ID, 1_000_000 + len(self.installations),
                         (repo,), "GitHub Actions")  # fmt: skip
            self.installations[app.installation_id] = app
            self.user("github-actions[bot]")
            rec = TokenRec(
                login="github-actions[bot]",
                installation_id=app.installation_id,
                permissions=None if permissions is None else dict(permissions),
            )
            self.tokens[token] = rec
            return rec

    def login_for(self, token: str) -> str | None:
        """The login a token authenticates as, or None (unknown or expired)."""
        with self.lock:
            rec = self.tokens.get(token)
            if rec is None:
                return None
            if rec.expires_at is not None and rec.expires_at <= self.now():
                return None
            if rec.installation_id is not None:
                app = self.installations.get(rec.installation_id)
                if app is None or app.suspended_at is not None:  # uninstalled or suspended
                    return None
            return rec.login

    def token_record(self, token: str) -> TokenRec | None:
        """The record of a token."""
        with self.lock:
            return self.tokens.get(token)

    # -- repositories and pulls ------------------------------------------------------------

    def add_repo(
        self, full_name: str, *, private: bool = False, default_branch: str = "main"
    ) -> JSON:
        """Add a repository."""
        with self.lock:
            if full_name in self.repos:
                raise ValueError(f"repository {full_name} exists")
            rec = RepoRec(
                id=self.next_id("repo"),
                full_name=full_name,
                private=private,
                default_branch=default_branch,
                created_at=self.now() - timedelta(days=400),
            )
            self.repos[full_name] = rec
            self.repos_by_id[rec.id] = rec
            self.user(rec.owner)
            return repo_json(rec)

    def find_repo(self, full_name: str) -> RepoRec | None:
        """The repository GitHub would answer for `full_name` (owner and name ignore case)."""
        with self.lock:
            rec = self.repos.get(full_name)
            if rec is None:
                folded = full_name.casefold()
                rec = next((r for n, r in self.repos.items() if n.casefold() == folded), None)
            return rec

    def repo(self, full_name: str) -> RepoRec:
        """The repository record (KeyError when unknown)."""
        try:
            return self.repos[full_name]
        except KeyError:
            raise KeyError(f"unknown repository {full_name}") from None

    def add_commit(
        self,
        repo: str,
        sha: str,
        *,
        message: str | None = None,
        author_name: str = "A. Contributor",
        author_email: str = "contributor@example.org",
        date: datetime | None = None,
        parents: Iterable[str] | None = None,
    ) -> CommitRec:
        """Register a commit (done implicitly for heads, checks and statuses); `parents`, its
        parent commits (registered too), make its ancestry known (merge bases follow it)."""
        with self.lock:
            _require_aware(date, "date")
            rec = self.repo(repo)
            existing = rec.commits.get(sha)
            found = tuple(parents) if parents is not None else None
            for parent in found or ():
                self.add_commit(repo, parent)
            if existing is not None and message is None:
                if found is not None:
                    existing.parents = found
                return existing
            commit = CommitRec(
                sha=sha,
                message=message or f"Change {sha[:7]}",
                author_name=author_name,
                author_email=author_email,
                date=date or self.now(),
                parents=found if found is not None else existing.parents if existing else (),
            )
            rec.commits[sha] = commit
            return commit

    def add_pull(
        self,
        repo: str,
        number: int,
        *,
        title: str,
        author: str,
        head_sha: str,
        draft: bool = False,
        labels: Iterable[str] = (),
        created_at: datetime | None = None,
        body: str | None = None,
        head_ref: str | None = None,
        base_ref: str | None = None,
    ) -> JSON:
        """Add an open pull request (into `base_ref`, default the repository's default branch)."""
        with self.lock:
            _require_aware(created_at, "created_at")
            rec = self.repo(repo)
            if number in rec.pulls:
                raise ValueError(f"{repo}#{number} exists")
            created = created_at or self.now()
            self.user(author)
            self.add_commit(repo, head_sha)
            pull = PullRec(
                number=number,
                id=self.next_id("pull"),
                title=title,
                author=author,
                head_sha=head_sha,
                draft=draft,
                labels=tuple(labels),
                created_at=created,
                updated_at=max(created, self.now()),
                body=body,
                head_ref=head_ref or f"{author}/change-{number}",
                base_ref=base_ref or rec.default_branch,
            )
            rec.pulls[number] = pull
            rec.heads.setdefault(head_sha, set()).add(number)
            self._changed("pull_request", "opened", repo, pull)
            return pull_json(self, rec, pull)

    def push_branch_commit(
        self,
        repo: str,
        branch: str,
        sha: str,
        *,
        parents: Iterable[str] | None = None,
        **commit: Any,
    ) -> None:
        """Push a commit onto a branch (its newest): what Ref.target.history lists first. Its
        parent is the branch's tip before it, unless `parents` says otherwise."""
        with self.lock:
            before = self.branch_tip(repo, branch)
            self.add_commit(repo, sha, parents=(before,) if parents is None else parents, **commit)
            self.repo(repo).branch_commits.setdefault(branch, []).insert(0, sha)

    def merge_into(self, repo: str, branch: str, sha: str, *, merged: str, **commit: Any) -> None:
        """Merge commit `merged` (another branch's head: a pull request merged with a merge
        commit) into `branch`: a new commit `sha` whose parents are its tip and `merged`."""
        with self.lock:
            tip = self.branch_tip(repo, branch)
            self.push_branch_commit(repo, branch, sha, parents=(tip, merged), **commit)

    def force_push(self, repo: str, branch: str, sha: str) -> None:
        """Point `branch` at commit `sha` (a force push): its history is that commit's line
        of first parents."""
        with self.lock:
            rec = self.repo(repo)
            self.add_commit(repo, sha)
            line = [sha]
            while (parents := rec.commits[line[-1]].parents) and parents[0] not in line:
                line.append(parents[0])
            rec.branch_commits[branch] = line

    def refuse_tip(self, repo: str, branch: str, message: str) -> None:
        """Make GitHub answer an error (and null) on the newest commit of `branch`."""
        with self.lock:
            self.repo(repo).tip_errors[branch] = message

    def branch_tip(self, repo: str, branch: str) -> str:
        """The newest commit of `branch`: the last one pushed, else its first commit (named
        after the branch, with no checks unless a test adds some)."""
        with self.lock:
            rec = self.repo(repo)
            pushed = rec.branch_commits.get(branch)
            return pushed[0] if pushed else self._first_of(repo, branch)

    def set_merge_base(self, repo: str, base: str, head_sha: str, merge_base: str) -> None:
        """Make `merge_base` the merge-base commit of branch `base` and `head_sha`, whatever
        the branch's tip (for a head whose ancestry the world does not know)."""
        with self.lock:
            self.add_commit(repo, merge_base)
            self.repo(repo).merge_bases[(base, head_sha)] = merge_base

    def is_branch(self, repo: str, name: str) -> bool:
        """Whether `name` is a branch: the default one, a pull request's base, or pushed to."""
        rec = self.repo(repo)
        return (
            name == rec.default_branch
            or name in rec.branch_commits
            or any(p.base_ref == name for p in rec.pulls.values())
        )

    def merge_base(self, repo: str, base: str, head_sha: str) -> str | None:
        """The merge base of `base` (a branch: its tip; or a commit) and `head_sha` (None: they
        have no common ancestor): by the commits' ancestry; else, for a head whose parents the
        world does not know, the one a test set for the branch, else the branch's first commit
        (the head is taken as based there)."""
        with self.lock:
            rec = self.repo(repo)
            branch = base if self.is_branch(repo, base) else self._branch_of(rec, base)
            tip = self.branch_tip(repo, base) if branch == base else base
            found = _best_common(rec, tip, head_sha)
            if found is not None or branch is None or rec.commits[head_sha].parents:
                return found
            return rec.merge_bases.get((branch, head_sha)) or self._first_of(repo, branch)

    def _first_of(self, repo: str, branch: str) -> str:
        """The first commit of `branch` (named after it; what a branch nobody pushed to has)."""
        first = hashlib.sha1(f"{repo}:{branch}".encode()).hexdigest()
        if first not in self.repo(repo).commits:
            self.add_commit(repo, first, message=f"Tip of {branch}")
        return first

    def _branch_of(self, rec: RepoRec, sha: str) -> str | None:
        """A branch whose history holds commit `sha` (its first commit included), if any."""
        names = {rec.default_branch, *rec.branch_commits, *(p.base_ref for p in rec.pulls.values())}
        for name in sorted(names):
            first = hashlib.sha1(f"{rec.full_name}:{name}".encode()).hexdigest()
            if sha == first or sha in rec.branch_commits.get(name, ()):
                return name
        return None

    def pull(self, repo: str, number: int) -> PullRec:
        """The pull record (KeyError when unknown)."""
        try:
            return self.repo(repo).pulls[number]
        except KeyError:
            raise KeyError(f"unknown pull {repo}#{number}") from None

    def set_head(self, repo: str, number: int, sha: str) -> None:
        """Push a new head commit to a pull request."""
        with self.lock:
            pull = self.pull(repo, number)
            rec = self.repo(repo)
            self.add_commit(repo, sha)
            rec.heads.get(pull.head_sha, set()).discard(number)
            rec.heads.setdefault(sha, set()).add(number)
            pull.head_sha = sha
            pull.updated_at = self.now()
            self._changed("pull_request", "synchronize", repo, pull)

    def set_base(self, repo: str, number: int, base: str) -> None:
        """Change a pull request's base branch (GitHub sends `pull_request` `edited`)."""
        with self.lock:
            pull = self.pull(repo, number)
            pull.base_changed_from, pull.base_ref = pull.base_ref, base
            pull.updated_at = self.now()
            self._changed("pull_request", "edited", repo, pull)

    def set_draft(self, repo: str, number: int, draft: bool) -> None:
        """Mark a pull request draft or ready."""
        with self.lock:
            pull = self.pull(repo, number)
            pull.draft = draft
            pull.updated_at = self.now()
            action = "converted_to_draft" if draft else "ready_for_review"
            self._changed("pull_request", action, repo, pull)

    def close_pull(self, repo: str, number: int) -> None:
        """Close a pull request."""
        with self.lock:
            pull = self.pull(repo, number)
            pull.state = "closed"
            pull.closed_at = pull.updated_at = self.now()
            self._changed("pull_request", "closed", repo, pull)

    def set_required_checks(
        self, repo: str, names: Iterable[str | tuple[str, int]], *, branch: str | None = None
    ) -> None:
        """Branch protection: the check and status names required on `branch` (default branch);
        a (name, app id) is pinned to that app ("expected source")."""
        with self.lock:
            rec = self.repo(repo)
            where = branch or rec.default_branch
            given = [(n, None) if isinstance(n, str) else n for n in names]
            rec.required_checks[where] = tuple(n for n, _ in given)
            rec.required_apps[where] = {n: app for n, app in given if app is not None}
            self._changed("branch_protection_rule", "edited", repo, rec)

    def add_ruleset(
        self,
        repo: str,
        name: str,
        checks: Iterable[str | tuple[str, int | None]],
        *,
        branches: Iterable[str] | None = None,
        enforcement: str = "ACTIVE",
        source: str = "Repository",
    ) -> RulesetRec:
        """A ruleset requiring `checks` (a name, or (name, app id)) on `branches`: active, or
        in `evaluate` mode or disabled; the repository's own or its organisation's."""
        with self.lock:
            rec = self.repo(repo)
            ruleset = RulesetRec(
                id=self.next_id("ruleset"),
                name=name,
                branches=tuple(branches or (rec.default_branch,)),
                checks=tuple((c, None) if isinstance(c, str) else c for c in checks),
                enforcement=enforcement,
                source=source,
            )
            rec.rulesets.append(ruleset)
            self._changed("repository_ruleset", "created", repo, ruleset)
            return ruleset

    def refuse_rules(self, repo: str, message: str, *, branch: str | None = None) -> None:
        """Make GitHub answer an error on the `rules` of a branch (a token without access)."""
        with self.lock:
            rec = self.repo(repo)
            rec.rules_errors[branch or rec.default_branch] = message

    # -- the merge queue -----------------------------------------------------------------------

    def set_merge_queue(
        self, repo: str, *, branch: str | None = None, timeout_minutes: int | None = 60
    ) -> None:
        """Turn on a merge queue for `branch` (default branch), with its checkResponseTimeout."""
        with self.lock:
            rec = self.repo(repo)
            rec.merge_queues[branch or rec.default_branch] = timeout_minutes

    def enqueue(
        self,
        repo: str,
        number: int,
        *,
        group_sha: str | None,
        state: str = "AWAITING_CHECKS",
        enqueued_at: datetime | None = None,
    ) -> QueueEntryRec:
        """Put a pull request in its base branch's queue; with `group_sha`, GitHub made its
        merge-group commit (a `merge_group` `checks_requested` delivery follows)."""
        with self.lock:
            _require_aware(enqueued_at, "enqueued_at")
            rec = self.repo(repo)
            pull = self.pull(repo, number)
            if pull.base_ref not in rec.merge_queues:
                raise ValueError(f"{repo} has no merge queue on {pull.base_ref}")
            base_sha = self.merge_base(repo, pull.base_ref, pull.head_sha) or self.branch_tip(
                repo, pull.base_ref
            )
            position = 1 + sum(1 for e in rec.queue_entries.values() if e.branch == pull.base_ref)
            entry = QueueEntryRec(
                number, pull.base_ref, state, position, enqueued_at or self.now(), group_sha,
                base_sha, f"refs/heads/gh-readonly-queue/{pull.base_ref}/pr-{number}-{base_sha}",
            )  # fmt: skip
            rec.queue_entries[number] = entry
            if group_sha is not None:
                self.add_commit(repo, group_sha, message=f"Merge pull request #{number}")
                self._changed("merge_group", "checks_requested", repo, entry)
            return entry

    def dequeue(self, repo: str, number: int, *, reason: str = "dequeued") -> None:
        """The entry leaves the queue (merged, removed, invalidated): `merge_group` `destroyed`."""
        with self.lock:
            entry = self.repo(repo).queue_entries.pop(number)
            if entry.head_sha is not None:
                self._changed("merge_group", "destroyed", repo, (entry, reason))

    def refuse_merge_queue(
        self, repo: str, message: str, *, branch: str | None = None, number: int | None = None
    ) -> None:
        """Make GitHub answer an error on `mergeQueue(branch:)` or on one pull request's
        `mergeQueueEntry` (a token without access to it)."""
        with self.lock:
            rec = self.repo(repo)
            if number is not None:
                rec.entry_errors[number] = message
            else:
                rec.queue_errors[branch or rec.default_branch] = message

    def on_graphql(self, hook: Callable[[World, str | None], None]) -> None:
        """Call `hook(world, operation name)` before each GraphQL query is executed."""
        with self.lock:
            self.graphql_hooks.append(hook)

    def is_required(self, repo: str, number: int, name: str) -> bool:
        """Whether `name` must pass before pull request `number` merges (its base's protection)."""
        with self.lock:
            rec = self.repo(repo)
            pull = rec.pulls.get(number)
            if pull is None:
                return False
            return any(name == context for context, _, _ in rec.required_for(pull.base_ref))

    # -- checks and statuses ---------------------------------------------------------------

    def _suite(
        self,
        rec: RepoRec,
        sha: str,
        app_slug: str | None,
        workflow: str | None,
        new: bool,
        event: str | None = None,
        workflow_path: str | None = None,
    ) -> SuiteRec:
        key = (sha, app_slug, workflow_path or workflow, event)
        suite_id = rec.current_suite.get(key)
        if suite_id is None or new:
            suite = SuiteRec(
                id=self.next_id("suite"),
                head_sha=sha,
                app_slug=app_slug,
                workflow=workflow,
                created_at=self.now(),
                run_id=self.next_id("run") if workflow else None,
                event=event if workflow else None,
                workflow_path=workflow_path if workflow else None,
            )
            rec.suites[suite.id] = suite
            rec.current_suite[key] = suite.id
            return suite
        return rec.suites[suite_id]

    def add_check_run(self, repo: str, sha: str, **fields: Any) -> JSON:
        """Add a check run (the keywords of add_check_run_record); its REST shape."""
        with self.lock:
            return check_run_json(self, self.add_check_run_record(repo, sha, **fields))

    def add_check_run_record(
        self,
        repo: str,
        sha: str,
        *,
        name: str,
        app_slug: str | None = "github-actions",
        status: str = "completed",
        conclusion: str | None = "success",
        started_at: datetime | None = None,
        completed_at: datetime | None = None,
        details_url: str | None = None,
        workflow: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        text: str | None = None,
        new_suite: bool = False,
        event: str | None = None,
        workflow_path: str | None = None,
        annotations: Sequence[JSON] = (),
    ) -> CheckRunRec:
        """Add a check run; it joins the commit's suite of that app/workflow/event unless new_suite.

        `event` is what triggered the workflow run (default "pull_request" for a workflow's
        run); runs of one workflow for `push` and `pull_request` sit in separate suites.
        `workflow_path` is the workflow's file (default `.github/workflows/<workflow>.yml`):
        two files may carry one workflow name.
        """
        with self.lock:
            _require_aware(started_at, "started_at")
            _require_aware(completed_at, "completed_at")
            rec = self.repo(repo)
            self.add_commit(repo, sha)
            if workflow is not None and event is None:
                event = "pull_request"
            if workflow is not None and workflow_path is None:
                workflow_path = f".github/workflows/{workflow}.yml"
            suite = self._suite(rec, sha, app_slug, workflow, new_suite, event, workflow_path)
            # A queued run has not started: GitHub gives it no startedAt.
            waiting = status in {"queued", "waiting", "pending", "requested"}
            started = started_at or (None if waiting else self.now())
            if status == "completed":
                completed = completed_at or started
            else:
                completed, conclusion = None, None
            run = CheckRunRec(
                id=self.next_id("check"),
                repo=repo,
                head_sha=sha,
                name=name,
                app_slug=app_slug,
                status=status,
                conclusion=conclusion,
                started_at=started,
                completed_at=completed,
                details_url=details_url,
                suite_id=suite.id,
                workflow=workflow,
                title=title,
                summary=summary,
                text=text,
                event=suite.event,
                workflow_path=suite.workflow_path,
                annotations=tuple(_annotation(a) for a in annotations),
            )
            if details_url is None and workflow is not None and suite.run_id is not None:
                run.details_url = f"{WEB}/{repo}/actions/runs/{suite.run_id}/job/{run.id}"
            rec.checks.setdefault(sha, []).append(run)
            self.check_runs[run.id] = run
            action = "completed" if status == "completed" else "created"
            self._changed("check_run", action, repo, run)
            return run

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> JSON:
        """Change fields of a check run (status, conclusion, completed_at, title, summary...)."""
        with self.lock:
            run = self.check_runs.get(check_run_id)
            if run is None or run.repo != repo:
                raise KeyError(f"unknown check run {check_run_id} in {repo}")
            for key, value in fields.items():
                if not hasattr(run, key) or key in {"id", "repo", "head_sha", "suite_id"}:
                    raise TypeError(f"cannot set check run field {key!r}")
                if isinstance(value, datetime):
                    _require_aware(value, key)
                setattr(run, key, value)
            if run.status == "completed" and run.completed_at is None:
                run.completed_at = self.now()
            if run.status == "completed":  # GitHub sends no event for in-progress updates
                self._changed("check_run", "completed", repo, run)
            return check_run_json(self, run)

    def add_status(
        self,
        repo: str,
        sha: str,
        *,
        context: str,
        state: str,
        description: str | None = None,
        target_url: str | None = None,
        created_at: datetime | None = None,
        creator: str = "ci-reporter",
    ) -> JSON:
        """Post a commit status (history is kept; the latest per context wins)."""
        with self.lock:
            _require_aware(created_at, "created_at")
            rec = self.repo(repo)
            self.add_commit(repo, sha)
            self.user(creator)
            status = StatusRec(
                id=self.next_id("status"),
                sha=sha,
                context=context,
                state=state,
                description=description,
                target_url=target_url,
                created_at=created_at or self.now(),
                creator=creator,
            )
            rec.statuses.setdefault(sha, []).append(status)
            self._changed("status", "", repo, status)
            return status_json(self, rec, status, with_creator=True)

    def latest_statuses(self, repo: str, sha: str) -> list[StatusRec]:
        """The latest status per context, in order of each context's first report."""
        with self.lock:
            latest: dict[str, StatusRec] = {}
            for status in self.repo(repo).statuses.get(sha, []):
                previous = latest.get(status.context)
                if previous is None or (status.created_at, status.id) >= (
                    previous.created_at,
                    previous.id,
                ):
                    latest[status.context] = status
            return list(latest.values())

    def latest_check_runs(self, repo: str, sha: str) -> list[CheckRunRec]:
        """Check runs of a commit with reruns collapsed inside each suite (newest per name)."""
        with self.lock:
            latest: dict[tuple[int, str], CheckRunRec] = {}
            for run in self.repo(repo).checks.get(sha, []):
                key = (run.suite_id, run.name)
                previous = latest.get(key)
                if previous is None or run.id > previous.id:
                    latest[key] = run
            return sorted(latest.values(), key=lambda r: r.id)

    def suite_check_runs(self, repo: str, suite_id: int, *, latest: bool) -> list[CheckRunRec]:
        """A suite's check runs, oldest first: every attempt, or (latest) the newest per name."""
        with self.lock:
            suite = self.repo(repo).suites[suite_id]
            runs = [
                r for r in self.repo(repo).checks.get(suite.head_sha, []) if r.suite_id == suite_id
            ]
            if not latest:
                return runs
            newest: dict[str, CheckRunRec] = {}
            for run in runs:
                if run.name not in newest or run.id > newest[run.name].id:
                    newest[run.name] = run
            return sorted(newest.values(), key=lambda r: r.id)

    def all_check_runs(self, repo: str, sha: str) -> list[CheckRunRec]:
        """Every check run of a commit, oldest first."""
        with self.lock:
            return list(self.repo(repo).checks.get(sha, []))

    # -- comments --------------------------------------------------------------------------

    def add_comment(
        self, repo: str, number: int, *, author: str, body: str, created_at: datetime | None = None
    ) -> JSON:
        """Add an issue comment to a pull request."""
        with self.lock:
            _require_aware(created_at, "created_at")
            pull = self.pull(repo, number)
            self.user(author)
            when = created_at or self.now()
            rec = CommentRec(
                id=self.next_id("comment"),
                repo=repo,
                number=number,
                author=author,
                body=body,
                created_at=when,
                updated_at=when,
            )
            self.comment_recs[rec.id] = rec
            pull.updated_at = max(pull.updated_at, when)
            return comment_json(self, rec)

    def edit_comment(self, comment_id: int, body: str, *, editor: str | None = None) -> JSON:
        """Replace a comment's body, as `editor` (default: its author; a maintainer may edit
        anyone's comment on GitHub)."""
        with self.lock:
            rec = self.comment_recs[comment_id]
            if editor is not None:
                self.user(editor)
            rec.body = body
            rec.updated_at = self.now()
            rec.last_edited_at, rec.editor = rec.updated_at, editor or rec.author
            if not rec.edits:
                rec.edits.append((rec.author, rec.created_at))
            rec.edits.append((rec.editor, rec.updated_at))
            pull = self.repo(rec.repo).pulls.get(rec.number)
            if pull is not None:
                pull.updated_at = max(pull.updated_at, rec.updated_at)
            return comment_json(self, rec)

    def delete_comment(self, comment_id: int) -> None:
        """Delete a comment."""
        with self.lock:
            self.comment_recs[comment_id].deleted = True

    def comment_records(self, repo: str, number: int) -> list[CommentRec]:
        """Live comment records of one pull request, ascending id."""
        with self.lock:
            return sorted(
                (
                    c
                    for c in self.comment_recs.values()
                    if c.repo == repo and c.number == number and not c.deleted
                ),
                key=lambda c: c.id,
            )

    def comments(self, repo: str, number: int) -> list[JSON]:
        """The pull request's comments, REST-shaped, ascending id."""
        with self.lock:
            return [comment_json(self, c) for c in self.comment_records(repo, number)]

    # -- Read the Docs ---------------------------------------------------------------------

    def add_rtd_project(self, slug: str, *, site: str = "readthedocs.org") -> None:
        """Add a Read the Docs project (done implicitly by add_rtd_build)."""
        with self.lock:
            if slug not in self.rtd_projects:
                self.rtd_projects[slug] = RtdProjectRec(slug=slug, site=site)

    def add_rtd_token(self, token: str) -> None:
        """Accept an RTD API token (matters only when rtd_require_token is set)."""
        with self.lock:
            self.rtd_tokens.add(token)

    def add_rtd_build(
        self,
        project: str,
        *,
        id: int | None = None,
        commit: str | None,
        version: str,
        state: str = "finished",
        success: bool | None = True,
        created: datetime | None = None,
        finished: datetime | None = None,
        duration: int | None = None,
        version_type: str | None = None,
    ) -> JSON:
        """Add an RTD build (RTD v3 build shape; `error` is always "").

        A version named by digits is a pull request's (type external) unless `version_type`
        says otherwise; any other is a branch (e.g. `latest`): one commit can have both.
        """
        with self.lock:
            _require_aware(created, "created")
            _require_aware(finished, "finished")
            if state not in RTD_STATE_NAMES:
                raise ValueError(f"unknown RTD state {state!r}")
            self.add_rtd_project(project)
            proj = self.rtd_projects[project]
            default_type = "external" if version.isdigit() else "branch"
            proj.versions.setdefault(version, version_type or default_type)
            build = RtdBuildRec(
                id=id if id is not None else self.next_id("rtd"),
                project=project,
                commit=commit,
                version=version,
                state=state,
                success=success,
                created=created or self.now(),
                finished=finished,
                duration=duration,
            )
            proj.builds[build.id] = build
            return rtd_build_json(proj, build)

    def set_rtd_build(self, project: str, build_id: int, **fields: Any) -> JSON:
        """Change fields of an RTD build."""
        with self.lock:
            proj = self.rtd_projects[project]
            build = proj.builds[build_id]
            for key, value in fields.items():
                if not hasattr(build, key) or key in {"id", "project"}:
                    raise TypeError(f"cannot set RTD build field {key!r}")
                if key == "state" and value not in RTD_STATE_NAMES:
                    raise ValueError(f"unknown RTD state {value!r}")
                setattr(build, key, value)
            return rtd_build_json(proj, build)

    def add_rtd_notification(
        self, project: str, build_id: int, message_id: str, *, body: str | None = None
    ) -> JSON:
        """Attach a notification (message id such as build:user:cancelled) to a build."""
        with self.lock:
            proj = self.rtd_projects[project]
            if build_id not in proj.builds:
                raise KeyError(f"unknown RTD build {build_id}")
            header, default_body = RTD_MESSAGES.get(message_id, (message_id, message_id))
            ident = self.next_id("notification")
            api = f"{RTD_API}/projects/{project}"
            note: JSON = {
                "_links": {"_self": f"{api}/builds/{build_id}/notifications/{ident}/"},
                "attached_to_content_type": "build",
                "attached_to_id": build_id,
                "dismissable": False,
                "id": ident,
                "message": {
                    "body": body or default_body,
                    "header": header,
                    "icon_classes": "fas fa-circle-xmark",
                    "id": message_id,
                    "type": "error",
                },
                "news": False,
                "state": "unread",
            }
            proj.notifications.setdefault(build_id, []).append(note)
            return dict(note)


# -- REST shapes (URLs use api.github.com; the server rewrites them to its own address) -------


def user_json(rec: UserRec) -> JSON:
    """A simple-user object."""
    login = rec.login
    base = f"{API}/users/{login}"
    return {
        "login": login,
        "id": rec.id,
        "node_id": node_id("User" if not rec.is_bot else "Bot", rec.id),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{rec.id}?v=4",
        "gravatar_id": "",
        "url": base,
        "html_url": f"{WEB}/{login}" if not rec.is_bot else f"{WEB}/apps/{login[:-5]}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": "Bot" if rec.is_bot else "User",
        "user_view_type": "public",
        "site_admin": False,
    }


def app_info(slug: str | None) -> tuple[int, str, str] | None:
    """(id, name, owner) of an app slug."""
    if slug is None:
        return None
    known = KNOWN_APPS.get(slug)
    if known is not None:
        return known
    ident = int(hashlib.sha256(slug.encode()).hexdigest()[:6], 16)
    return (ident, slug, slug)


def integration_json(slug: str | None) -> JSON | None:
    """The `app` object of a check run or suite."""
    info = app_info(slug)
    if info is None or slug is None:
        return None
    ident, name, owner = info
    return {
        "id": ident,
        "slug": slug,
        "node_id": node_id("App", ident),
        "client_id": f"Iv1.{ident:016x}",
        "owner": {"login": owner, "id": ident + 1, "type": "Organization", "site_admin": False},
        "name": name,
        "description": "",
        "external_url": f"https://{slug}.example.org",
        "html_url": f"{WEB}/apps/{slug}",
        "created_at": "2018-07-30T09:30:17Z",
        "updated_at": "2024-04-10T20:33:16Z",
        "permissions": {"checks": "write", "metadata": "read", "pull_requests": "read"},
        "events": ["pull_request", "check_run"],
    }


def app_json(app: AppRec) -> JSON:
    """GET /app."""
    return {
        "id": app.app_id,
        "slug": app.slug,
        "node_id": node_id("App", app.app_id),
        "client_id": f"Iv1.{app.app_id:016x}",
        "owner": {"login": "octo", "id": 1, "type": "Organization", "site_admin": False},
        "name": app.name,
        "description": "",
        "external_url": "https://example.org",
        "html_url": f"{WEB}/apps/{app.slug}",
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "permissions": {"checks": "read", "issues": "write", "metadata": "read"},
        "events": [],
        "installations_count": 1,
    }


def installation_json(app: AppRec, account: str) -> JSON:
    """GET /repos/{o}/{r}/installation."""
    return {
        "id": app.installation_id,
        "account": {"login": account, "id": 1, "type": "Organization"},
        "repository_selection": "selected",
        "access_tokens_url": f"{API}/app/installations/{app.installation_id}/access_tokens",
        "repositories_url": f"{API}/installation/repositories",
        "html_url": f"{WEB}/organizations/{account}/settings/installations/{app.installation_id}",
        "app_id": app.app_id,
        "app_slug": app.slug,
        "target_id": 1,
        "target_type": "Organization",
        "permissions": dict(app.permissions),
        "events": [],
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None if app.suspended_at is None else {"login": account, "id": 1},
        "suspended_at": iso(app.suspended_at),
    }


def repo_json(rec: RepoRec, *, world: World | None = None) -> JSON:
    """A repository object (the commonly read fields and URL templates)."""
    base = f"{API}/repos/{rec.full_name}"
    owner = user_json(world.user(rec.owner)) if world else {"login": rec.owner}
    return {
        "id": rec.id,
        "node_id": node_id("Repository", rec.id),
        "name": rec.name,
        "full_name": rec.full_name,
        "private": rec.private,
        "owner": owner,
        "html_url": f"{WEB}/{rec.full_name}",
        "description": None,
        "fork": False,
        "url": base,
        "issue_comment_url": f"{base}/issues/comments{{/number}}",
        "issues_url": f"{base}/issues{{/number}}",
        "pulls_url": f"{base}/pulls{{/number}}",
        "statuses_url": f"{base}/statuses/{{sha}}",
        "commits_url": f"{base}/commits{{/sha}}",
        "comments_url": f"{base}/comments{{/number}}",
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.created_at),
        "pushed_at": iso(rec.created_at),
        "default_branch": rec.default_branch,
        "visibility": "private" if rec.private else "public",
        "archived": False,
        "disabled": False,
        "open_issues_count": sum(1 for p in rec.pulls.values() if p.state == "open"),
        "permissions": {
            "admin": False,
            "maintain": False,
            "push": False,
            "triage": False,
            "pull": True,
        },
    }


def _label_json(rec: RepoRec, name: str) -> JSON:
    ident = int(hashlib.sha256(f"{rec.full_name}:{name}".encode()).hexdigest()[:8], 16)
    return {
        "id": ident,
        "node_id": node_id("Label", ident),
        "url": f"{API}/repos/{rec.full_name}/labels/{name}",
        "name": name,
        "color": "ededed",
        "default": False,
        "description": None,
    }


def pull_json(world: World, rec: RepoRec, pull: PullRec, *, full: bool = False) -> JSON:
    """A pull-request-simple object (full=True adds the single-pull fields)."""
    base = f"{API}/repos/{rec.full_name}"
    repo_min = repo_json(rec, world=world)
    author = user_json(world.user(pull.author))
    data: JSON = {
        "url": f"{base}/pulls/{pull.number}",
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "html_url": f"{WEB}/{rec.full_name}/pull/{pull.number}",
        "diff_url": f"{WEB}/{rec.full_name}/pull/{pull.number}.diff",
        "patch_url": f"{WEB}/{rec.full_name}/pull/{pull.number}.patch",
        "issue_url": f"{base}/issues/{pull.number}",
        "commits_url": f"{base}/pulls/{pull.number}/commits",
        "review_comments_url": f"{base}/pulls/{pull.number}/comments",
        "review_comment_url": f"{base}/pulls/comments{{/number}}",
        "comments_url": f"{base}/issues/{pull.number}/comments",
        "statuses_url": f"{base}/statuses/{pull.head_sha}",
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "title": pull.title,
        "user": author,
        "body": pull.body,
        "labels": [_label_json(rec, name) for name in pull.labels],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": iso(pull.created_at),
        "updated_at": iso(pull.updated_at),
        "closed_at": iso(pull.closed_at),
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": {
            "label": f"{pull.author}:{pull.head_ref}",
            "ref": pull.head_ref,
            "sha": pull.head_sha,
            "user": author,
            "repo": repo_min,
        },
        "base": {
            "label": f"{rec.owner}:{pull.base_ref}",
            "ref": pull.base_ref,
            "sha": "0" * 40,
            "user": repo_min["owner"],
            "repo": repo_min,
        },
        "_links": {
            "self": {"href": f"{base}/pulls/{pull.number}"},
            "html": {"href": f"{WEB}/{rec.full_name}/pull/{pull.number}"},
            "issue": {"href": f"{base}/issues/{pull.number}"},
            "comments": {"href": f"{base}/issues/{pull.number}/comments"},
            "statuses": {"href": f"{base}/statuses/{pull.head_sha}"},
        },
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "draft": pull.draft,
    }
    if full:
        data.update(
            {
                "merged": False,
                "mergeable": None,
                "rebaseable": None,
                "mergeable_state": "unknown",
                "merged_by": None,
                "comments": len(world.comment_records(rec.full_name, pull.number)),
                "review_comments": 0,
                "maintainer_can_modify": False,
                "commits": 1,
                "additions": 1,
                "deletions": 0,
                "changed_files": 1,
            }
        )
    return data


def _ancestors(rec: RepoRec, sha: str) -> set[str]:
    """A commit and every commit before it that the world knows (empty: an unknown commit)."""
    if sha not in rec.commits:
        return set()
    seen, todo = {sha}, [sha]
    while todo:
        for parent in rec.commits[todo.pop()].parents:
            if parent not in seen and parent in rec.commits:
                seen.add(parent)
                todo.append(parent)
    return seen


def _best_common(rec: RepoRec, one: str, other: str) -> str | None:
    """git's merge base of two commits: a common ancestor no other common ancestor descends
    from (the newest of several), or None where they have none."""
    common = _ancestors(rec, one) & _ancestors(rec, other)
    below = {a for c in common for a in _ancestors(rec, c) if a != c}
    best = common - below
    return max(best, key=lambda c: (rec.commits[c].date, c)) if best else None


def compare_json(rec: RepoRec, spec: tuple[str, str], base: str, head: str, merge: str) -> JSON:
    """GitHub's compare answer for `spec` (as asked): commit `base` and `head`, merge base
    `merge`; the head's commits since it, oldest first (tests/data/real/dco/compare.json)."""
    ahead = sorted(
        _ancestors(rec, head) - _ancestors(rec, merge), key=lambda c: (rec.commits[c].date, c)
    )
    behind = len(_ancestors(rec, base) - _ancestors(rec, merge))
    status = ("identical", "behind", "ahead", "diverged")[bool(ahead) * 2 + bool(behind)]
    web, api, asked = f"{WEB}/{rec.full_name}", f"{API}/repos/{rec.full_name}", "...".join(spec)
    owner = rec.full_name.split("/", 1)[0]
    return {
        "url": f"{api}/compare/{asked}",
        "html_url": f"{web}/compare/{asked}",
        "permalink_url": f"{web}/compare/{owner}:{base[:7]}...{owner}:{head[:7]}",
        "diff_url": f"{web}/compare/{asked}.diff",
        "patch_url": f"{web}/compare/{asked}.patch",
        "base_commit": commit_json(rec, rec.commits[base]),
        "merge_base_commit": commit_json(rec, rec.commits[merge]),
        "status": status,
        "ahead_by": len(ahead),
        "behind_by": behind,
        "total_commits": len(ahead),
        "commits": [commit_json(rec, rec.commits[c]) for c in ahead],
        "files": [],
    }


def commit_json(rec: RepoRec, commit: CommitRec) -> JSON:
    """A minimal commit object (GET /repos/{o}/{r}/commits/{ref})."""
    base = f"{API}/repos/{rec.full_name}"
    person = {"name": commit.author_name, "email": commit.author_email, "date": iso(commit.date)}
    return {
        "sha": commit.sha,
        "node_id": node_id("Commit", int(commit.sha[:8], 16)),
        "commit": {
            "author": person,
            "committer": person,
            "message": commit.message,
            "tree": {"sha": "f" * 40, "url": f"{base}/git/trees/{'f' * 40}"},
            "url": f"{base}/git/commits/{commit.sha}",
            "comment_count": 0,
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
            },
        },
        "url": f"{base}/commits/{commit.sha}",
        "html_url": f"{WEB}/{rec.full_name}/commit/{commit.sha}",
        "comments_url": f"{base}/commits/{commit.sha}/comments",
        "author": None,
        "committer": None,
        "parents": [
            {
                "sha": p,
                "url": f"{base}/commits/{p}",
                "html_url": f"{WEB}/{rec.full_name}/commit/{p}",
            }
            for p in commit.parents
        ],
        "stats": {"total": 1, "additions": 1, "deletions": 0},
        "files": [],
    }


def check_run_json(world: World, run: CheckRunRec) -> JSON:
    """A check-run object shaped like GitHub's."""
    rec = world.repo(run.repo)
    base = f"{API}/repos/{run.repo}"
    pulls = [
        {
            "url": f"{base}/pulls/{p.number}",
            "id": p.id,
            "number": p.number,
            "head": {
                "ref": p.head_ref,
                "sha": p.head_sha,
                "repo": {"id": rec.id, "url": base, "name": rec.name},
            },
            "base": {
                "ref": p.base_ref,
                "sha": "0" * 40,
                "repo": {"id": rec.id, "url": base, "name": rec.name},
            },
        }
        for p in rec.open_pulls_at(run.head_sha)
    ]
    return {
        "id": run.id,
        "name": run.name,
        "node_id": node_id("CheckRun", run.id),
        "head_sha": run.head_sha,
        "external_id": "",
        "url": f"{base}/check-runs/{run.id}",
        "html_url": f"{WEB}/{run.repo}/runs/{run.id}",
        "details_url": run.details_url,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": iso(run.started_at),
        "completed_at": iso(run.completed_at),
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": len(run.annotations),
            "annotations_url": f"{base}/check-runs/{run.id}/annotations",
        },
        "check_suite": {"id": run.suite_id},
        "app": integration_json(run.app_slug),
        "pull_requests": pulls,
    }


def status_json(world: World, rec: RepoRec, status: StatusRec, *, with_creator: bool) -> JSON:
    """A status object (with_creator for the history list, without for the combined one)."""
    creator = world.user(status.creator)
    data: JSON = {
        "url": f"{API}/repos/{rec.full_name}/statuses/{status.sha}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{creator.id}?v=4",
        "id": status.id,
        "node_id": node_id("StatusContext", status.id),
        "state": status.state,
        "description": status.description,
        "target_url": status.target_url,
        "context": status.context,
        "created_at": iso(status.created_at),
        "updated_at": iso(status.created_at),
    }
    if with_creator:
        data["creator"] = user_json(creator)
    return data


def comment_json(world: World, rec: CommentRec) -> JSON:
    """An issue-comment object."""
    base = f"{API}/repos/{rec.repo}"
    author = world.user(rec.author)
    app = world.apps.get(rec.author[:-5]) if author.is_bot else None
    return {
        "url": f"{base}/issues/comments/{rec.id}",
        "html_url": f"{WEB}/{rec.repo}/pull/{rec.number}#issuecomment-{rec.id}",
        "issue_url": f"{base}/issues/{rec.number}",
        "id": rec.id,
        "node_id": node_id("IssueComment", rec.id),
        "user": user_json(author),
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "author_association": "NONE",
        "body": rec.body,
        "reactions": {
            "url": f"{base}/issues/comments/{rec.id}/reactions",
            "total_count": 0,
            "+1": 0,
            "-1": 0,
            "laugh": 0,
            "hooray": 0,
            "confused": 0,
            "heart": 0,
            "rocket": 0,
            "eyes": 0,
        },
        "performed_via_github_app": app_json(app) if app else None,
    }


def rtd_version_json(proj: RtdProjectRec, slug: str) -> JSON:
    """An RTD API v3 version object."""
    api = f"{RTD_API}/projects/{proj.slug}/versions/{slug}"
    kind = proj.versions.get(slug, "branch")
    return {
        "active": True,
        "hidden": False,
        "built": any(b.version == slug for b in proj.builds.values()),
        "id": zlib.crc32(f"{proj.slug}/{slug}".encode()) % 10_000_000,
        "identifier": None,
        "ref": None,
        "slug": slug,
        "verbose_name": slug,
        "type": kind,
        "privacy_level": "public",
        "downloads": {},
        "urls": {
            "documentation": f"https://{proj.slug}.readthedocs.io/en/{slug}/",
            "vcs": None,
            "dashboard": {
                "edit": f"https://{proj.site}/dashboard/{proj.slug}/version/{slug}/edit/"
            },
        },
        "_links": {
            "_self": f"{api}/",
            "builds": f"{api}/builds/",
            "project": f"{RTD_API}/projects/{proj.slug}/",
        },
    }


def rtd_build_json(proj: RtdProjectRec, build: RtdBuildRec) -> JSON:
    """An RTD API v3 build object."""
    api = f"{RTD_API}/projects/{proj.slug}"
    web = f"https://{proj.site}/projects/{proj.slug}"
    return {
        "commit": build.commit,
        "created": rtd_iso(build.created),
        "duration": build.duration,
        "error": "",
        "finished": rtd_iso(build.finished),
        "id": build.id,
        "_links": {
            "_self": f"{api}/builds/{build.id}/",
            "project": f"{api}/",
            "version": f"{api}/versions/{build.version}/",
            "notifications": f"{api}/builds/{build.id}/notifications/",
        },
        "urls": {
            "build": f"{web}/builds/{build.id}/",
            "project": f"{web}/",
            "version": f"https://{proj.site}/dashboard/{proj.slug}/version/{build.version}/edit/",
        },
        "project": proj.slug,
        "state": {"code": build.state, "name": RTD_STATE_NAMES[build.state]},
        "success": build.success,
        "version": build.version,
    }


# -- one HTTP exchange, as the API modules see it ------------------------------------------


@dataclass
class Call:
    """One request handed to an API module (path relative to the service root)."""

    world: World
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    github_url: str
    rtd_url: str
    login: str | None = None
    token: str | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        """The first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default

    def int_arg(self, name: str, default: int) -> int:
        """An integer query parameter (default when absent or malformed)."""
        value = self.arg(name)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default


@dataclass
class Answer:
    """What an API module answers; the server adds headers, ETags and accounting."""

    status: int
    payload: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    graphql_cost: int | None = None
    graphql_operation: str | None = None
    charge: bool = True
