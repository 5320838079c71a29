"""GitHub GraphQL of the sandbox: validated against the real schema, executed over the World."""

from __future__ import annotations

import base64
import importlib.resources
import json
import math
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLSyntaxError,
    GraphQLUnionType,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    Undefined,
    VariableNode,
    build_schema,
    coerce_input_value,
    execute,
    get_named_type,
    is_input_type,
    is_leaf_type,
    parse,
    type_from_ast,
    validate,
    value_from_ast,
    value_from_ast_untyped,
)
from graphql.type.definition import GraphQLNamedType

from bot_sandbox.world import (
    JSON,
    WEB,
    CheckRunRec,
    CommentRec,
    PullRec,
    RepoRec,
    RulesetRec,
    StatusRec,
    SuiteRec,
    World,
    app_info,
    iso,
    node_id,
)

MAX_PAGE = 100
MAX_NODES = 500_000
T = TypeVar("T")

_schema: GraphQLSchema | None = None
_schema_lock = threading.Lock()


def schema() -> GraphQLSchema:
    """GitHub's public GraphQL schema, built once per process."""
    global _schema
    with _schema_lock:
        if _schema is None:
            text = (
                importlib.resources.files("bot_sandbox")
                .joinpath("github-schema.graphql")
                .read_text(encoding="utf-8")
            )
            built = build_schema(text, assume_valid_sdl=True)
            built._validation_errors = []  # the real schema trips two strict checks
            _schema = built
        return _schema


@lru_cache(maxsize=512)
def prepare(query: str) -> DocumentNode | tuple[JSON, ...]:
    """Parse and validate a query (cached); the document, or GitHub-style error entries."""
    try:
        document = parse(query)
    except GraphQLSyntaxError as exc:
        return (_format(exc),)
    errors = validate(schema(), document)
    if errors:
        return tuple(_format(e) | {"extensions": {"code": "validationError"}} for e in errors)
    return document


def _format(exc: GraphQLError) -> JSON:
    data: JSON = {"message": exc.message}
    if exc.locations:
        data["locations"] = [{"line": loc.line, "column": loc.column} for loc in exc.locations]
    if exc.path:
        data["path"] = list(exc.path)
    return data


def operation_of(document: DocumentNode, name: str | None) -> OperationDefinitionNode | None:
    """The operation a request selects."""
    ops = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if name:
        return next((o for o in ops if o.name and o.name.value == name), None)
    return ops[0] if len(ops) == 1 else None


def sniff_operation(body: bytes) -> str:
    """ "query", "mutation" or "subscription": what a GraphQL request body asks for."""
    try:
        data = json.loads(body or b"null")
    except ValueError:
        return "query"
    if not isinstance(data, dict) or not isinstance(data.get("query"), str):
        return "query"
    prepared = prepare(data["query"])
    if not isinstance(prepared, tuple):
        operation = operation_of(prepared, data.get("operationName"))
        if operation is not None:
            return operation.operation.value
    head = data["query"].lstrip()
    return next((kind for kind in ("mutation", "subscription") if head.startswith(kind)), "query")


# -- cost ---------------------------------------------------------------------------------------


@dataclass
class Cost:
    """GitHub's accounting of one query."""

    requests: int = 0
    nodes: int = 0
    errors: list[JSON] = field(default_factory=list)

    @property
    def points(self) -> int:
        """requests / 100, rounded, at least 1."""
        return max(1, math.floor(self.requests / 100 + 0.5))


def query_cost(
    document: DocumentNode, operation: OperationDefinitionNode, variables: dict[str, Any]
) -> Cost:
    """Sum over connections of the product of the first/last of their enclosing connections."""
    sch = schema()
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    cost = Cost()
    root = sch.mutation_type if operation.operation.value == "mutation" else sch.query_type
    assert root is not None
    _walk(sch, fragments, root, operation.selection_set, 1, variables, cost, ())
    return cost


def _page_size(node: FieldNode, variables: dict[str, Any]) -> int | None:
    for arg in node.arguments or ():
        if arg.name.value in ("first", "last"):
            value = value_from_ast_untyped(arg.value, variables)
            if isinstance(value, int):
                return value
    return None


def _walk(
    sch: GraphQLSchema,
    fragments: dict[str, FragmentDefinitionNode],
    parent: GraphQLNamedType,
    selection_set: SelectionSetNode,
    multiplier: int,
    variables: dict[str, Any],
    cost: Cost,
    path: tuple[str, ...],
) -> None:
    for sel in selection_set.selections:
        if isinstance(sel, FieldNode):
            if not isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
                continue
            definition = parent.fields.get(sel.name.value)
            if definition is None:
                continue
            named = get_named_type(definition.type)
            child = multiplier
            here = (*path, (sel.alias or sel.name).value)
            if named.name.endswith("Connection"):
                size = _page_size(sel, variables)
                if size is None:
                    cost.errors.append(_pagination_error(sel, here, None))
                    size = 0
                elif size > MAX_PAGE or size < 0:
                    cost.errors.append(_pagination_error(sel, here, size))
                cost.requests += multiplier
                child = multiplier * size
                cost.nodes += child
            if sel.selection_set is not None:
                _walk(sch, fragments, named, sel.selection_set, child, variables, cost, here)
        elif isinstance(sel, InlineFragmentNode):
            target = sch.get_type(sel.type_condition.name.value) if sel.type_condition else parent
            if target is not None:
                _walk(sch, fragments, target, sel.selection_set, multiplier, variables, cost, path)
        elif isinstance(sel, FragmentSpreadNode):
            frag = fragments.get(sel.name.value)
            target = sch.get_type(frag.type_condition.name.value) if frag else None
            if frag is not None and target is not None:
                _walk(sch, fragments, target, frag.selection_set, multiplier, variables, cost, path)


