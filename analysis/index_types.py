"""The integer type kernels compute indices in: unsigned, 32-bit where every
flat index fits (a division by a constant is then one `mul.hi.u32`), 64-bit
beyond. Pointwise, reduction and tiled kernels share the rule, and so do
the planners that size their registers.
"""

from __future__ import annotations

INDEX32_LIMIT = 2**31
"""Flat indices below this are computed in uint32 (one 32-bit multiply per
constant division); larger iteration spaces use uint64."""


def index_type(numel: int) -> str:
    """The numba type a kernel over `numel` elements computes indices in."""
    return "uint32" if numel < INDEX32_LIMIT else "uint64"
