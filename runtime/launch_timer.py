"""Timing every launch of one call, and the device's copy bandwidth
(`fusec run --profile`, `compiler/run_profile.py`).

```python
times = time_launches(executor, inputs, l2_bytes=target.l2_bytes)
times.us[i]                        # median microseconds of launch i over the calls
copy = copy_bandwidth(executor.cuda, executor.stream)   # bytes read + written per second
```

A call is the function's launches, bound once per set of arrays
(`Executor.bind_call`) and enqueued one at a time with a CUDA event
before the first and after each on the executor's stream, so launch `i`
lasts from event `i` to event `i + 1`. As the autotuner's timers do
(`runtime/tuning_timer.py`):

1. a warm-up call first (module loads, the first launch of each kernel);
2. the stream is held by a sleeping kernel (`runtime/gpu_hold.py`) while
   the host enqueues a call, so the launches run back to back and the
   host's launch cost is outside every event pair;
3. where the inputs, outputs and buffers of a call fit `ROTATE_FACTOR`
   times the L2, the calls rotate over copies of the inputs and outputs
   (`rotation_copies`), so that each call reads DRAM as a call of a large
   model does, not what the previous call left in L2;
4. `PROFILE_CALLS` timed calls; each launch's median.

The simulator's events record no time (their `elapsed_time` is -1), and
the simulator runs each launch before the host goes on, so there the host's
clock around each launch is the time: the same path, with times that say
nothing of a GPU.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusec.runtime.tuning_timer import HOLD_FACTOR, MAX_HOLD_S, rotation_copies

PROFILE_CALLS = 5
"""Timed calls after the warm-up call; each launch's time is its median."""
COPY_BYTES = 1 << 30
"""Bytes of the device-to-device copy that measures the copy floor: as
bench/run_gpu.py's (1 GiB each way), far past any L2."""
COPY_FREE_FRACTION = 0.25
"""At most this fraction of the free device memory goes to each copy buffer."""
SIM_COPY_BYTES = 1 << 20
"""The simulator's copy: small, since its device memory is the host's."""
COPY_WARMUP = 2
COPY_ITERS = 10  # copies per timed batch
COPY_REPEATS = 5  # timed batches; the median is kept


@dataclass(frozen=True)
class LaunchTimes:
    """Median microseconds per launch of one call, in plan order."""

    us: list[float]
    calls: int  # timed calls the medians are over
    copies: int  # sets of inputs and outputs the calls rotated over


class HostEvent:
    """An event for the simulator: the host's clock when recorded (the
    simulator has run everything enqueued before by then)."""

    def __init__(self) -> None:
        self.at = 0.0

    def record(self, stream: Any = 0) -> None:
        """Note the time."""
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        """Nothing to wait for: the simulator is synchronous."""

    def elapsed_time(self, end: HostEvent) -> float:
        """Milliseconds from this event to `end`, as CUDA events give them."""
        return (end.at - self.at) * 1e3


def _event(cuda: Any, simulator: bool) -> Any:
    return HostEvent() if simulator else cuda.event()


def time_launches(ex: Any, inputs: Sequence[Any], l2_bytes: int,
                  calls: int = PROFILE_CALLS) -> LaunchTimes:
    """Each launch's median device time over `calls` calls of executor `ex`
    (`runtime/executor.py`) on `inputs` (module docstring). `l2_bytes`: the
    L2 the rotation covers twice (0: no copies)."""
    if ex.stream is None:
        ex.stream = ex.cuda.stream()
    stream = ex.stream
    sets = _argument_sets(ex, inputs, l2_bytes, stream)
    bound = [ex.bind_call(ins, outs, stream)[0] for ins, outs in sets]
    hold = None if ex.simulator else _stream_hold(ex.cuda)
    _, host_s = _timed_call(ex, bound[0], stream)  # the warm-up call: its enqueue time
    samples: list[list[float]] = [[] for _ in ex.fp.launches]
    for c in range(calls):
        if hold is not None:
            hold.hold(stream, min(MAX_HOLD_S, HOLD_FACTOR * host_s))
        us, host_s = _timed_call(ex, bound[(c + 1) % len(bound)], stream)
        for row, t in zip(samples, us, strict=True):
            row.append(t)
    return LaunchTimes([float(statistics.median(row)) for row in samples], calls, len(sets))


