"""The pure part of issue 16 item 2: which annotations a failing check run's row quotes."""

from __future__ import annotations

import pytest
from support import NOW, run, snapshot

from bot.core.annotations import (
    annotations_of_payload,
    annotations_payload,
    pick,
    with_annotations,
)
from bot.core.model import Annotation, Policy
from bot.core.reconcile import reconcile
from bot.github.parse import Unreadable, parse_annotations, parse_context
from bot.render.comment import annotation_lines

EXIT = Annotation(".github", 278, 278, "Process completed with exit code 1.")
A, B, C, D = (Annotation(f"t/test_{n}.py", n, n, f"assert {n}") for n in range(1, 5))


@pytest.mark.parametrize(
    ("given", "quoted"),
    [
        ((EXIT, A), (A,)),  # the generic one adds nothing next to a specific one
        ((A, EXIT, B), (A, B)),
        ((EXIT,), (EXIT,)),  # all there is: quoted
        ((EXIT, EXIT._replace(message="Process completed with exit code 137.")), None),
        ((A, B, C, D), (A, B, C)),  # the first three
        ((), ()),
        ((A._replace(message="Process completed with exit code 1. Then more."),), None),
    ],
)
def test_pick(given: tuple[Annotation, ...], quoted: tuple[Annotation, ...] | None) -> None:
    assert pick(given) == (given if quoted is None else quoted)


def test_only_failing_check_runs_get_annotations_by_run_id() -> None:
    signals = (
        run("tests", "failure", database_id=1, node_id="CR_1"),
        run("lint", "success", database_id=2, node_id="CR_2"),
        run("old", "failure", database_id=3),  # no node id: cannot be asked
    )
    report = reconcile(snapshot(*signals), {}, Policy(), now=NOW)
    found = {1: (EXIT, A), 2: (B,), 3: (C,)}
    rows = {row.signal.name: row for row in with_annotations(report, found).rows}
    assert rows["tests"].annotations == (A,)
    assert rows["lint"].annotations is None and rows["old"].annotations is None
    unread = {row.signal.name: row for row in with_annotations(report, {}).rows}
    assert unread["tests"].annotations is None  # not read: nothing quoted, nothing claimed


def test_the_kept_payload_round_trips_and_a_malformed_one_raises() -> None:
    kept = (A, Annotation("x", None, None, "é @a"))
    assert annotations_of_payload(annotations_payload(kept)) == kept
    for bad in ('{"a": 1}', '[["p", "1", 1, "m"]]', "[[1, 2]]"):
        with pytest.raises((ValueError, TypeError)):
            annotations_of_payload(bad)


def test_a_check_run_node_gives_its_failure_level_annotations_only() -> None:
    def item(level: str, line: int | None) -> dict[str, object]:
        location = None if line is None else {"start": {"line": line}, "end": {"line": line + 1}}
        return {"annotationLevel": level, "path": "a.py", "location": location, "message": "m"}

    node = {
        "__typename": "CheckRun",
        "annotations": {"nodes": [item("WARNING", 1), item("FAILURE", 2), item("FAILURE", None)]},
    }
    assert parse_annotations(node) == (
        Annotation("a.py", 2, 3, "m"),
        Annotation("a.py", None, None, "m"),
    )
    assert parse_annotations({"__typename": "CheckRun", "annotations": None}) == ()
    with pytest.raises(Unreadable):
        parse_annotations({"__typename": "IssueComment"})


@pytest.mark.parametrize(
    ("annotation", "line"),
    [
        (Annotation("a.py", 3, 3, "boom\nmore"), "`a.py:3`: `boom`"),
        (Annotation("a.py", 3, 5, "\n\n  boom  \n"), "`a.py:3-5`: `boom`"),
        (Annotation("a.py", None, None, "boom"), "`a.py`: `boom`"),
        (Annotation("a.py", 3, None, "   "), "`a.py:3`"),
        (Annotation("x`y.py", 1, 1, "a `b` c"), "``x`y.py:1``: ``a `b` c``"),
    ],
)
def test_an_annotation_line_is_its_place_and_first_line_verbatim(
    annotation: Annotation, line: str
) -> None:
    report = reconcile(
        snapshot(run("tests", "failure", database_id=1, node_id="CR_1")), {}, Policy(), now=NOW
    )
    row = with_annotations(report, {1: (annotation,)}).rows[0]
    assert annotation_lines(row) == (line,)


@pytest.mark.parametrize(("conclusion", "kept"), [("FAILURE", True), ("TIMED_OUT", True),
                                                  ("SUCCESS", False), (None, False)])  # fmt: skip
def test_only_a_failing_runs_node_id_is_kept(conclusion: str | None, kept: bool) -> None:
    status = "COMPLETED" if conclusion else "IN_PROGRESS"
    node = {"__typename": "CheckRun", "id": "CR_x", "name": "t", "databaseId": 7,
            "status": status, "conclusion": conclusion}  # fmt: skip
    assert parse_context(node).node_id == ("CR_x" if kept else None)
