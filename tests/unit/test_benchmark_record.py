"""benchmarks/record.py: a benchmark's output becomes one dated entry of benchmarks/RESULTS.md."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def record() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_record", ROOT / "benchmarks/record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_an_entry_is_dated_names_the_command_and_keeps_the_output_verbatim() -> None:
    rec = record()
    at = datetime(2026, 12, 1, 9, 5, tzinfo=UTC)
    text = rec.entry("cycle.py --prs 50", "warm: 40 requests\n```odd```\n", at)
    assert text.startswith("### 2026-12-01 09:05 UTC · `cycle.py --prs 50` · code at ")
    assert "warm: 40 requests\n```odd```" in text
    assert "\n````text\n" in text  # a fence longer than any run of backticks inside


def test_the_newest_entry_goes_first_under_its_section() -> None:
    rec = record()
    heading = rec.SECTIONS["report"]
    results = f"# Benchmark results\n\n{heading}\n\n### old entry\n"
    updated = rec.insert(results, heading, "### new entry\n\n")
    assert updated.index("### new entry") < updated.index("### old entry")
    assert rec.insert("# Benchmark results\n", heading, "### first\n").endswith(
        f"{heading}\n\n### first\n"
    )


def test_every_section_exists_in_the_results_file() -> None:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert all(heading in text for heading in record().SECTIONS.values())
