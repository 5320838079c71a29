"""GitHub's GraphQL and REST answers turned into model types (pure; no I/O).

One odd value never fails more than it must: an unknown context type becomes a signal in
state unknown, an unparseable time becomes no time, and a pull request that cannot be read
becomes a `PullFailure` naming it, while the others are read.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from bot.core.comment import Comment as Comment
from bot.core.merge_queue import entry_of
from bot.core.model import (
    BRANCH_PROTECTION,
    FAILING_STATES,
    RULESET,
    Annotation,
    Kind,
    PullSnapshot,
    RequiredChecks,
    RequiredContext,
    Rule,
    Signal,
    parse_optional_time,
)
from bot.core.reconcile import github_state

log = logging.getLogger(__name__)

BOT_SUFFIX = "[bot]"


class Unreadable(ValueError):
    """A value of GitHub's answer has a shape the bot cannot read."""


@dataclass(frozen=True, slots=True)
class PullFailure:
    """A pull request that could not be read; the others of its repository still are."""

    repo: str
    number: int | None  # None when GitHub's answer did not even give the number
    reason: str

    @property
    def label(self) -> str:
        """owner/name#N (or the repository and where the pull request sat in the answer)."""
        return f"{self.repo}#{self.number}" if self.number is not None else self.repo


@dataclass
class Partial:
    """A pull request being read: its snapshot so far, its contexts, what is left to read."""

    snapshot: PullSnapshot
    base: str | None
    signals: list[Signal]
    cursor: str | None
    labels_cursor: str | None = None
    truncated: bool = False
    failure: str | None = None
    extra_labels: list[str] = field(default_factory=list)
    total: int | None = None  # the contexts GitHub counts on the head (totalCount)
    required_checks: RequiredChecks | None = None  # what its base branch requires, once read
    # the snapshot last read from the very same node (its signals' `required` set again)
    reused: PullSnapshot | None = None

    def whole(self) -> bool:
        """Read from its node alone: no page of contexts or labels is left to follow."""
        return self.cursor is None and self.labels_cursor is None and self.failure is None

    def _short(self) -> bool:
        """Fewer contexts read than GitHub counted: pages came back short (never complete)."""
        return self.total is not None and len(self.signals) < self.total

    def finish(self) -> PullSnapshot | PullFailure:
        """The snapshot with every signal read, or the failure that stopped it."""
        snap = self.snapshot
        if self.failure is not None:
            return PullFailure(snap.repo, snap.number, self.failure)
        if self.reused is not None:
            same = len(self.signals) == len(self.reused.signals) and all(
                a is b for a, b in zip(self.signals, self.reused.signals, strict=True)
            )
            signals = self.reused.signals if same else tuple(self.signals)
            return replace(
                self.reused,
                signals=signals,
                fetched_at=snap.fetched_at,
                required_checks=self.required_checks,
                base=self.base,
            )
        labels = (*snap.labels, *self.extra_labels)
        return replace(
            snap,
            signals=tuple(self.signals),
            labels=labels,
            truncated=snap.truncated or self.truncated or self._short(),
            required_checks=self.required_checks,
            base=self.base,
        )


def normal_login(login: Any, typename: Any = None) -> str | None:
    """A login in REST's form: a Bot's GraphQL login (`dependabot`) gets `[bot]` appended."""
    if not isinstance(login, str):
        return None
    if typename == "Bot" and not login.endswith(BOT_SUFFIX):
        return login + BOT_SUFFIX
    return login


def get(node: Any, *path: str) -> Any:
    """The value at `path` inside nested objects (None where a step is missing or null)."""
    for key in path:
        if node is None:
            return None
        if not isinstance(node, dict):
            raise Unreadable(f"expected an object at {'.'.join(path)}")
        node = node.get(key)
    return node


