"""The torch extra is pinned to the releases the tests run with (2.11 on the
GPU machine, 2.13 on CPU), docs/pytorch.md names the same range, and CI
installs the extra and runs the tests that need it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TESTED = ["2.11.0", "2.12.1", "2.13.0", "2.13.0+cpu"]
UNTESTED = ["2.4.0", "2.10.0", "2.14.0", "2.14.1", "2.15.0"]


def _torch_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (torch,) = [r for r in map(Requirement, project["optional-dependencies"]["torch"])
                if r.name == "torch"]
    return torch


def test_the_extra_admits_the_tested_releases_only() -> None:
    spec = _torch_requirement().specifier
    assert [v for v in TESTED if not spec.contains(Version(v))] == []
    assert [v for v in UNTESTED if spec.contains(Version(v))] == []


def test_docs_name_the_pinned_range() -> None:
    doc = (ROOT / "docs" / "pytorch.md").read_text()
    spec = _torch_requirement().specifier
    ranges = re.findall(r"`torch(>=[^`]+)`", doc)
    assert ranges
    assert {str(spec)} == {str(Requirement("torch" + r).specifier) for r in ranges}


def test_ci_installs_the_extra_and_runs_the_torch_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[torch]"' in ci
    assert "importorskip(\"torch\")" in ci


def test_an_installed_torch_is_in_the_range() -> None:
    pytest.importorskip("torch")
    installed = Version(importlib.metadata.version("torch"))
    assert _torch_requirement().specifier.contains(installed), installed
