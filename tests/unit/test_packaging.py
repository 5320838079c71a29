"""Every package of the bot is in the wheel: pyproject.toml lists packages by hand, and a
package missing there imports in the checkout (the tests) but not in an installed copy
(the Docker image's demo failed with "No module named 'bot.cycle'")."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_with_an_init_is_listed_in_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("bot", "bot_sandbox")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), "packages missing from [tool.setuptools] packages"
