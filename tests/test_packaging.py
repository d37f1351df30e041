"""What a non-editable install ships: every package of the source tree is in
pyproject.toml's `packages` list (a missing one installs without its modules:
`pip install .` once left out `fusec.scheduling.kinds`, and every compile
failed importing the built-in group kinds)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders of the checkout that are not part of the installed package.
NOT_SHIPPED = {"tests", "bench", "docs", "examples", ".venv", ".git", ".gpu", "build"}


def _source_packages() -> set[str]:
    found = set()
    for init in ROOT.rglob("__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if parts and (parts[0] in NOT_SHIPPED or parts[0].startswith(".")):
            continue
        found.add(".".join(("fusec", *parts)))
    return found


def test_every_source_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert _source_packages() - listed == set()
    assert listed - _source_packages() == set()
