"""Timing kernels on the GPU for the autotuner (`compiler/autotune.py`).

```python
timer = CudaEventTimer(l2_bytes=target.l2_bytes)
timer.prepare(kernels_py, signatures)      # every candidate compiled on all cores, once
samples = timer.time_candidates(kernels_py, launches, arrays)  # us per launch, per repeat
us = timer.time_group(kernels_py, launch, arrays)   # one candidate: the median
samples = timer.time_calls(programs)       # whole calls (runtime/call_timer.py)
```

`GroupTimer` is what the tuner needs (tests give it a fake); `Preparing`,
`Interleaving` and `CallTiming` are optional. The candidates of one group are
measured together by `interleaved_samples`:

1. warm-up: `WARMUP_LAUNCHES` untimed launches of each candidate (module load,
   the first launch, clocks ramping up);
2. calibration: a batch of `CALIBRATION_LAUNCHES` timed with CUDA events (the
   GPU's time, not the host's) gives each candidate its batch size: enough
   launches that a batch lasts `BATCH_TARGET_S`, against which the events'
   resolution is small;
3. repeats, round robin: every round times one batch of each candidate, the
   first candidate rotating from round to round, so that drift (clocks,
   temperature, other work on the GPU) hits all of them alike and the
   samples of one round can be compared pairwise;
4. the median per candidate (`time_group`), or all samples
   (`time_candidates`) for a decision that respects noise.

Before each timed batch the stream is held by a short sleeping kernel
(`runtime/gpu_hold.py`) while the host enqueues the batch, so the batch runs
back to back and the host's launch cost is outside the events' window.

L2: a candidate whose arguments are smaller than `ROTATE_FACTOR` times the
L2 runs over copies of all its arguments, one copy after another, enough
copies (at most `MAX_COPIES`) that together they are `ROTATE_FACTOR` times
the L2: each launch then reads its inputs from DRAM, as a kernel of a real
call of a large model does, not from what the previous launch left in L2.
"""

from __future__ import annotations

import math
import statistics
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from fusec.analysis.program import KernelLaunch
from fusec.runtime.dynamic_shared import allow_dynamic_shared
from fusec.runtime.kernel_cache import Signature

if TYPE_CHECKING:
    from fusec.analysis.program import Program

WARMUP_LAUNCHES = 3
CALIBRATION_LAUNCHES = 5
BATCH_TARGET_S = 1e-3  # a batch long against the events' resolution (~0.5 us) and jitter
MAX_QUEUED = 512  # launches per batch: below the driver's queue (~1024), so the host never waits
MIN_REPEATS = 5
MAX_REPEATS = 25
ROTATE_FACTOR = 2  # argument copies cover twice the L2, so no copy is still there when reused
MAX_COPIES = 64
HOLD_FACTOR = 1.5  # the stream is held for 1.5x the host's measured enqueue time
MAX_HOLD_S = 0.05


class GroupTimer(Protocol):
    """Times one launch of a kernel of `kernel_source` (kernels.py text) on
    `arrays` (value id -> host array, every argument of `launch`):
    microseconds per launch."""

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float: ...


@runtime_checkable
class Preparing(Protocol):
    """A timer that compiles every kernel of a source before timing any."""

    def prepare(self, kernel_source: str, signatures: Mapping[str, Signature]) -> None: ...


@runtime_checkable
class Interleaving(Protocol):
    """A timer that measures the candidates of one group together: per
    candidate, microseconds per launch in each repeat (the repeats of all
    candidates interleaved, so sample `r` of each was taken at about the
    same time)."""

    def time_candidates(self, kernel_source: str, launches: Sequence[KernelLaunch],
                        arrays: Sequence[Mapping[str, np.ndarray]]) -> list[list[float]]: ...


@runtime_checkable
class CallTiming(Protocol):
    """A timer of whole calls: per program, microseconds per call (every
    function of the program, on the same fresh random inputs) in each
    repeat, the programs interleaved."""

    def time_calls(self, programs: Sequence[Program]) -> list[list[float]]: ...