def _pagination_error(node: FieldNode, path: tuple[str, ...], size: int | None) -> JSON:
    name = node.name.value
    loc = node.loc.source.get_location(node.loc.start) if node.loc else None
    if size is None:
        entry: JSON = {
            "type": "MISSING_PAGINATION_BOUNDARIES",
            "message": "You must provide a `first` or `last` value to properly paginate "
            f"the `{name}` connection.",
        }
    else:
        entry = {
            "type": "EXCESSIVE_PAGINATION",
            "message": f"Requesting {size} records on the `{name}` connection exceeds "
            f"the `first` limit of {MAX_PAGE} records.",
        }
    entry["path"] = ["query", *path]
    if loc is not None:
        entry["locations"] = [{"line": loc.line, "column": loc.column}]
    return entry


# -- objects over the World ----------------------------------------------------------------------


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _uncursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    try:
        return int(base64.b64decode(cursor).decode().rsplit(":", 1)[1])
    except (ValueError, IndexError):
        return None


def connection(
    items: Sequence[T], make: Callable[[T], JSON], args: dict[str, Any], **extra: Any
) -> JSON:
    """A Relay connection over items (first/after/last/before), nodes built on demand."""
    start = 0
    end = len(items)
    after, before = _uncursor(args.get("after")), _uncursor(args.get("before"))
    if after is not None:
        start = after + 1
    if before is not None:
        end = min(end, before)
    indices = list(range(start, max(start, end)))
    if args.get("first") is not None:
        indices = indices[: args["first"]]
    if args.get("last") is not None:
        indices = indices[-args["last"] :] if args["last"] else []
    chosen = [(i, items[i]) for i in indices]

    def nodes(info: Any) -> list[JSON]:
        return [make(item) for _, item in chosen]

    def edges(info: Any) -> list[JSON]:
        return [{"cursor": _cursor(i), "node": make(item)} for i, item in chosen]

    data: JSON = {
        "totalCount": len(items),
        "nodes": nodes,
        "edges": edges,
        "pageInfo": {
            "hasNextPage": bool(indices) and indices[-1] < len(items) - 1,
            "hasPreviousPage": bool(indices) and indices[0] > 0,
            "startCursor": _cursor(indices[0]) if indices else None,
            "endCursor": _cursor(indices[-1]) if indices else None,
        },
    }
    data.update(extra)
    return data


_APPS: dict[str, JSON] = {}


def _app(slug: str | None) -> JSON | None:
    if slug is None:
        return None
    cached = _APPS.get(slug)
    if cached is None:
        info = app_info(slug)
        assert info is not None
        ident, name, _owner = info
        cached = {
            "__typename": "App",
            "id": node_id("App", ident),
            "databaseId": ident,
            "slug": slug,
            "name": name,
            "url": f"{WEB}/apps/{slug}",
            "logoUrl": f"https://avatars.githubusercontent.com/in/{ident}?v=4",
            "logoBackgroundColor": "ffffff",
            "createdAt": "2018-07-30T09:30:17Z",
            "updatedAt": "2024-04-10T20:33:16Z",
            "description": None,
        }
        _APPS[slug] = cached
    return cached


@dataclass
class Context:
    """Per-request state handed to resolvers."""

    world: World
    login: str
    rate: JSON
    errors: list[JSON] = field(default_factory=list)
    # a fine-grained or installation token's permissions (None: not limited), as REST's
    permissions: Mapping[str, str] | None = None
    reach: frozenset[str] | None = None  # an installation token: the repositories it sees


