"""A memo of numba's call typing, installed in the processes that compile
kernels (`codegen/build_worker.py`), beside `codegen/numba_lowering.py`.

numba types every call site of a kernel on its own: each `a * b`, each
`float32(x)`, each intrinsic call goes through
`BaseContext.resolve_function_type`, which tries the function's typing
templates in turn (for an arithmetic operator, NumPy's ufunc loops one by
one) at about a millisecond a site. fusec's kernels are long unrolled
blocks of the same few operations on the same few types: GPT-2's f32
attention kernel has about 2,500 call sites and 181 distinct (function,
argument types) pairs among them. The answer is a function of that pair
(the typing context and its templates do not change while a process
compiles), so `install()` keeps the signature of each pair that typed and
answers its repeats from the memo. numba's compile of that kernel took
2.4-3.2 s with it against 2.9-3.9 s without (three alternating runs each
on two busy cores, 2026-12-07), a bf16 attention and a convolution block
5-30% less; the PTX is the same (tests/test_numba_typing.py compares it for
fusec's example kernels, in processes of their own: a second compile in
one process numbers numba's symbols differently).

Not memoised: calls with keyword arguments or unhashable types, and calls
that did not type (an error, or None: numba tries other resolutions
then, and their cost is paid each time as before). Like the lowering
replacement, it is installed only over the method it was written against
(`ORIGINAL_SHA256`); another numba-cuda keeps its own, untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fusec.codegen.numba_patch import replace_known

ORIGINAL_SHA256 = "9244e2e6ce2d86eb"
"""The first 16 hex digits of the sha256 of numba-cuda 0.30.4's
`BaseContext.resolve_function_type` source."""

_installed = False
_MEMO_ATTR = "_fusec_call_types"
MEMO_LIMIT = 50_000
"""Entries kept before the memo starts again: each unit a worker compiles
defines its own helpers (new function types), so a long-lived worker (an
autotuning sweep) would otherwise keep every kernel's pairs."""


def memoised(resolve: Callable[..., Any]) -> Callable[..., Any]:
    """`resolve` (numba-cuda's method) answering repeated (function,
    positional argument types) pairs from a memo on the typing context."""

    def resolve_function_type(self: Any, func: Any, args: Any, kws: Any) -> Any:
        if kws:
            return resolve(self, func, args, kws)
        key = (func, tuple(args))
        try:
            hash(key)
        except TypeError:
            return resolve(self, func, args, kws)
        memo = self.__dict__.setdefault(_MEMO_ATTR, {})
        known = memo.get(key)
        if known is not None:
            return known
        signature = resolve(self, func, args, kws)
        if signature is not None:
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            memo[key] = signature
        return signature

    resolve_function_type.__wrapped__ = resolve  # type: ignore[attr-defined]
    return resolve_function_type


def install() -> bool:
    """Wrap the method where it is the known one; whether the memo is in
    place now."""
    global _installed
    if not _installed:
        from numba.cuda.typing import context

        _installed = replace_known(context.BaseContext, "resolve_function_type",
                                   ORIGINAL_SHA256, memoised)
    return _installed
