"""Replacing one of numba-cuda's methods only where it is the method the
replacement was written against: the shared step of the build workers'
patches (`codegen/numba_lowering.py`, `codegen/numba_typing.py`).

A patch names the class, the method and the first 16 hex digits of the
sha256 of the method's source in the pinned numba-cuda; another version
(another digest, or no such method) keeps its own, untouched.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Callable
from typing import Any


def source_digest(method: Callable[..., Any]) -> str:
    """The first 16 hex digits of the sha256 of `method`'s source."""
    return hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]


def replace_known(module: str, cls: str, name: str, digest: str,
                  replacement: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Set `module.cls.name` to `replacement(original)` where the original's
    source has `digest` (`source_digest`); whether it was replaced."""
    try:
        owner = getattr(importlib.import_module(module), cls)
        method = getattr(owner, name)
        known = source_digest(method) == digest
    except (ImportError, AttributeError, OSError, TypeError):
        return False
    if not known:
        return False
    setattr(owner, name, replacement(method))
    return True