class Objects:
    """Builds GraphQL-shaped dicts (with `__typename`) from World records."""

    def __init__(self, ctx: Context) -> None:
        """Bind to one request."""
        self.ctx = ctx
        self.world = ctx.world

    def root(self) -> JSON:
        """The Query root value."""
        viewer = self.world.user(self.ctx.login)
        return {
            "viewer": {
                "__typename": "User",
                "login": viewer.login,
                "id": node_id("User", viewer.id),
                "databaseId": viewer.id,
                "url": f"{WEB}/{viewer.login}",
            },
            "rateLimit": lambda info, **kw: self.ctx.rate,
            "repository": self.repository,
            "nodes": self.nodes,
        }

    def nodes(self, info: Any, ids: list[str], **kw: Any) -> list[JSON | None]:
        """Query.nodes: issue comments and check runs by global id; null + NOT_FOUND for an
        unknown one."""
        found: list[JSON | None] = []
        for index, ident in enumerate(ids):
            run = self._check_run_by_node_id(ident)
            if run is not None:
                found.append(self.check_run(self.world.repo(run.repo), run))
                continue
            rec = self._comment_by_node_id(ident)
            if rec is None:
                path = list(info.path) if isinstance(info, Info) else info.path.as_list()
                self.ctx.errors.append(
                    {
                        "type": "NOT_FOUND",
                        "path": [*path, index],
                        "message": f"Could not resolve to a node with the global id of '{ident}'",
                    }
                )
            found.append(None if rec is None else self.comment(rec))
        return found

    def _check_run_by_node_id(self, ident: str) -> CheckRunRec | None:
        try:
            decoded = base64.b64decode(ident.encode(), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        prefix = f"0{len('CheckRun')}:CheckRun"
        if not decoded.startswith(prefix) or not decoded[len(prefix) :].isdigit():
            return None
        return self.world.check_runs.get(int(decoded[len(prefix) :]))

    def _comment_by_node_id(self, ident: str) -> CommentRec | None:
        try:
            decoded = base64.b64decode(ident.encode(), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        prefix = f"0{len('IssueComment')}:IssueComment"
        if not decoded.startswith(prefix) or not decoded[len(prefix) :].isdigit():
            return None
        rec = self.world.comment_recs.get(int(decoded[len(prefix) :]))
        return None if rec is None or rec.deleted else rec

    def actor(self, login: str) -> JSON:
        """An Actor: a GitHub App's account is a Bot whose GraphQL login has no `[bot]`."""
        user = self.world.user(login)
        if user.is_bot:
            slug = user.login[:-5]
            return {"__typename": "Bot", "login": slug, "url": f"{WEB}/apps/{slug}"}
        return {"__typename": "User", "login": user.login, "url": f"{WEB}/{user.login}"}

    def comment(self, rec: CommentRec) -> JSON:
        """An IssueComment; a GitHub App author is a Bot whose GraphQL login has no [bot]."""
        return {
            "__typename": "IssueComment",
            "id": node_id("IssueComment", rec.id),
            "databaseId": rec.id,
            "body": rec.body,
            "author": self.actor(rec.author),
            "createdAt": iso(rec.created_at),
            "lastEditedAt": iso(rec.last_edited_at),
            "editor": None if rec.editor is None else self.actor(rec.editor),
            "isMinimized": False,
            "userContentEdits": lambda info, **args: connection(rec.edits, self._edit, args),
        }

    def _edit(self, edit: tuple[str, datetime]) -> JSON:
        """A UserContentEdit: who edited, when."""
        editor, at = edit
        return {
            "__typename": "UserContentEdit",
            "id": node_id("UserContentEdit", zlib.crc32(f"{editor}:{iso(at)}".encode())),
            "editedAt": iso(at),
            "createdAt": iso(at),
            "updatedAt": iso(at),
            "editor": self.actor(editor),
        }

    def repository(self, info: Any, owner: str, name: str, **kw: Any) -> JSON | None:
        """Query.repository (null + NOT_FOUND error when unknown)."""
        rec = self.world.find_repo(f"{owner}/{name}")
        if rec is not None and self.ctx.reach is not None and rec.full_name not in self.ctx.reach:
            rec = None  # another installation's repository: as if it did not exist
        if rec is None:
            node = info.field_nodes[0]
            loc = node.loc.source.get_location(node.loc.start) if node.loc else None
            entry: JSON = {
                "type": "NOT_FOUND",
                "path": list(info.path) if isinstance(info, Info) else info.path.as_list(),
                "message": f"Could not resolve to a Repository with the name '{owner}/{name}'.",
            }
            if loc is not None:
                entry["locations"] = [{"line": loc.line, "column": loc.column}]
            self.ctx.errors.append(entry)
            return None
        return self.repo(rec)

    def repo(self, rec: RepoRec) -> JSON:
        """A Repository."""

        def pull_requests(info: Any, **args: Any) -> JSON | None:
            if self.ctx.permissions is not None and not self.ctx.permissions.get("pull_requests"):
                # GitHub's answer to a workflow token whose `permissions:` lack pull-requests
                path = list(info.path) if isinstance(info, Info) else info.path.as_list()
                message = "Resource not accessible by integration"
                self.ctx.errors.append({"type": "FORBIDDEN", "path": path, "message": message})
                return None
            states = args.get("states")
            pulls = [p for p in rec.pulls.values() if not states or p.state.upper() in states]
            order = args.get("orderBy") or {}
            attr = "updated_at" if order.get("field") == "UPDATED_AT" else "created_at"
            pulls.sort(
                key=lambda p: (getattr(p, attr), p.number), reverse=order.get("direction") == "DESC"
            )
            return connection(pulls, lambda p: self.pull(rec, p), args)

        def pull_request(info: Any, number: int) -> JSON | None:
            pull = rec.pulls.get(number)
            return self.pull(rec, pull) if pull else None

        def obj(info: Any, oid: str | None = None, expression: str | None = None) -> JSON | None:
            sha = oid or expression
            return self.commit(rec, sha) if sha in rec.commits else None

        return {
            "__typename": "Repository",
            "id": node_id("Repository", rec.id),
            "databaseId": rec.id,
            "name": rec.name,
            "nameWithOwner": rec.full_name,
            "owner": {"__typename": "Organization", "login": rec.owner},
            "url": f"{WEB}/{rec.full_name}",
            "isPrivate": rec.private,
            "isArchived": False,
            "defaultBranchRef": self.ref(rec, rec.default_branch),
            "pullRequests": pull_requests,
            "pullRequest": pull_request,
            "object": obj,
            "mergeQueue": lambda info, branch=None: self.merge_queue(info, rec, branch),
            "ref": lambda info, qualifiedName: self.ref(
                rec, qualifiedName.removeprefix("refs/heads/")
            ),
        }

    def ref(self, rec: RepoRec, branch: str) -> JSON:
        """A branch Ref: its protection viewable by non-admins and its rulesets' rules."""
        protected = rec.required_checks.get(branch)
        rule = None
        if protected is not None:
            rule = {
                "__typename": "RefUpdateRule",
                "pattern": branch,
                "requiredStatusCheckContexts": list(protected),
                "allowsDeletions": False,
                "allowsForcePushes": False,
                "blocksCreations": False,
                "requiresCodeOwnerReviews": False,
                "requiresLinearHistory": False,
                "requiresSignatures": False,
                "viewerAllowedToDismissReviews": False,
                "viewerCanPush": False,
            }

        def rules(info: Any, **args: Any) -> JSON | None:
            error = rec.rules_errors.get(branch)
            if error is not None:
                path = list(info.path) if isinstance(info, Info) else info.path.as_list()
                self.ctx.errors.append({"type": "FORBIDDEN", "path": path, "message": error})
                return None
            found = [r for r in rec.rulesets if branch in r.branches]
            nodes = [self._rule(r, kind) for r in found for kind in ("DELETION", "REQUIRED")]
            return connection(nodes, lambda n: n, args)

        return {
            "__typename": "Ref",
            "id": node_id("Ref", zlib.crc32(f"{rec.full_name}:{branch}".encode())),
            "name": branch,
            "prefix": "refs/heads/",
            "refUpdateRule": rule,
            "rules": rules,
            "target": lambda info: self._tip(info, rec, branch),
        }

    def _tip(self, info: Any, rec: RepoRec, branch: str) -> JSON | None:
        """The branch's newest commit (an error and null where a test made GitHub refuse it)."""
        error = rec.tip_errors.get(branch)
        if error is not None:
            path = list(info.path) if isinstance(info, Info) else info.path.as_list()
            self.ctx.errors.append({"type": "FORBIDDEN", "path": path, "message": error})
            return None
        return self.commit(rec, self.world.branch_tip(rec.full_name, branch))

    @staticmethod
    def _rule(ruleset: RulesetRec, kind: str) -> JSON:
        """One rule of a ruleset as GitHub gives it (a deletion rule has no parameters)."""
        parameters = None
        if kind == "REQUIRED":
            parameters = {
                "__typename": "RequiredStatusChecksParameters",
                "doNotEnforceOnCreate": False,
                "strictRequiredStatusChecksPolicy": False,
                "requiredStatusChecks": [
                    {"__typename": "StatusCheckConfiguration", "context": c, "integrationId": app}
                    for c, app in ruleset.checks
                ],
            }
        return {
            "__typename": "RepositoryRule",
            "id": node_id("RepositoryRule", ruleset.id * 10 + (kind == "REQUIRED")),
            "type": "REQUIRED_STATUS_CHECKS" if kind == "REQUIRED" else "DELETION",
            "parameters": parameters,
            "repositoryRuleset": {
                "__typename": "RepositoryRuleset",
                "id": node_id("RepositoryRuleset", ruleset.id),
                "databaseId": ruleset.id,
                "name": ruleset.name,
                "enforcement": ruleset.enforcement,
                "source": {"__typename": ruleset.source},
            },
        }

    def pull(self, rec: RepoRec, pull: PullRec) -> JSON:
        """A PullRequest."""
        author = self.world.user(pull.author)
        url = f"{WEB}/{rec.full_name}/pull/{pull.number}"

        def labels(info: Any, **args: Any) -> JSON:
            return connection(
                list(pull.labels),
                lambda n: {"__typename": "Label", "name": n, "color": "ededed"},
                args,
            )

        def commits(info: Any, **args: Any) -> JSON:
            return connection(
                [pull.head_sha],
                lambda sha: {"__typename": "PullRequestCommit", "commit": self.commit(rec, sha)},
                args,
            )

        def comments(info: Any, **args: Any) -> JSON:
            return connection(
                self.world.comment_records(rec.full_name, pull.number), self.comment, args
            )

        return {
            "__typename": "PullRequest",
            "id": node_id("PullRequest", pull.id),
            "databaseId": pull.id,
            "number": pull.number,
            "title": pull.title,
            "body": pull.body or "",
            "url": url,
            "permalink": url,
            "resourcePath": f"/{rec.full_name}/pull/{pull.number}",
            "isDraft": pull.draft,
            "state": pull.state.upper(),
            "closed": pull.state == "closed",
            "merged": False,
            "headRefOid": pull.head_sha,
            "headRefName": pull.head_ref,
            "baseRefName": pull.base_ref,
            "baseRef": lambda info: self.ref(rec, pull.base_ref),
            "createdAt": iso(pull.created_at),
            "updatedAt": iso(pull.updated_at),
            "closedAt": iso(pull.closed_at),
            "author": self.actor(author.login),
            "labels": labels,
            "commits": commits,
            "comments": comments,
            "statusCheckRollup": lambda info: self.rollup(rec, pull.head_sha),
            "isInMergeQueue": pull.number in rec.queue_entries,
            "isMergeQueueEnabled": pull.base_ref in rec.merge_queues,
            "mergeQueueEntry": lambda info: self.queue_entry(info, rec, pull.number),
        }

    def queue_entry(self, info: Any, rec: RepoRec, number: int) -> JSON | None:
        """PullRequest.mergeQueueEntry (an error where the world refuses it)."""
        error = rec.entry_errors.get(number)
        if error is not None:
            path = list(info.path) if isinstance(info, Info) else info.path.as_list()
            self.ctx.errors.append({"type": "FORBIDDEN", "path": path, "message": error})
            return None
        entry = rec.queue_entries.get(number)
        if entry is None:
            return None
        return {
            "__typename": "MergeQueueEntry",
            "id": node_id("MergeQueueEntry", zlib.crc32(f"{rec.full_name}:{number}".encode())),
            "state": entry.state,
            "position": entry.position,
            "enqueuedAt": iso(entry.enqueued_at),
            "jump": False,
            "solo": False,
            "headCommit": self.commit(rec, entry.head_sha) if entry.head_sha else None,
            "baseCommit": self.commit(rec, entry.base_sha) if entry.base_sha else None,
        }

    def merge_queue(self, info: Any, rec: RepoRec, branch: str | None) -> JSON | None:
        """Repository.mergeQueue(branch:) (the default branch's without one; null: none)."""
        name = branch or rec.default_branch
        error = rec.queue_errors.get(name)
        if error is not None:
            path = list(info.path) if isinstance(info, Info) else info.path.as_list()
            self.ctx.errors.append({"type": "FORBIDDEN", "path": path, "message": error})
            return None
        if name not in rec.merge_queues:
            return None
        return {
            "__typename": "MergeQueue",
            "id": node_id("MergeQueue", zlib.crc32(f"{rec.full_name}:{name}".encode())),
            "url": f"{WEB}/{rec.full_name}/queue/{name}",
            "resourcePath": f"/{rec.full_name}/queue/{name}",
            "configuration": {
                "__typename": "MergeQueueConfiguration",
                "checkResponseTimeout": rec.merge_queues[name],
                "maximumEntriesToBuild": 5,
                "maximumEntriesToMerge": 5,
                "minimumEntriesToMerge": 1,
                "minimumEntriesToMergeWaitTime": 5,
                "mergeMethod": "MERGE",
                "mergingStrategy": "ALLGREEN",
            },
        }

    def commit(self, rec: RepoRec, sha: str) -> JSON:
        """A Commit."""
        commit = rec.commits[sha]
        return {
            "__typename": "Commit",
            "id": node_id("Commit", int(sha[:8], 16)),
            "oid": sha,
            "abbreviatedOid": sha[:7],
            "message": commit.message,
            "messageHeadline": commit.message.splitlines()[0] if commit.message else "",
            "committedDate": iso(commit.date),
            "authoredDate": iso(commit.date),
            "url": f"{WEB}/{rec.full_name}/commit/{sha}",
            "statusCheckRollup": lambda info: self.rollup(rec, sha),
            "checkSuites": lambda info, **args: self.check_suites(rec, sha, args),
            "history": lambda info, **args: self.history(rec, sha, args),
        }

    def check_suites(self, rec: RepoRec, sha: str, args: dict[str, Any]) -> JSON:
        """Commit.checkSuites(filterBy: {appId, checkName}): the commit's suites, oldest first;
        checkName keeps the suites holding a run of that name."""
        given = args.get("filterBy") or {}
        app_id, check = given.get("appId"), given.get("checkName")

        def holds(suite: SuiteRec) -> bool:
            runs = self.world.suite_check_runs(rec.full_name, suite.id, latest=False)
            return check is None or any(r.name == check for r in runs)

        suites = [
            s
            for s in rec.suites.values()
            if s.head_sha == sha
            and (app_id is None or (_app(s.app_slug) or {}).get("databaseId") == app_id)
            and holds(s)
        ]
        return connection(sorted(suites, key=lambda s: s.id), lambda s: self.suite(rec, s), args)

    def suite(self, rec: RepoRec, suite: SuiteRec) -> JSON:
        """A CheckSuite with its runs: checkRuns(filterBy: {checkType, checkName}); GitHub lists
        only each name's latest run unless asked for ALL."""
        any_run = next(
            iter(self.world.suite_check_runs(rec.full_name, suite.id, latest=False)), None
        )
        shell = self.check_run(rec, any_run)["checkSuite"] if any_run else {}

        def runs(info: Any, **args: Any) -> JSON:
            given = args.get("filterBy") or {}
            latest = given.get("checkType", "LATEST") != "ALL"
            found = self.world.suite_check_runs(rec.full_name, suite.id, latest=latest)
            name = given.get("checkName")
            found = [r for r in found if name is None or r.name == name]
            return connection(found, lambda r: self.check_run(rec, r), args)

        return {**shell, "checkRuns": runs}

    def history(self, rec: RepoRec, sha: str, args: dict[str, Any]) -> JSON:
        """Commit.history: the commit and those before it on a branch it is the tip of (as a
        test pushed them), newest first; a commit on no such branch is alone."""
        for commits in rec.branch_commits.values():
            if sha in commits:
                line = commits[commits.index(sha) :]
                break
        else:
            line = [sha]
        return connection(line, lambda c: self.commit(rec, c), args)

    def rollup(self, rec: RepoRec, sha: str) -> JSON | None:
        """A StatusCheckRollup (null when the commit has no contexts)."""
        runs = self.world.latest_check_runs(rec.full_name, sha)
        statuses = self.world.latest_statuses(rec.full_name, sha)
        if not runs and not statuses:
            return None
        # GitHub's rollup lists only what reported: a required context that never did (the
        # UI's "Expected") is not among its contexts; the rollup's state still says EXPECTED.
        reported = {r.name for r in runs} | {s.context for s in statuses}
        expected = [
            name for pull in rec.open_pulls_at(sha)
            for name, _, _ in rec.required_for(pull.base_ref) if name not in reported
        ]  # fmt: skip
        items: list[CheckRunRec | StatusRec] = [*runs, *statuses]

        def make(item: CheckRunRec | StatusRec) -> JSON:
            if isinstance(item, CheckRunRec):
                return self.check_run(rec, item)
            return self.status_context(rec, item)

        state = rollup_state(runs, statuses, expected)
        run_states = _counts([_run_state(r) for r in runs])
        status_states = _counts([s.state.upper() for s in statuses])
        return {
            "__typename": "StatusCheckRollup",
            "id": node_id("StatusCheckRollup", int(sha[:8], 16)),
            "state": state,
            "contexts": lambda info, **args: connection(
                items,
                make,
                args,
                checkRunCount=len(runs),
                statusContextCount=len(statuses),
                checkRunCountsByState=run_states,
                statusContextCountsByState=status_states,
            ),
        }

    def check_run(self, rec: RepoRec, run: CheckRunRec) -> JSON:
        """A CheckRun."""
        suite = rec.suites[run.suite_id]
        workflow_run = None
        if suite.workflow is not None and suite.run_id is not None:
            workflow_run = {
                "__typename": "WorkflowRun",
                "id": node_id("WorkflowRun", suite.run_id),
                "databaseId": suite.run_id,
                "runNumber": suite.run_id % 10000,
                "event": suite.event,
                "url": f"{WEB}/{rec.full_name}/actions/runs/{suite.run_id}",
                "workflow": {
                    "__typename": "Workflow",
                    "name": suite.workflow,
                    "id": node_id("Workflow", _workflow_id(suite.workflow_path)),
                    "databaseId": _workflow_id(suite.workflow_path),
                },
                "file": None
                if suite.workflow_path is None
                else {
                    "__typename": "WorkflowRunFile",
                    "id": node_id("WorkflowRunFile", suite.run_id),
                    "path": suite.workflow_path,
                    "repositoryName": rec.full_name,
                    "url": f"{WEB}/{rec.full_name}/blob/{suite.head_sha}/{suite.workflow_path}",
                },
            }
        url = f"{WEB}/{rec.full_name}/runs/{run.id}"
        return {
            "__typename": "CheckRun",
            "id": node_id("CheckRun", run.id),
            "databaseId": run.id,
            "name": run.name,
            "status": run.status.upper(),
            "conclusion": run.conclusion.upper() if run.conclusion else None,
            "startedAt": iso(run.started_at),
            "completedAt": iso(run.completed_at),
            "detailsUrl": run.details_url,
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "url": url,
            "permalink": url,
            "resourcePath": f"/{rec.full_name}/runs/{run.id}",
            "isRequired": self.is_required(rec, run.name),
            "annotations": lambda info, **args: connection(
                run.annotations, lambda a: _annotation_node(rec, run, a), args
            ),
            "checkSuite": {
                "__typename": "CheckSuite",
                "id": node_id("CheckSuite", suite.id),
                "databaseId": suite.id,
                "app": _app(suite.app_slug),
                "workflowRun": workflow_run,
                "createdAt": iso(suite.created_at),
            },
        }

    def is_required(self, rec: RepoRec, name: str) -> Callable[..., bool | None]:
        """CheckRun/StatusContext.isRequired: from the pull request's base branch protection.

        Like GitHub, it needs `pullRequestNumber` or `pullRequestId`: without either it passes
        validation but fails at run time (an error entry on its path, the field null).
        """

        def resolve(
            info: Any, pullRequestNumber: int | None = None, pullRequestId: str | None = None
        ) -> bool | None:
            number = pullRequestNumber
            if number is None and pullRequestId is not None:
                number = next(
                    (p.number for p in rec.pulls.values()
                     if node_id("PullRequest", p.id) == pullRequestId),
                    None,
                )  # fmt: skip
            if number is None or number not in rec.pulls:
                path = list(info.path) if isinstance(info, Info) else info.path.as_list()
                given = pullRequestNumber is not None or pullRequestId is not None
                self.ctx.errors.append(
                    {
                        "type": "NOT_FOUND" if given else "ARGUMENT_ERROR",
                        "path": path,
                        "message": "Could not resolve to a PullRequest."
                        if given
                        else "isRequired needs a pullRequestId or a pullRequestNumber",
                    }
                )
                return None
            return self.world.is_required(rec.full_name, number, name)

        return resolve

    def status_context(self, rec: RepoRec, status: StatusRec) -> JSON:
        """A StatusContext."""
        creator = self.world.user(status.creator)
        return {
            "__typename": "StatusContext",
            "id": node_id("StatusContext", status.id),
            "context": status.context,
            "state": status.state.upper(),
            "description": status.description,
            "targetUrl": status.target_url,
            "createdAt": iso(status.created_at),
            "isRequired": self.is_required(rec, status.context),
            "avatarUrl": f"https://avatars.githubusercontent.com/u/{creator.id}?v=4",
            "creator": {"__typename": "User", "login": creator.login},
        }


def _annotation_node(rec: RepoRec, run: CheckRunRec, given: JSON) -> JSON:
    """A CheckAnnotation from the REST-shaped record."""

    def position(line: int, column: int | None) -> JSON:
        return {"__typename": "CheckAnnotationPosition", "line": line, "column": column}

    level = given["annotation_level"]
    return {
        "__typename": "CheckAnnotation",
        "annotationLevel": level.upper(),
        "path": given["path"],
        "blobUrl": f"{WEB}/{rec.full_name}/blob/{run.head_sha}/{given['path']}",
        "location": {
            "__typename": "CheckAnnotationSpan",
            "start": position(given["start_line"], given["start_column"]),
            "end": position(given["end_line"], given["end_column"]),
        },
        "message": given["message"],
        "title": given["title"],
        "rawDetails": given["raw_details"],
        "databaseId": None,
    }


def _workflow_id(path: str | None) -> int:
    """A stable database id for a workflow file."""
    return zlib.crc32((path or "").encode()) & 0x3FFFFFFF


def _run_state(run: CheckRunRec) -> str:
    if run.status != "completed":
        return run.status.upper()
    return (run.conclusion or "neutral").upper()


def _counts(states: list[str]) -> list[JSON]:
    seen: dict[str, int] = {}
    for s in states:
        seen[s] = seen.get(s, 0) + 1
    return [{"state": s, "count": n} for s, n in seen.items()]


FAILING_CONCLUSIONS = {"failure", "timed_out", "cancelled", "action_required", "startup_failure"}


def rollup_state(
    runs: Sequence[CheckRunRec], statuses: Sequence[StatusRec], expected: Sequence[str]
) -> str:
    """The rollup's StatusState: ERROR/FAILURE beat PENDING/EXPECTED beat SUCCESS."""
    if any(s.state == "error" for s in statuses):
        return "ERROR"
    if any(s.state == "failure" for s in statuses) or any(
        r.status == "completed" and r.conclusion in FAILING_CONCLUSIONS for r in runs
    ):
        return "FAILURE"
    if expected:
        return "EXPECTED"
    if any(s.state == "pending" for s in statuses) or any(r.status != "completed" for r in runs):
        return "PENDING"
    return "SUCCESS"


# -- one request ----------------------------------------------------------------------------


@dataclass
class Outcome:
    """A GraphQL answer and its accounting."""

    payload: JSON
    cost: int
    operation: str | None


def run_query(
    world: World,
    body: Any,
    *,
    login: str,
    charge: Callable[[int], JSON],
    permissions: Mapping[str, str] | None = None,
    reach: frozenset[str] | None = None,
) -> Outcome:
    """Validate, refuse mutations, charge, execute; `charge(points)` returns rateLimit fields."""
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        return Outcome(
            {"errors": [{"message": "A query attribute must be specified and must be a string."}]},
            1,
            None,
        )
    variables = body.get("variables") or {}
    prepared = prepare(body["query"])
    if isinstance(prepared, tuple):
        charge(1)
        return Outcome({"errors": list(prepared)}, 1, None)
    operation = operation_of(prepared, body.get("operationName"))
    if operation is None:
        charge(1)
        return Outcome({"errors": [{"message": "An operation name is required"}]}, 1, None)
    kind = operation.operation.value
    if kind != "query":
        charge(1)
        message = f"The sandbox refuses GraphQL {kind}s: nothing was executed."
        return Outcome(
            {"data": None, "errors": [{"type": "FORBIDDEN", "message": message}]}, 1, kind
        )
    cost = query_cost(prepared, operation, variables)
    if cost.errors:
        charge(1)
        return Outcome({"errors": cost.errors}, 1, kind)
    if cost.nodes > MAX_NODES:
        charge(1)
        message = (
            f"This query requests up to {cost.nodes:,} possible nodes "
            f"which exceeds the maximum limit of {MAX_NODES:,}."
        )
        return Outcome(
            {"errors": [{"type": "MAX_NODE_LIMIT_EXCEEDED", "message": message}]}, 1, kind
        )
    variables, problems = coerce_variables(operation, variables)
    if problems:
        charge(1)
        return Outcome({"errors": problems}, 1, kind)
    rate = charge(cost.points)
    rate = {**rate, "cost": cost.points, "nodeCount": cost.nodes, "__typename": "RateLimit"}
    ctx = Context(world=world, login=login, rate=rate, permissions=permissions, reach=reach)
    with world.lock:
        for hook in list(world.graphql_hooks):
            hook(world, operation.name.value if operation.name else None)
        root = Objects(ctx).root()
        if "__schema" in body["query"] or "__type(" in body["query"]:
            payload = _execute_core(prepared, root, ctx, variables, body.get("operationName"))
        else:
            payload = Executor(prepared, variables, ctx).run(operation, root)
    return Outcome(payload, cost.points, kind)


def reset_at(epoch: float) -> str:
    """An epoch as GraphQL DateTime."""
    return iso(datetime.fromtimestamp(epoch, UTC)) or ""


def _execute_core(
    document: DocumentNode, root: JSON, ctx: Context, variables: dict[str, Any], name: str | None
) -> JSON:
    """graphql-core's own executor (slow; used for introspection queries)."""
    result = execute(
        schema(),
        document,
        root_value=root,
        context_value=ctx,
        variable_values=variables,
        operation_name=name,
    )
    if not isinstance(result, ExecutionResult):
        raise TypeError("asynchronous execution is not supported")
    payload: JSON = {"data": result.data}
    errors = ctx.errors + [_format(e) for e in (result.errors or [])]
    if errors:
        payload["errors"] = errors
    return payload


def coerce_variables(
    operation: OperationDefinitionNode, raw: Any
) -> tuple[dict[str, Any], list[JSON]]:
    """Variables coerced to their declared types (defaults applied), or error entries."""
    sch = schema()
    given = raw if isinstance(raw, dict) else {}
    values: dict[str, Any] = {}
    errors: list[JSON] = []
    for definition in operation.variable_definitions or ():
        name = definition.variable.name.value
        var_type = type_from_ast(sch, definition.type)
        if var_type is None or not is_input_type(var_type):
            continue
        if name in given:
            try:
                value = coerce_input_value(given[name], var_type)
            except GraphQLError as exc:
                value, message = Undefined, exc.message
            else:
                message = "invalid value"
            if value is Undefined:
                errors.append(
                    {
                        "message": f"Variable ${name} of type {var_type} "
                        f"was provided invalid value ({message})"
                    }
                )
                continue
            values[name] = value
        elif definition.default_value is not None:
            values[name] = value_from_ast(definition.default_value, var_type)
        elif isinstance(var_type, GraphQLNonNull):
            errors.append(
                {"message": f"Variable ${name} of required type {var_type} was not provided."}
            )
    return values, errors


_PLAIN = (str, int, bool, float)


@dataclass
class Info:
    """The little a resolver here may ask about where it runs."""

    field_nodes: list[FieldNode]
    path: tuple[str | int, ...]

    @property
    def field_name(self) -> str:
        """The field being resolved."""
        return self.field_nodes[0].name.value

    def path_list(self) -> list[str | int]:
        """The response path."""
        return list(self.path)


class Executor:
    """A small, fast executor for validated queries over dict sources (callables get args)."""

    def __init__(self, document: DocumentNode, variables: dict[str, Any], ctx: Context) -> None:
        """Bind one request."""
        self.schema = schema()
        self.variables = variables
        self.ctx = ctx
        self.fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        self._collected: dict[tuple[str, tuple[int, ...]], list[tuple[str, list[FieldNode]]]] = {}
        self._args: dict[int, dict[str, Any]] = {}
        self.errors: list[JSON] = []

    def run(self, operation: OperationDefinitionNode, root: JSON) -> JSON:
        """Execute the operation; the response payload."""
        query_type = self.schema.query_type
        assert query_type is not None
        data = self._object(query_type, root, (operation.selection_set,), ())
        payload: JSON = {"data": data}
        errors = self.ctx.errors + self.errors
        if errors:
            payload["errors"] = errors
        return payload

    def _object(
        self,
        runtime: GraphQLObjectType,
        source: JSON,
        sets: tuple[SelectionSetNode, ...],
        path: tuple[str | int, ...],
    ) -> JSON:
        out: JSON = {}
        for key, nodes in self._collect(runtime, sets):
            name = nodes[0].name.value
            if name == "__typename":
                out[key] = runtime.name
                continue
            field_def = runtime.fields[name]
            value = source.get(name)
            if callable(value):
                value = value(Info(nodes, (*path, key)), **self._arguments(field_def, nodes[0]))
            if value is None:
                if isinstance(field_def.type, GraphQLNonNull):
                    self.errors.append(
                        {
                            "message": "Cannot return null for non-nullable field "
                            f"{runtime.name}.{name}.",
                            "path": [*path, key],
                        }
                    )
                out[key] = None
            elif isinstance(value, _PLAIN):
                out[key] = value
            else:
                out[key] = self._complete(field_def.type, value, nodes, (*path, key))
        return out

    def _complete(
        self, type_: Any, value: Any, nodes: list[FieldNode], path: tuple[str | int, ...]
    ) -> Any:
        if value is None:
            return None
        while isinstance(type_, GraphQLNonNull):
            type_ = type_.of_type
        if isinstance(type_, GraphQLList):
            item_type = type_.of_type
            return [self._complete(item_type, v, nodes, (*path, i)) for i, v in enumerate(value)]
        if is_leaf_type(type_):
            return value
        if isinstance(type_, GraphQLObjectType):
            runtime = type_
        else:
            found = self.schema.get_type(value.get("__typename", ""))
            if not isinstance(found, GraphQLObjectType):
                raise TypeError(f"no __typename for a value of abstract type {type_}")
            runtime = found
        sets = tuple(n.selection_set for n in nodes if n.selection_set is not None)
        return self._object(runtime, value, sets, path)

    def _collect(
        self, runtime: GraphQLObjectType, sets: tuple[SelectionSetNode, ...]
    ) -> list[tuple[str, list[FieldNode]]]:
        key = (runtime.name, tuple(id(s) for s in sets))
        cached = self._collected.get(key)
        if cached is not None:
            return cached
        groups: dict[str, list[FieldNode]] = {}
        visited: set[str] = set()

        def visit(selection_set: SelectionSetNode) -> None:
            for sel in selection_set.selections:
                if not self._included(sel):
                    continue
                if isinstance(sel, FieldNode):
                    groups.setdefault((sel.alias or sel.name).value, []).append(sel)
                elif isinstance(sel, InlineFragmentNode):
                    if sel.type_condition is None or self._applies(
                        sel.type_condition.name.value, runtime
                    ):
                        visit(sel.selection_set)
                elif isinstance(sel, FragmentSpreadNode):
                    frag = self.fragments.get(sel.name.value)
                    if frag is None or sel.name.value in visited:
                        continue
                    visited.add(sel.name.value)
                    if self._applies(frag.type_condition.name.value, runtime):
                        visit(frag.selection_set)

        for selection_set in sets:
            visit(selection_set)
        result = list(groups.items())
        self._collected[key] = result
        return result

    def _applies(self, condition: str, runtime: GraphQLObjectType) -> bool:
        if condition == runtime.name:
            return True
        target = self.schema.get_type(condition)
        return isinstance(
            target, GraphQLInterfaceType | GraphQLUnionType
        ) and self.schema.is_sub_type(target, runtime)

    def _included(self, node: Any) -> bool:
        for directive in node.directives or ():
            name = directive.name.value
            if name not in ("skip", "include"):
                continue
            flag = next(
                (
                    value_from_ast_untyped(a.value, self.variables)
                    for a in directive.arguments or ()
                    if a.name.value == "if"
                ),
                False,
            )
            if (name == "skip" and flag) or (name == "include" and not flag):
                return False
        return True

    def _arguments(self, field_def: Any, node: FieldNode) -> dict[str, Any]:
        cached = self._args.get(id(node))
        if cached is not None:
            return cached
        args: dict[str, Any] = {}
        for arg in node.arguments or ():
            name = arg.name.value
            definition = field_def.args.get(name)
            if definition is None:
                continue
            if isinstance(arg.value, VariableNode):
                if arg.value.name.value in self.variables:
                    args[name] = self.variables[arg.value.name.value]
            else:
                args[name] = value_from_ast(arg.value, definition.type, self.variables)
        self._args[id(node)] = args
        return args
