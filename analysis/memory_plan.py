"""The memory plan: which device buffer holds each intermediate value.

Computed at compile time from a `FunctionProgram` and stored in `plan.json`
(`"memory"` of each function); the runtime allocates exactly these buffers
and never re-derives the plan.

Every value has a *storage class*, found by following `View` aliases (a
reshape costs no kernel, so a view shares its source's storage) to a root:

- `input`: the caller's array; never written by a kernel's scratch use, never reused;
- `constant`: uploaded once per loaded program; never reused;
- `output`: a fresh allocation per call, handed to the caller; never reused;
- `buffer`: an intermediate, placed in one of the plan's reusable buffers.

Buffers are assigned by liveness over the launch order. An intermediate root
is live from the first launch that touches it (or any of its views) to the
last one. It takes a free buffer when its first launch starts, and its
buffer becomes free again only *after* its last launch.

Why this is free of hazards:

- All launches go to one stream, in plan order, so launch i+1 starts only
  after launch i has finished writing and reading.
- Write-after-read: a buffer is handed to a new value only after the last
  launch that reads (or writes) its previous value, so no pending reader can
  see the new contents.
- Write-after-write: the previous value is dead by then (nothing reads it
  later), and the in-order stream orders the two writes.
- Within one launch: a buffer freed by launch i is available only to values
  first touched by a launch j > i, so one kernel never gets the same memory as
  both an input and an output (no aliasing inside a kernel).
- Inputs, outputs and constants are never pooled: the caller owns inputs and
  outputs, and constants must survive across calls.

```python
plan = plan_memory(function_program)
plan.assignment   # {"v3": 0, "v5": 1, "v7": 0}: v7 reuses v3's buffer
plan.buffers      # [4096, 4096]: bytes of each buffer
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusec.analysis.program import FunctionProgram

# Buffers are allocated as byte arrays; rounding their sizes keeps every
# typed view of them aligned for 16-byte vector accesses.
BUFFER_ALIGN_BYTES = 256


@dataclass
class MemoryPlan:
    """Buffers of one function and the intermediate values placed in them."""

    buffers: list[int] = field(default_factory=list[int])  # bytes per buffer id
    assignment: dict[str, int] = field(default_factory=dict[str, int])  # value id -> buffer id
    # the launch range [first, last] in which each pooled value is live
    live: dict[str, tuple[int, int]] = field(default_factory=dict[str, tuple[int, int]])

    def to_json(self) -> dict[str, Any]:
        """The `"memory"` entry of a function in plan.json."""
        return {
            "buffers": [{"id": i, "bytes": b} for i, b in enumerate(self.buffers)],
            "assignment": dict(sorted(self.assignment.items(), key=lambda kv: _vkey(kv[0]))),
            "live": {v: list(r) for v, r in self.live.items()},
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> MemoryPlan:
        """Read back `to_json` (plan.json is checked by the loader first)."""
        buffers = [int(b["bytes"]) for b in data["buffers"]]
        assignment = {str(v): int(b) for v, b in data["assignment"].items()}
        live = {str(v): (int(r[0]), int(r[1])) for v, r in data.get("live", {}).items()}
        return MemoryPlan(buffers, assignment, live)

    @property
    def total_bytes(self) -> int:
        """Device memory the pooled buffers take."""
        return sum(self.buffers)


def _vkey(value: str) -> tuple[int, str]:
    digits = value.lstrip("v")
    return (int(digits), value) if digits.isdigit() else (1 << 30, value)


def view_roots(fp: FunctionProgram) -> dict[str, str]:
    """Each value id mapped to the value whose storage it shares (itself when
    it is no view)."""
    source = {v.value: v.source for v in fp.views}
    roots: dict[str, str] = {}
    for value in [*fp.values, *source]:
        seen: set[str] = set()
        cur = value
        while cur in source:
            if cur in seen:
                raise ValueError(f"views of {value} form a cycle")
            seen.add(cur)
            cur = source[cur]
        roots[value] = cur
    return roots


def storage_classes(fp: FunctionProgram) -> dict[str, str]:
    """The storage class ("input", "constant", "output", "buffer") of each
    root value; inputs win over outputs (a returned argument stays the
    caller's), outputs over buffers."""
    roots = view_roots(fp)
    classes: dict[str, str] = {}
    for value in fp.values:
        classes.setdefault(roots[value], "buffer")
    for value in fp.outputs:
        classes[roots[value]] = "output"
    for value in fp.constants:
        classes[roots[value]] = "constant"
    for value in fp.inputs:
        classes[roots[value]] = "input"
    return classes


def live_ranges(fp: FunctionProgram) -> dict[str, tuple[int, int]]:
    """For each pooled root: (first launch touching it, last launch touching it)."""
    roots = view_roots(fp)
    classes = storage_classes(fp)
    ranges: dict[str, tuple[int, int]] = {}
    for index, launch in enumerate(fp.launches):
        for arg in launch.args:
            root = roots.get(arg.value, arg.value)
            if classes.get(root, "buffer") != "buffer":
                continue
            first, _ = ranges.get(root, (index, index))
            ranges[root] = (first, index)
    return ranges


def plan_memory(fp: FunctionProgram) -> MemoryPlan:
    """Assign every intermediate root a buffer, reusing buffers whose values
    are dead (see the module docstring for why this is safe)."""
    roots = view_roots(fp)
    ranges = live_ranges(fp)
    need = _bytes_per_root(fp, roots, ranges)
    plan = MemoryPlan(live=dict(ranges))
    free: list[int] = []  # buffer ids whose value died in an earlier launch
    dying: dict[int, list[int]] = {}  # launch index -> buffers freed after it
    by_start = sorted(ranges, key=lambda r: (ranges[r][0], _vkey(r)))
    cursor = 0
    for index in range(len(fp.launches)):
        # Buffers whose last use was before this launch become reusable now.
        free.extend(dying.pop(index - 1, []))
        while cursor < len(by_start) and ranges[by_start[cursor]][0] == index:
            root = by_start[cursor]
            cursor += 1
            buf = _take(free, plan.buffers, need[root])
            plan.assignment[root] = buf
            dying.setdefault(ranges[root][1], []).append(buf)
    return plan


def _bytes_per_root(
    fp: FunctionProgram, roots: dict[str, str], ranges: dict[str, tuple[int, int]]
) -> dict[str, int]:
    """Bytes each pooled root needs: the largest of it and its views."""
    need = dict.fromkeys(ranges, 0)
    for value, spec in fp.values.items():
        root = roots.get(value, value)
        if root in need:
            need[root] = max(need[root], spec.nbytes)
    return {r: _round_up(n) for r, n in need.items()}


def _round_up(n: int) -> int:
    return max(BUFFER_ALIGN_BYTES, -(-n // BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES)


def _take(free: list[int], buffers: list[int], size: int) -> int:
    """A buffer of at least `size` bytes: the smallest free one that fits,
    else the largest free one grown to fit, else a new one."""
    fitting = [b for b in free if buffers[b] >= size]
    if fitting:
        chosen = min(fitting, key=lambda b: (buffers[b], b))
    elif free:
        chosen = max(free, key=lambda b: (buffers[b], -b))
        buffers[chosen] = size
    else:
        buffers.append(size)
        return len(buffers) - 1
    free.remove(chosen)
    return chosen
