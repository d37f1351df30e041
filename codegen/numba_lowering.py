"""A linear-time replacement for one quadratic step of numba's lowering,
installed in the processes that compile kernels (`codegen/build_worker.py`).

Before lowering a function, numba-cuda's `Lower._find_singly_assigned_variable`
finds the variables assigned once and used only in their own basic block
(they get no stack slot). For each such variable it scans every assignment
of that block again, so a block of N assignments costs N * N: fusec's
kernels are long straight-line blocks (an unrolled attention tile, a row
kernel's register passes), and GPT-2's f32 attention kernel spent about a
fifth of its build there (4.5 -> 3.7 s on 2 cores, the same PTX).

`install()` replaces the method with one that counts each block's
assignments once. It does so only where numba-cuda's method is the one this
was written against (its source's digest, `ORIGINAL_SHA256`): another
version keeps its own method, untouched.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from fusec.codegen.numba_patch import replace_known

ORIGINAL_SHA256 = "c3b499f765172885"
"""The first 16 hex digits of the sha256 of numba-cuda 0.30.4's
`Lower._find_singly_assigned_variable` source."""

_installed = False


def _find_singly_assigned_variable(self: Any) -> None:
    """numba-cuda's method, with each block's assignments counted once
    (`counts`) instead of scanned once per variable."""
    from numba.cuda import lowering

    blocks = self.func_ir.blocks
    sav: set[str] = set()
    if not self.func_ir.func_id.is_generator:
        use_defs = lowering.compute_use_defs(blocks)
        alloca_vars = lowering.must_use_alloca(blocks)
        var_assign_map: defaultdict[str, set[int]] = defaultdict(set)
        for blk, vl in use_defs.defmap.items():
            for var in vl:
                var_assign_map[var].add(blk)
        var_use_map: defaultdict[str, set[int]] = defaultdict(set)
        for blk, vl in use_defs.usemap.items():
            for var in vl:
                var_use_map[var].add(blk)
        counts: dict[int, Counter[str]] = {}
        for var in var_assign_map:
            if var not in alloca_vars and len(var_assign_map[var]) == 1 and \
                    len(var_use_map[var]) == 0:
                [defblk] = var_assign_map[var]
                if defblk not in counts:
                    counts[defblk] = Counter(
                        stmt.target.name
                        for stmt in self.blocks[defblk].find_insts(lowering.ir.assign_types))
                if counts[defblk][var] == 1:
                    sav.add(var)
    self._singly_assigned_vars = sav
    self._blk_local_varmap = {}


def install() -> bool:
    """Replace the method where it is the known one; whether the linear one
    is in place now."""
    global _installed
    if not _installed:
        from numba.cuda import lowering

        _installed = replace_known(lowering.Lower, "_find_singly_assigned_variable",
                                   ORIGINAL_SHA256, lambda _: _find_singly_assigned_variable)
    return _installed
