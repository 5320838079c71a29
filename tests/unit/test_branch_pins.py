"""Branch protection's app pins (issue 24 item 5): the REST branch answer, read access."""

from __future__ import annotations

import json


def test_branch_protections_app_pins_are_read_from_a_recorded_branch_answer() -> None:
    """Issue 24 item 5: REST's branch answer (read access) carries checks[].app_id."""
    from pathlib import Path

    from bot.github.parse import parse_pins

    path = Path(__file__).resolve().parent.parent / "data" / "real" / "llama-index"
    pins = parse_pins(json.loads((path / "branch_main.json").read_text()))
    assert pins["CodeQL"] == 57789
    assert pins["test (3.10)"] == 15368 and len(pins) == 7
    assert parse_pins({"protected": False}) == {}
    assert parse_pins(
        {
            "protection": {
                "required_status_checks": {
                    "checks": [{"context": "x", "app_id": None}, {"context": "y", "app_id": -1}]
                }
            }
        }
    ) == {"x": None, "y": None}