def _time(value: Any, what: str) -> datetime | None:
    """A timestamp, or None when absent or unparseable (that one field, never the read)."""
    try:
        return parse_optional_time(value)
    except (TypeError, ValueError):
        log.warning("GitHub gave an unparseable %s %r: read as no time", what, value)
        return None


def _text(node: Mapping[str, Any], key: str) -> str | None:
    value = node.get(key)
    if value is None or isinstance(value, str):
        return value
    raise Unreadable(f"field {key!r} is {value!r}, expected text")


def _shared(value: Any) -> Any:
    """Text that repeats across pull requests (a check's name, app, workflow, state, title)
    as one interned string: a cycle keeps ~120,000 signals at 2,000 x 60, each field
    otherwise its own copy decoded from the answer. Anything else as it is."""
    return sys.intern(value) if type(value) is str else value


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _required_text(node: Mapping[str, Any], key: str) -> str:
    value = node.get(key)
    if isinstance(value, str):
        return value
    raise Unreadable(f"field {key!r} is {value!r}, expected text")


def _flag(node: Mapping[str, Any]) -> bool | None:
    value = node.get("isRequired")
    return value if isinstance(value, bool) else None


def parse_context(node: Any) -> Signal:
    """One statusCheckRollup context (CheckRun, StatusContext, or a type unknown here)."""
    if not isinstance(node, dict):
        raise Unreadable("a rollup context is not an object")
    kind = node.get("__typename")
    if kind == "CheckRun":
        return _check_run(node)
    if kind == "StatusContext":
        return _status_context(node)
    type_name = kind if isinstance(kind, str) and kind else "an unnamed type"
    return Signal(
        name=f"({type_name})",
        kind=Kind.STATUS,
        github_state="unknown",
        description=f"GitHub reported a context of type {type_name}, which this bot cannot read.",
    )


def _check_run(node: dict[str, Any]) -> Signal:
    """A CheckRun context, with its suite's app and workflow run."""
    status = _required_text(node, "status").lower()
    conclusion = _text(node, "conclusion")
    database_id = node.get("databaseId")
    suite = node.get("checkSuite")
    app_id = get(suite, "app", "databaseId")
    signal = Signal(
        name=_shared(_required_text(node, "name")),
        kind=Kind.CHECK_RUN,
        github_state=_shared(
            conclusion.lower() if status == "completed" and conclusion else status
        ),
        app=_shared(get(suite, "app", "slug")),
        workflow=_shared(get(suite, "workflowRun", "workflow", "name")),
        url=_text(node, "detailsUrl"),
        description=_shared(_text(node, "title")),
        summary=_text(node, "summary"),
        started_at=_time(node.get("startedAt"), "startedAt"),
        completed_at=_time(node.get("completedAt"), "completedAt"),
        required=_flag(node),
        database_id=database_id if isinstance(database_id, int) else None,
        event=_shared(get(suite, "workflowRun", "event")),
        workflow_path=_shared(_optional_text(get(suite, "workflowRun", "file", "path"))),
        app_id=app_id if isinstance(app_id, int) and not isinstance(app_id, bool) else None,
    )
    # kept only where its annotations are asked for: a failing run (not 100,000 strings)
    failing = github_state(signal) in FAILING_STATES
    return signal._replace(node_id=_optional_text(node.get("id"))) if failing else signal


def _status_context(node: dict[str, Any]) -> Signal:
    """A StatusContext context (a commit status)."""
    return Signal(
        name=_shared(_required_text(node, "context")),
        kind=Kind.STATUS,
        github_state=_shared(_required_text(node, "state").lower()),
        url=_text(node, "targetUrl"),
        description=_shared(_text(node, "description")),
        created_at=_time(node.get("createdAt"), "createdAt"),
        required=_flag(node),
    )


def parse_annotations(node: Any) -> tuple[Annotation, ...]:
    """A CheckRun node's failure-level annotations (Unreadable when the answer is malformed)."""
    return parse_annotation_page(node)[0]


