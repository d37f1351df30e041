"""Holding a CUDA stream busy for a while, so that the host can enqueue a
batch of launches that then run back to back (`runtime/tuning_timer.py`).

Without it, the first launches of a timed batch run as soon as they are
enqueued and the GPU waits for the host between them: the events would
measure the host's launch cost (several microseconds per launch through
Python) rather than the kernels. A one-thread kernel that sleeps in a loop
(`nanosleep`, which sleeps between zero and twice the time asked) occupies
the stream meanwhile; it runs before the batch's start event, so its length
is never measured. Where the kernel cannot be built (a GPU before cc 7.0 has
no `nanosleep`), nothing is held and the batch is timed as before.
"""

from __future__ import annotations

from typing import Any

SLEEP_NS = 1000  # one nanosleep step; the loop count sets the length


def _make_kernel(cuda: Any) -> Any:
    import numba

    @cuda.jit("void(int64)")
    def sleep(steps: int) -> None:  # pragma: no cover - runs on the GPU
        for _ in range(steps):
            cuda.nanosleep(numba.uint32(SLEEP_NS))

    return sleep


class StreamHold:
    """`hold(stream, seconds)`: a kernel that keeps `stream` busy about that long."""

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        self._kernel: Any = None
        self._broken = False

    def hold(self, stream: Any, seconds: float) -> None:
        """Enqueue the sleeping kernel on `stream` (nothing for under 1 us)."""
        steps = int(seconds * 1e9 / SLEEP_NS)
        if steps < 1 or self._broken:
            return
        if self._kernel is None:
            try:
                self._kernel = _make_kernel(self.cuda)
            except Exception:  # any failure to build it: time without holding
                self._broken = True
                return
        self._kernel[1, 1, stream](steps)
