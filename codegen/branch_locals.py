"""Names of their own for the locals of a kernel's second version.

A kernel that tests its arrays' alignment once runs one of two versions of
the same passes (`if is_aligned(...): <wide> else: <scalar>`), and both
assign the same local names. numba then sees each such name defined twice
and rewrites every one into SSA form by scanning the kernel's blocks once
per name (`numba.cuda.core.ssa._fix_ssa_vars`): a layer norm over a
768-wide gathered row (GPT-2's embedding, 369 names, 738 blocks) spent 32
of its 60 profiled seconds there. With the second version's names renamed
(`_u` appended), each is defined once and numba skips the rewrite.

Only names the first version also assigns are renamed, and callers use it
where no line after the two versions reads them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:[-+*/]?=)(?!=)")
_FOR = re.compile(r"^\s*for\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\b")
SUFFIX = "_u"


def assigned_names(lines: Sequence[str]) -> set[str]:
    """The local names `lines` assign (plain, augmented and tuple
    assignments, loop targets)."""
    names: set[str] = set()
    for line in lines:
        m = _ASSIGN.match(line) or _FOR.match(line)
        if m:
            names.update(n.strip() for n in m.group(1).split(","))
    return names


def distinct_locals(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """`second` with every local it assigns that `first` assigns too renamed
    (never an attribute: `cuda.threadIdx.x` keeps its `x`)."""
    shared = assigned_names(first) & assigned_names(second)
    if not shared:
        return list(second)
    pattern = re.compile(r"(?<![.\w])(" + "|".join(sorted(shared, key=len, reverse=True))
                         + r")\b")
    return [pattern.sub(lambda m: m.group(1) + SUFFIX, line) for line in second]