def parse_annotation_page(node: Any) -> tuple[tuple[Annotation, ...], str | None]:
    """A CheckRun node's failure-level annotations of one page and the cursor of the next page
    (None: none). One malformed annotation (a null path or message) is skipped and logged, the
    others kept; Unreadable when the page itself is malformed."""
    if not isinstance(node, dict) or node.get("__typename") != "CheckRun":
        raise Unreadable("the node is not a CheckRun")
    connection = get(node, "annotations")
    nodes = get(connection, "nodes")
    if nodes is None:
        return (), None
    if not isinstance(nodes, list):
        raise Unreadable("annotations.nodes is not a list")
    found: list[Annotation] = []
    for item in nodes:
        if not isinstance(item, dict) or item.get("annotationLevel") != "FAILURE":
            continue
        try:
            found.append(
                Annotation(
                    _required_text(item, "path"),
                    _line_of(get(item, "location", "start", "line")),
                    _line_of(get(item, "location", "end", "line")),
                    _required_text(item, "message")[:ANNOTATION_LIMIT],
                )
            )
        except Unreadable as exc:
            log.warning("an annotation of check run %s is skipped: %s", node.get("id"), exc)
    more = get(connection, "pageInfo", "hasNextPage") if isinstance(connection, dict) else None
    cursor = get(connection, "pageInfo", "endCursor") if more is True else None
    return tuple(found), cursor if isinstance(cursor, str) else None


ANNOTATION_LIMIT = 2000  # characters of one message kept (a row quotes far fewer)