class BatchClock(Protocol):
    """Seconds of device time `run(n)` (n launches) takes."""

    def seconds(self, run: Callable[[int], None], n: int) -> float: ...


def interleaved_samples(runs: Sequence[Callable[[int], None]], clock: BatchClock,
                        budget_s: float, max_inner: Sequence[int] | None = None,
                        sync: Callable[[], None] = lambda: None) -> list[list[float]]:
    """Seconds per launch of each of `runs` (`run(n)` enqueues n launches),
    one sample per repeat (module docstring: warm-up, calibration, round
    robin). `max_inner` caps each run's batch (default `MAX_QUEUED`); the
    repeats are as many as fit `budget_s`, within `MIN_REPEATS`..`MAX_REPEATS`."""
    caps = list(max_inner) if max_inner is not None else [MAX_QUEUED] * len(runs)
    for run in runs:
        run(WARMUP_LAUNCHES)
    sync()
    inner = []
    for run, cap in zip(runs, caps, strict=True):
        n = min(CALIBRATION_LAUNCHES, cap)
        clock.seconds(run, n)  # the first batch teaches the clock the host's enqueue time
        per_launch = max(clock.seconds(run, n) / n, 1e-9)
        inner.append(max(1, min(cap, math.ceil(round(BATCH_TARGET_S / per_launch, 6)))))
    return _rounds(runs, clock, inner, budget_s)


def _rounds(runs: Sequence[Callable[[int], None]], clock: BatchClock, inner: list[int],
            budget_s: float) -> list[list[float]]:
    """The interleaved repeats: round r times run (r + j) % len(runs) j-th."""
    samples: list[list[float]] = [[] for _ in runs]
    count = len(runs)
    r, started = 0, time.perf_counter()
    while r < MAX_REPEATS and (r < MIN_REPEATS or time.perf_counter() - started < budget_s):
        for j in range(count):
            c = (r + j) % count
            samples[c].append(clock.seconds(runs[c], inner[c]) / inner[c])
        r += 1
    return samples


class EventClock:
    """CUDA events around a batch on `stream`, the stream held by a sleeping
    kernel while the host enqueues the batch (module docstring)."""

    def __init__(self, cuda: Any, stream: Any) -> None:
        from fusec.runtime.gpu_hold import StreamHold

        self.cuda = cuda
        self.stream = stream
        self.hold = StreamHold(cuda)
        # The host's enqueue time per launch of each run, from its last batch.
        self.host_per_launch: dict[int, float] = {}

    def seconds(self, run: Callable[[int], None], n: int) -> float:
        """Device seconds of `run(n)`."""
        host = self.host_per_launch.get(id(run), 0.0)
        self.hold.hold(self.stream, min(MAX_HOLD_S, HOLD_FACTOR * host * n))
        start, end = self.cuda.event(), self.cuda.event()
        start.record(self.stream)
        t0 = time.perf_counter()
        run(n)
        self.host_per_launch[id(run)] = (time.perf_counter() - t0) / n
        end.record(self.stream)
        end.synchronize()
        return float(self.cuda.event_elapsed_time(start, end)) * 1e-3


