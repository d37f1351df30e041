"""`codegen/numba_patch.py`: the build workers' numba patches replace a
method only where its source is the one they were written against, and
each patch's digest is that of the pinned numba-cuda's method."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from numba.cuda import lowering
from numba.cuda.typing import context

from fusec.codegen import numba_lowering, numba_patch, numba_typing

PATCHES = [
    (numba_lowering, lowering.Lower, "_find_singly_assigned_variable"),
    (numba_typing, context.BaseContext, "resolve_function_type"),
]


@pytest.mark.parametrize(("patch", "owner", "name"), PATCHES,
                         ids=[p[0].__name__.rsplit(".", 1)[1] for p in PATCHES])
def test_a_patch_is_installed_only_over_the_known_method(
        monkeypatch: pytest.MonkeyPatch, patch: ModuleType, owner: Any, name: str) -> None:
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name, original)  # restored after the test
    monkeypatch.setattr(patch, "_installed", False)
    # the pinned numba-cuda's method (unless installed by an earlier test in this process)
    unpatched = getattr(original, "__wrapped__", original)
    if unpatched is not numba_lowering._find_singly_assigned_variable:
        assert numba_patch.source_digest(unpatched) == patch.ORIGINAL_SHA256
    monkeypatch.setattr(patch, "ORIGINAL_SHA256", "0" * 16)
    assert patch.install() is False
    assert getattr(owner, name) is original


def test_replace_known_replaces_a_matching_method_and_nothing_else() -> None:
    class Owner:
        def method(self) -> int:
            return 1

    digest = numba_patch.source_digest(Owner.method)
    assert numba_patch.replace_known(Owner, "method", "f" * 16,
                                     lambda old: lambda self: 2) is False
    assert Owner().method() == 1
    assert numba_patch.replace_known(Owner, "method", digest,
                                     lambda old: lambda self: old(self) + 1) is True
    assert Owner().method() == 2
    assert numba_patch.replace_known(Owner, "missing", digest, lambda old: old) is False