def _timed_call(ex: Any, calls: list[Any], stream: Any) -> tuple[list[float], float]:
    """Microseconds of each of the bound `calls` (event to event), and the
    host's seconds to enqueue them."""
    events = [_event(ex.cuda, ex.simulator) for _ in range(len(calls) + 1)]
    t0 = time.perf_counter()
    events[0].record(stream)
    for call, after in zip(calls, events[1:], strict=True):
        ex.enqueue([call], stream)
        after.record(stream)
    host_s = time.perf_counter() - t0
    events[-1].synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in itertools.pairwise(events)], host_s


def _argument_sets(ex: Any, inputs: Sequence[Any], l2_bytes: int,
                   stream: Any) -> list[tuple[list[Any], list[Any]]]:
    """The (inputs, outputs) the calls rotate over, on the device: the
    first set is `inputs` as the executor uploads them and the outputs it
    allocates; the others copies of them (`rotation_copies`)."""
    _, _, storage = ex.bind_call(inputs, None, stream)
    device_inputs = [storage[ex.roots[v]] for v in ex.fp.inputs]
    given = {ex.roots[v] for v in ex.fp.inputs}
    # What `bind_call` allocates when no outputs are given, in its order.
    allocated = [storage[root] for root, cls in ex.classes.items()
                 if cls == "output" and root not in given]
    nbytes = sum(int(a.nbytes) for a in (*device_inputs, *allocated)) + ex.memory.total_bytes
    copies = rotation_copies(nbytes, l2_bytes) if l2_bytes > 0 else 1
    sets = [(device_inputs, allocated)]
    for _ in range(copies - 1):
        sets.append(([_copy(ex.cuda, a, stream) for a in device_inputs],
                     [_copy(ex.cuda, a, stream) for a in allocated]))
    return sets


def _copy(cuda: Any, a: Any, stream: Any) -> Any:
    copy = cuda.device_array(a.shape, dtype=a.dtype, stream=stream)
    copy.copy_to_device(a, stream=stream)
    return copy


def _stream_hold(cuda: Any) -> Any:
    from fusec.runtime.gpu_hold import StreamHold

    return StreamHold(cuda)


def copy_bandwidth(cuda: Any, stream: Any, simulator: bool) -> float:
    """The device-to-device copy rate, bytes read plus written per second:
    the median of `COPY_REPEATS` batches of `COPY_ITERS` copies of
    `copy_bytes(...)` bytes, after `COPY_WARMUP` untimed copies."""
    import numpy as np

    nbytes = copy_bytes(cuda, simulator)
    src = cuda.device_array(nbytes, dtype=np.uint8, stream=stream)
    dst = cuda.device_array(nbytes, dtype=np.uint8, stream=stream)
    for _ in range(COPY_WARMUP):
        dst.copy_to_device(src, stream=stream)
    stream.synchronize()
    seconds = []
    for _ in range(COPY_REPEATS):
        start, end = _event(cuda, simulator), _event(cuda, simulator)
        start.record(stream)
        for _ in range(COPY_ITERS):
            dst.copy_to_device(src, stream=stream)
        end.record(stream)
        end.synchronize()
        seconds.append(start.elapsed_time(end) * 1e-3 / COPY_ITERS)
    return 2 * nbytes / max(float(statistics.median(seconds)), 1e-12)


def copy_bytes(cuda: Any, simulator: bool) -> int:
    """Bytes of each copy buffer: `COPY_BYTES`, less where the device has
    not four times that free; `SIM_COPY_BYTES` in the simulator."""
    if simulator:
        return SIM_COPY_BYTES
    try:
        free, _ = cuda.current_context().get_memory_info()
    except NotImplementedError:  # an allocator plugin that cannot say (a pool)
        return COPY_BYTES
    return int(min(COPY_BYTES, max(SIM_COPY_BYTES, free * COPY_FREE_FRACTION)))


def device_name(cuda: Any, simulator: bool) -> str:
    """`NVIDIA H200 (cc 9.0)`, or the simulator's name."""
    if simulator:
        return "numba's CUDA simulator"
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    major, minor = dev.compute_capability
    return f"{name} (cc {major}.{minor})"
