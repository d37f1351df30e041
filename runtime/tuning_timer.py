"""Timing one kernel launch on the GPU for the autotuner (`compiler/autotune.py`).

```python
timer = CudaEventTimer()
timer.prepare(kernels_py, signatures)      # every candidate compiled on all cores, once
us = timer.time_group(kernels_py, launch, arrays)   # median microseconds per launch
```

`GroupTimer` is what the tuner needs (tests give it a fake); `prepare` is
optional. `CudaEventTimer` loads the candidates' kernels through the
runtime's own path (`runtime/kernel_loader.py`: kept code, else compiled in
parallel), uploads a group's arrays once for all its candidates, runs one
warm-up launch, then times `repeats` batches of `inner` launches between two
CUDA events on one stream and returns the median per launch; the batch size
and the repeats are chosen from the warm-up's time so that one candidate
takes about `budget_s`.
"""

from __future__ import annotations

import statistics
import time
import types
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fusec.analysis.program import KernelLaunch
from fusec.runtime.dynamic_shared import allow_dynamic_shared
from fusec.runtime.kernel_cache import Signature

MIN_REPEATS = 3
MAX_REPEATS = 15
BATCH_TARGET_S = 200e-6  # a batch of launches long enough for the events' resolution
MAX_INNER = 100


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


def _load(source: str) -> types.ModuleType:
    from fusec.runtime.kernel_build import load_source

    return load_source(source, "fusec_tuning_kernels", "<fusec tuning kernels>")


class CudaEventTimer:
    """CUDA-event timing in this process (module docstring)."""

    def __init__(self, budget_s: float = 0.2) -> None:
        from fusec.runtime.device import cuda_module

        self.cuda = cuda_module("gpu")
        self.budget_s = budget_s
        self._source: str | None = None
        self._kernels: dict[str, Any] = {}
        self._arrays_id: int | None = None
        self._device: dict[str, Any] = {}

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

        self._kernels = load_gpu_kernels(self.cuda, _load(kernel_source), kernel_source,
                                         signatures)
        self._source = kernel_source

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        """Median microseconds per launch of `launch` on `arrays`."""
        if kernel_source != self._source or launch.kernel not in self._kernels:
            sig = [(len(a.view_shape), str(arrays[a.value].dtype)) for a in launch.args]
            self.prepare(kernel_source, {launch.kernel: sig})
        kernel = self._kernels[launch.kernel]
        allow_dynamic_shared(kernel, launch.shared_bytes)  # past 48 KiB of dynamic memory
        if id(arrays) != self._arrays_id:  # a new group: upload its arrays once
            self._device = {}
            self._arrays_id = id(arrays)
        for a in launch.args:  # and what a candidate added or re-sized since
            host = arrays[a.value]
            dev = self._device.get(a.value)
            if dev is None or tuple(dev.shape) != host.shape:
                self._device[a.value] = self.cuda.to_device(np.ascontiguousarray(host))
        args = [self._device[a.value].reshape(a.view_shape) for a in launch.args]
        stream = self.cuda.stream()
        from fusec.runtime.executor import core_stream

        core = core_stream(stream)

        def run(n: int) -> None:
            for _ in range(n):
                kernel.launch(args, launch.grid, launch.block, core, launch.shared_bytes)

        start, end = self.cuda.event(), self.cuda.event()
        t0 = time.perf_counter()
        run(1)
        stream.synchronize()
        first = max(1e-6, time.perf_counter() - t0)
        inner = max(1, min(MAX_INNER, int(BATCH_TARGET_S / first)))
        repeats = max(MIN_REPEATS, min(MAX_REPEATS, int(self.budget_s / (first * inner))))
        times = []
        for _ in range(repeats):
            start.record(stream)
            run(inner)
            end.record(stream)
            end.synchronize()
            times.append(self.cuda.event_elapsed_time(start, end) * 1e3 / inner)
        return float(statistics.median(times))
