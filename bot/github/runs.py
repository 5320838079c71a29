"""Check runs beyond the rollup: the failure-level annotations of failing runs, and every
attempt GitHub keeps of a check (a failure's history)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from bot.core.annotations import GENERIC, QUOTED
from bot.core.model import Annotation, Signal
from bot.github.answer import alias_of, error_path, field, in_attempt
from bot.github.parse import Unreadable, parse_annotation_page, parse_context
from bot.github.query import ANNOTATIONS_QUERY, attempts_query, more_annotations_query
from bot.github.transport import Transport

log = logging.getLogger(__name__)

ATTEMPTS_PER_QUERY = 50  # checks whose attempts one CheckAttempts query reads (~3 points)
MORE_ANNOTATION_PAGES = 4  # further pages of annotations of one run, PAGE each, at most
MORE_ANNOTATION_RUNS = 50  # check runs per MoreAnnotations query

Found = dict[str, tuple[Annotation, ...]]  # each run's annotations so far, by node id
More = dict[str, str]  # each run still paged on -> the cursor of its next page


def _in_nodes(error: dict[str, Any]) -> bool:
    """An error on one node of a `nodes(ids:)` query (that node only)."""
    path = error_path(error)
    return len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int)


def _in_run_alias(error: dict[str, Any]) -> bool:
    """An error inside one aliased check run of a MoreAnnotations query: r<k>...."""
    path = error_path(error)
    return len(path) >= 1 and str(path[0]).startswith("r")


def _annotation_page(node_id: str, node: Any, found: Found, more: More) -> None:
    """Add one page of a run's annotations to `found`; its next page to `more` when the run
    still has fewer than QUOTED specific failures."""
    try:
        page, cursor = parse_annotation_page(node)
    except Unreadable as exc:
        log.warning("the annotations of check run %s are unreadable: %s", node_id, exc)
        found.pop(node_id, None)
        return
    found[node_id] = annotations = found.get(node_id, ()) + page
    specific = [a for a in annotations if not GENERIC.fullmatch(a.message.strip())]
    if cursor is not None and len(specific) < QUOTED:
        more[node_id] = cursor


def _suite_runs(suite: Any) -> list[Signal] | None:
    """The runs of one check suite, as signals; None where not all were read."""
    connection = suite.get("checkRuns") if isinstance(suite, dict) else None
    if not isinstance(connection, dict):
        return None
    items = connection.get("nodes")
    if not isinstance(items, list) or connection.get("totalCount") != len(items):
        return None
    shell = {"app": suite.get("app"), "workflowRun": suite.get("workflowRun")}
    try:
        return [
            parse_context({**item, "__typename": "CheckRun", "checkSuite": shell})
            for item in items
            if isinstance(item, dict)
        ]
    except Unreadable:
        return None


def _attempt_runs(node: Any) -> list[Signal] | None:
    """The runs of one aliased check's suites, as signals; None where not all were read."""
    if not isinstance(node, dict):
        return None
    suites = node.get("checkSuites")
    if not isinstance(suites, dict):
        return None
    nodes = suites.get("nodes")
    if not isinstance(nodes, list) or suites.get("totalCount") != len(nodes):
        return None
    runs: list[Signal] = []
    for suite in nodes:
        read = _suite_runs(suite)
        if read is None:
            return None
        runs.extend(read)
    return runs


class Runs:
    """The check-run reads, over `transport`."""

    def __init__(self, transport: Transport) -> None:
        """Over `transport`."""
        self._transport = transport

    def check_run_annotations(self, node_ids: Sequence[str]) -> Found:
        """Each check run's failure-level annotations, by node id, PAGE runs per GraphQL query;
        a run GitHub did not answer for is left out (GitHubError when a whole query fails).

        GitHub cannot filter annotations by level: a run whose pages so far hold fewer than
        QUOTED specific failures and that has more is paged on, all such runs together, at
        most MORE_ANNOTATION_PAGES further pages each (what was read by then is its answer)."""
        found: Found = {}
        more: More = {}
        wanted = list(dict.fromkeys(node_ids))
        answers = self._transport.by_ids(ANNOTATIONS_QUERY, wanted, tolerate=_in_nodes)
        for chunk, nodes, errors in answers:
            broken = {error_path(e)[1] for e in errors}
            for index, (node_id, node) in enumerate(zip(chunk, nodes, strict=True)):
                if node is None or index in broken:
                    continue
                _annotation_page(node_id, node, found, more)
        for _ in range(MORE_ANNOTATION_PAGES):
            if not more:
                break
            asked: list[tuple[str, str]] = list(more.items())
            more = {}
            for start in range(0, len(asked), MORE_ANNOTATION_RUNS):
                self._more_annotations(asked[start : start + MORE_ANNOTATION_RUNS], found, more)
        return found

    def _more_annotations(self, batch: list[tuple[str, str]], found: Found, more: More) -> None:
        """The next page of annotations of each run of `batch` (node id, cursor), in one query;
        a run not answered this time is left out of `found`."""
        variables: dict[str, Any] = {}
        for k, (node_id, cursor) in enumerate(batch):
            variables |= {f"i{k}": node_id, f"a{k}": cursor}
        data, errors = self._transport.query(
            more_annotations_query(len(batch)), variables, tolerate=_in_run_alias
        )
        broken = {str(error_path(e)[0]) for e in errors}
        for k, (node_id, _cursor) in enumerate(batch):
            listed = field(data, f"r{k}")
            node = listed[0] if isinstance(listed, list) and len(listed) == 1 else None
            if node is None or f"r{k}" in broken:  # that run is not read this time
                found.pop(node_id, None)
                continue
            _annotation_page(node_id, node, found, more)

    def check_attempts(
        self, repo: str, asks: Sequence[tuple[str, str, int | None]]
    ) -> dict[int, list[Signal]]:
        """Every run GitHub keeps (every attempt) of each asked check, (head, name, app id), on
        its head, by the ask's index, ATTEMPTS_PER_QUERY checks per GraphQL query. An ask whose
        answer cannot all be read (an error on it, more suites or runs than one page) is left
        out: its attempts are not known, never guessed."""
        owner, name = repo.split("/", 1)
        found: dict[int, list[Signal]] = {}
        for start in range(0, len(asks), ATTEMPTS_PER_QUERY):
            chunk = asks[start : start + ATTEMPTS_PER_QUERY]
            variables: dict[str, Any] = {"owner": owner, "name": name}
            for k, (head, check, app_id) in enumerate(chunk):
                variables |= {f"o{k}": head, f"n{k}": check, f"p{k}": app_id}
            data, errors = self._transport.query(
                attempts_query(len(chunk)), variables, tolerate=in_attempt
            )
            broken = {alias_of(e) for e in errors}
            for k in range(len(chunk)):
                node = None if f"a{k}" in broken else field(data, "repository", f"a{k}")
                runs = _attempt_runs(node)
                if runs is not None:
                    found[start + k] = runs
        return found