def rotation_copies(nbytes: int, l2_bytes: int) -> int:
    """How many copies of arguments of `nbytes` together cover
    `ROTATE_FACTOR` times the L2 (1: they do alone)."""
    if nbytes <= 0 or nbytes >= ROTATE_FACTOR * l2_bytes:
        return 1
    return int(min(MAX_COPIES, -(-ROTATE_FACTOR * l2_bytes // nbytes)))


def _load(source: str) -> types.ModuleType:
    from fusec.runtime.kernel_build import load_source

    return load_source(source, "fusec_tuning_kernels", "<fusec tuning kernels>")


class CudaEventTimer:
    """CUDA-event timing in this process (module docstring)."""

    def __init__(self, budget_s: float = 0.2, l2_bytes: int = 60 << 20) -> None:
        from fusec.runtime.device import cuda_module

        self.cuda = cuda_module("gpu")
        self.budget_s = budget_s
        self.l2_bytes = l2_bytes
        self._source: str | None = None
        self._kernels: dict[str, Any] = {}
        self.stream = self.cuda.stream()
        self.clock = EventClock(self.cuda, self.stream)

    def device_name(self) -> str:
        """`NVIDIA H200 (cc 9.0)`: the GPU the times are for."""
        dev = self.cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        major, minor = dev.compute_capability
        return f"{name} (cc {major}.{minor})"

    def prepare(self, kernel_source: str, signatures: Mapping[str, Signature]) -> None:
        """Load (compiling in parallel what is not kept) every kernel of
        `kernel_source`."""
        from fusec.runtime.kernel_loader import load_gpu_kernels

        loaded = load_gpu_kernels(self.cuda, _load(kernel_source), kernel_source, signatures)
        if kernel_source != self._source:
            self._kernels = {}
        self._kernels.update(loaded)
        self._source = kernel_source

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        """Median microseconds per launch of `launch` on `arrays`."""
        return float(statistics.median(self.time_candidates(kernel_source, [launch],
                                                            [arrays])[0]))

    def time_candidates(self, kernel_source: str, launches: Sequence[KernelLaunch],
                        arrays: Sequence[Mapping[str, np.ndarray]]) -> list[list[float]]:
        """Microseconds per launch of each of `launches` (each on its own
        `arrays`), per repeat, interleaved."""
        missing = [la for la in launches
                   if kernel_source != self._source or la.kernel not in self._kernels]
        if missing:
            sigs = {la.kernel: [(len(a.view_shape), str(arr[a.value].dtype)) for a in la.args]
                    for la, arr in zip(launches, arrays, strict=True)}
            self.prepare(kernel_source, sigs)
        uploaded: dict[tuple[int, int], Any] = {}
        runs = [self._run(launch, arr, uploaded) for launch, arr in zip(launches, arrays,
                                                                        strict=True)]
        samples = interleaved_samples(runs, self.clock, self.budget_s,
                                      sync=self.stream.synchronize)
        return [[s * 1e6 for s in row] for row in samples]

    def _run(self, launch: KernelLaunch, arrays: Mapping[str, np.ndarray],
             uploaded: dict[tuple[int, int], Any]) -> Callable[[int], None]:
        """`run(n)`: n launches over the rotating copies of the arguments
        (a copy of one host array is uploaded once for all candidates)."""
        from fusec.runtime.executor import core_stream

        hosts = [arrays[a.value] for a in launch.args]
        distinct = {id(h): h for h in hosts}.values()  # an array passed twice counts once
        copies = rotation_copies(sum(int(h.nbytes) for h in distinct), self.l2_bytes)
        sets = []
        for i in range(copies):
            args = []
            for a, host in zip(launch.args, hosts, strict=True):
                key = (id(host), i)
                if key not in uploaded:
                    uploaded[key] = self.cuda.to_device(np.ascontiguousarray(host))
                args.append(uploaded[key].reshape(a.view_shape))
            sets.append(args)
        kernel = self._kernels[launch.kernel]
        allow_dynamic_shared(kernel, launch.shared_bytes)  # past 48 KiB of dynamic memory
        core = core_stream(self.stream)
        position = [0]

        def run(n: int) -> None:
            for _ in range(n):
                args = sets[position[0] % copies]
                position[0] += 1
                kernel.launch(args, launch.grid, launch.block, core, launch.shared_bytes)

        return run

    def time_calls(self, programs: Sequence[Program]) -> list[list[float]]:
        """Microseconds per whole call of each program (`runtime/call_timer.py`)."""
        from fusec.runtime.call_timer import time_programs

        return time_programs(self.cuda, self.clock, programs, self.l2_bytes, self.budget_s)
