"""The service's metrics are declared as data (`SPECS`): each spec is the attribute the class
declares, of the kind it declares, and /metrics lists every one under its prefixed name."""

from __future__ import annotations

import typing
from pathlib import Path

from bot.service.metrics import PREFIX, SPECS, Metrics


def test_each_spec_makes_the_attribute_the_class_declares_of_its_declared_kind() -> None:
    declared = typing.get_type_hints(Metrics)
    metrics = Metrics()
    assert [spec.attr for spec in SPECS] == list(declared)
    for spec in SPECS:
        assert declared[spec.attr] is spec.kind, spec.attr
        assert isinstance(getattr(metrics, spec.attr), spec.kind), spec.attr


def test_the_exposition_lists_every_spec_with_its_help_and_kind() -> None:
    text = Metrics().exposition().decode()
    for spec in SPECS:
        name, kind = PREFIX + spec.name, spec.kind.__name__.lower()
        assert f"# HELP {name} {spec.doc}\n# TYPE {name} {kind}\n" in text


def test_the_endpoints_page_names_every_metric_with_its_labels() -> None:
    page = Path(__file__).parents[3] / "docs" / "operating" / "endpoints.md"
    rows = [line for line in page.read_text(encoding="utf-8").splitlines() if "| `" in line]
    for spec in SPECS:
        row = next((r for r in rows if f"`{PREFIX}{spec.name}`" in r), None)
        assert row is not None, f"{PREFIX}{spec.name} is not in {page.name}'s metrics table"
        for label in spec.labels:
            assert f"`{label}`" in row, (spec.name, label)