def _line_of(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_contexts(connection: Any) -> tuple[list[Signal], str | None]:
    """Signals of one contexts page and the cursor of the next page (None when done)."""
    if connection is None:
        return [], None
    nodes = get(connection, "nodes")
    if not isinstance(nodes, list):
        raise Unreadable("statusCheckRollup.contexts.nodes is not a list")
    signals = [parse_context(n) for n in nodes if n is not None]
    more = get(connection, "pageInfo", "hasNextPage")
    cursor = get(connection, "pageInfo", "endCursor") if more else None
    if more and not isinstance(cursor, str):
        raise Unreadable("a contexts page has a next page but no cursor")
    return signals, cursor


def parse_labels(connection: Any) -> tuple[list[str], str | None]:
    """Label names of one labels page and the cursor of the next page (None when done)."""
    if connection is None:
        return [], None
    nodes = get(connection, "nodes")
    if not isinstance(nodes, list):
        raise Unreadable("labels.nodes is not a list")
    names = [name for n in nodes if isinstance(name := get(n, "name"), str)]
    more = get(connection, "pageInfo", "hasNextPage")
    cursor = get(connection, "pageInfo", "endCursor") if more else None
    if more and not isinstance(cursor, str):
        raise Unreadable("a labels page has a next page but no cursor")
    return names, cursor


def reread(node: Mapping[str, Any], last: PullSnapshot, *, now: datetime) -> Partial:
    """The pull request last read as `last` from a node equal to `node` (not parsed again)."""
    base = node.get("baseRefName")
    return Partial(
        replace(last, fetched_at=now),
        base if isinstance(base, str) else None,
        list(last.signals),
        None,
        reused=last,
    )


def parse_pull(repo: str, node: Any, *, now: datetime) -> Partial | PullFailure:
    """One PullRequest node: its snapshot with the first contexts page, or why it cannot be."""
    number = node.get("number") if isinstance(node, dict) else None
    if not isinstance(number, int):
        return PullFailure(repo, None, "a pull request came back without its number")
    try:
        head = node.get("headRefOid")
        if not isinstance(head, str) or len(head) != 40:
            raise Unreadable(f"GitHub gave no head commit (headRefOid {head!r})")
        labels, labels_cursor = parse_labels(node.get("labels"))
        signals, cursor = parse_contexts(get(node, "statusCheckRollup", "contexts"))
        base = node.get("baseRefName")
        snapshot = PullSnapshot(
            repo=repo,
            number=number,
            title=_text(node, "title") or "",
            author=normal_login(get(node, "author", "login"), get(node, "author", "__typename")),
            draft=bool(node.get("isDraft")),
            head_sha=head,
            url=_text(node, "url") or "",
            labels=tuple(labels),
            fetched_at=now,
            base=base if isinstance(base, str) else None,
            queue=entry_of(node.get("isInMergeQueue"), node.get("mergeQueueEntry")),
        )
    except Unreadable as exc:
        return PullFailure(repo, number, str(exc))
    total = get(node, "statusCheckRollup", "contexts", "totalCount")
    return Partial(
        snapshot,
        base if isinstance(base, str) else None,
        signals,
        cursor,
        labels_cursor=labels_cursor,
        total=total if isinstance(total, int) and not isinstance(total, bool) else None,
    )


def required_of(connection: Any) -> dict[str, bool]:
    """Name -> isRequired of the contexts of one page (the contexts GitHub said it for)."""
    found: dict[str, bool] = {}
    for node in get(connection, "nodes") or []:
        if not isinstance(node, dict):
            continue
        name = node.get("name") if node.get("__typename") == "CheckRun" else node.get("context")
        flag = node.get("isRequired")
        if isinstance(name, str) and isinstance(flag, bool):
            found[name] = found.get(name, False) or flag
    return found


REQUIRED_STATUS_CHECKS = "REQUIRED_STATUS_CHECKS"
ACTIVE = "ACTIVE"  # a ruleset's enforcement that requires; EVALUATE and DISABLED do not


def parse_required(base: str, node: Any) -> RequiredChecks:
    """What a base branch Ref's protection and active rulesets require (pure).

    Each context keeps every rule that requires it (branch protection of the base, a ruleset
    by name); a ruleset's integrationId is kept: only that app's check satisfies it.
    """
    if not isinstance(node, dict):
        return RequiredChecks(base, read=False, error=f"GitHub gave no branch {base}")
    found: dict[tuple[str, int | None], list[Rule]] = {}
    for context in get(node, "refUpdateRule", "requiredStatusCheckContexts") or []:
        if isinstance(context, str) and context:
            found.setdefault((context, None), []).append(Rule(BRANCH_PROTECTION, base))
    rules = node.get("rules")
    if not isinstance(rules, dict) or not isinstance(rules.get("nodes"), list):
        return RequiredChecks(base, read=False, error=f"the rulesets of {base} were not given")
    if get(rules, "pageInfo", "hasNextPage"):
        error = f"more than {len(rules['nodes'])} rules apply to {base}; they were not all read"
        return RequiredChecks(base, read=False, error=error)
    for rule in rules["nodes"]:
        if not isinstance(rule, dict) or rule.get("type") != REQUIRED_STATUS_CHECKS:
            continue
        enforcement = get(rule, "repositoryRuleset", "enforcement")
        if enforcement is not None and enforcement != ACTIVE:
            continue  # evaluate (insights only) or disabled: it requires nothing
        ruleset = get(rule, "repositoryRuleset", "name")
        where = Rule(RULESET, ruleset if isinstance(ruleset, str) else "")
        for check in get(rule, "parameters", "requiredStatusChecks") or []:
            context, app = get(check, "context"), get(check, "integrationId")
            if isinstance(context, str) and context:
                key = (context, app if isinstance(app, int) and not isinstance(app, bool) else None)
                if where not in found.get(key, ()):
                    found.setdefault(key, []).append(where)
    contexts = tuple(RequiredContext(name, tuple(why), app) for (name, app), why in found.items())
    return RequiredChecks(base, read=True, contexts=contexts)


def parse_pins(data: Any) -> dict[str, int | None]:
    """Branch protection's app pins from REST `GET /repos/{o}/{r}/branches/{branch}`:
    `protection.required_status_checks.checks[] {context, app_id}` (context -> app id, None
    where any app may report it). Raises Unreadable on another shape."""
    checks = get(data, "protection", "required_status_checks", "checks")
    if get(data, "protection") is None or checks is None:
        return {}  # no branch protection (or none requiring checks): nothing pinned
    if not isinstance(checks, list):
        raise Unreadable("the branch's required status checks are not a list")
    pins: dict[str, int | None] = {}
    for check in checks:
        context, app = get(check, "context"), get(check, "app_id")
        if not isinstance(context, str):
            raise Unreadable("a required status check has no context")
        pinned = app if isinstance(app, int) and not isinstance(app, bool) and app > 0 else None
        pins[context] = pinned if pins.get(context, pinned) == pinned else None
    return pins


def with_pins(checks: RequiredChecks, pins: Mapping[str, int | None]) -> RequiredChecks:
    """The required set with branch protection's contexts tied to the app it pins them to."""
    found: dict[tuple[str, int | None], list[Rule]] = {}
    for context in checks.contexts:
        for rule in context.rules:
            app = context.app_id
            if rule.source == BRANCH_PROTECTION and app is None:
                app = pins.get(context.name)
            if rule not in found.get((context.name, app), ()):
                found.setdefault((context.name, app), []).append(rule)
    contexts = tuple(RequiredContext(name, tuple(why), app) for (name, app), why in found.items())
    return replace(checks, contexts=contexts)


def parse_rest_comment(data: Any) -> Comment:
    """A REST issue comment."""
    comment_id = get(data, "id")
    if not isinstance(comment_id, int):
        raise Unreadable("a comment has no id")
    node_id, created = get(data, "node_id"), get(data, "created_at")
    return Comment(
        id=comment_id,
        author=normal_login(get(data, "user", "login"), get(data, "user", "type")),
        body=_body(get(data, "body")),
        node_id=node_id if isinstance(node_id, str) else "",
        created_at=created if isinstance(created, str) else "",
    )


def parse_graphql_comment(node: Any, node_id: str) -> Comment:
    """A GraphQL IssueComment node."""
    comment_id = get(node, "databaseId")
    if not isinstance(comment_id, int):
        raise Unreadable("an IssueComment has no databaseId")
    author = normal_login(get(node, "author", "login"), get(node, "author", "__typename"))
    created = get(node, "createdAt")
    return Comment(
        id=comment_id,
        author=author,
        body=_body(get(node, "body")),
        node_id=node_id,
        editor=last_editor(node),
        editor_read=True,
        created_at=created if isinstance(created, str) else "",
    )


UNNAMED_EDITOR: Final = "(an editor GitHub did not name)"  # never a login: not the bot's edit


def last_editor(node: Any) -> str | None:
    """Who edited an IssueComment last (None: nobody since it was written).

    The editor of the newest of the edits asked (`firstEdit`/`lastEdit`: both ends of
    `userContentEdits`, the later `editedAt` wins), else `editor`; an edited comment
    (`lastEditedAt`) whose editor GitHub does not name (a deleted account) was not edited by
    the bot."""
    edits = [
        edit
        for end in ("firstEdit", "lastEdit")
        if isinstance(nodes := get(node, end, "nodes"), list)
        for edit in nodes
        if isinstance(edit, dict) and isinstance(edit.get("editedAt"), str)
    ]
    if edits:  # the newest; edits of the same time naming different editors name nobody
        at = max(str(edit["editedAt"]) for edit in edits)
        names = {_editor(edit) for edit in edits if edit["editedAt"] == at}
        return names.pop() or UNNAMED_EDITOR if len(names) == 1 else UNNAMED_EDITOR
    login = _editor(node)
    if login is None and get(node, "lastEditedAt") is not None:
        return UNNAMED_EDITOR
    return login


def _editor(node: Any) -> str | None:
    return normal_login(get(node, "editor", "login"), get(node, "editor", "__typename"))


def _body(value: Any) -> str:
    return value if isinstance(value, str) else ""
