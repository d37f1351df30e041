"""Which captured CUDA graph a replayed call uses: keys, the LRU and the
capture budget (pure Python; `runtime/graphs.py` does the CUDA part).

A graph bakes addresses into its kernels' arguments. A call whose arrays
are already on the GPU is replayed by a graph captured for *those*
addresses, so nothing is copied; the key says which:

```python
key = ((0x7f00_0000_0000, None), (0x7f00_0010_0000,))
#      ^ input 0 read in place, input 1 (host) copied into its static buffer
#                                 ^ the fresh output array the graph writes
```

- input position `i`: the caller's device address, or `None` when the array
  is on the host (copied into the static input buffer `i`);
- outputs: the addresses of this call's fresh output arrays (allocated for
  this call, so a graph can write them directly: a returned output is
  never written again, whatever the caller keeps), or `None` when the
  results go to the host or the program's outputs cannot be written in
  place (an output that is an input, a constant or another output): the
  graph writes the static output buffers and the call copies them out.

The all-`None` key is the *static graph*: static buffers in and out,
valid for every call, never evicted. Shapes, dtypes and strides are not in
the key: they are fixed per compiled function and every input is checked
(dtype, shape, C-contiguous) before its address is read.

What keeps this bounded (`GraphCachePolicy`):

- at most `size` address-keyed graphs, least recently used evicted first
  (a graph exec holds only its nodes' parameters; a replay in flight
  finishes before CUDA frees an evicted one);
- a capture budget: `size` captures to start with, one spent per capture,
  `refill_hit` earned back per replay of an address-keyed graph and
  `refill_static` per call served by the static graph. A caller whose
  addresses never repeat (a new tensor every call, or outputs that are all
  kept) soon runs out and is served by the static graph with copies, at
  most one capture per `1 / refill_static` calls after that, instead of
  capturing on every call.

Nothing else invalidates a graph: the executor's intermediate buffers and
constants live as long as the executor, and an address that comes back
after being freed and reallocated is read or written exactly as before.
(Whether an address is on the graph's GPU is asked once, at capture: a
process that frees an array on one GPU and gets its address back for an
array on another would replay the earlier decision.)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Generic, TypeVar

Key = tuple[tuple[int | None, ...], tuple[int, ...] | None]
Entry = TypeVar("Entry")


@dataclass(frozen=True)
class GraphCachePolicy:
    """How many address-keyed graphs a model keeps and how often it may
    capture a new one (see the module docstring)."""

    size: int = 8
    refill_hit: float = 1 / 32
    refill_static: float = 1 / 1024


@dataclass
class CallCounts:
    """How a compiled function's calls ran (`CompiledModel.call_counts`):
    kernels launched one by one (the first call, and every call where
    graphs are off or a capture failed), or a graph replayed; of the
    replays, those that copied inputs or outputs through static buffers and
    the bytes they copied (a caller whose addresses keep changing, or a
    host array); and the graphs captured. A replay that copies nothing is
    the fast path: `replays - copying_replays`."""

    one_by_one: int = 0
    replays: int = 0
    copying_replays: int = 0
    copied_bytes: int = 0
    captures: int = 0

    def __add__(self, other: CallCounts) -> CallCounts:
        """Both counts together (the partitions of one model)."""
        return CallCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def static_key(n_inputs: int) -> Key:
    """The key of the graph that copies every input and output."""
    return (None,) * n_inputs, None


class GraphCache(Generic[Entry]):
    """Captured graphs by key: an LRU of address-keyed ones and the static one."""

    def __init__(self, n_inputs: int, policy: GraphCachePolicy | None = None) -> None:
        self.policy = policy if policy is not None else GraphCachePolicy()
        self.static_key = static_key(n_inputs)
        self.static: Entry | None = None
        self.entries: OrderedDict[Key, Entry] = OrderedDict()
        self.budget = float(self.policy.size)
        self.captures = 0

    def get(self, key: Key) -> Entry | None:
        """The graph for `key`, marked most recently used; None on a miss."""
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            if self.budget < self.policy.size:
                self.budget += self.policy.refill_hit
            return entry
        if key == self.static_key:
            return self.static
        return None

    def may_capture(self) -> bool:
        """Whether a miss may capture a graph for its addresses (else the
        call takes the static graph)."""
        return self.budget >= 1.0

    def served_static(self) -> None:
        """A call that missed was served by the static graph instead."""
        if self.budget < self.policy.size:
            self.budget += self.policy.refill_static

    def put(self, key: Key, entry: Entry) -> None:
        """Keep a graph just captured for `key` (the static one outside the LRU)."""
        self.captures += 1
        if key == self.static_key:
            self.static = entry
            return
        self.budget -= 1.0
        self.entries[key] = entry
        while len(self.entries) > self.policy.size:
            self.entries.popitem(last=False)
