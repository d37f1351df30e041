"""Timing one library call alone on the GPU present: the measured side of
a library-or-own choice made while compiling (`compiler/library_clock.py`).

```python
us = time_call(call, l2_bytes=target.l2_bytes)    # a `LibraryCall` of a choice
us = conv_call_us({"library": "cudnn_conv_bf16", "strides": [2, 2], ...},
                  [(32, 3, 224, 224), (64, 3, 7, 7), (32, 64, 112, 112)], l2_bytes=50 << 20)
```

The call runs on fresh random operands (normal values; bf16 as its bits) at
their real shapes, on a stream of its own, through the same path a plan's
launch takes (`runtime/cudnn_conv.py`: the plan it makes is the one the
compiled model's calls reuse). Operands smaller than twice the L2 are
rotated over copies (`tuning_timer.rotation_copies`, as the autotuner's), so
that each call reads DRAM as in a large model, not what the previous call
left in L2. After `WARMUP` calls, a batch of calls long enough against the
events' resolution is captured as one CUDA graph and its replays timed with
CUDA events (calls enqueued one by one would measure the host: cuDNN's
legacy API spends tens of microseconds of CPU per call, more than a small
convolution's GPU time); the result is the median of `REPEATS` replays, in
microseconds per call. CuPy carries the arrays, the stream, the graphs and
the events: without it (or without a GPU) nothing is timed
(`ClockUnavailable`), as for a call cuDNN refuses (`CudnnError`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import TensorSpec
from fusec.dialects.element_types import ELEMENT_TYPES, ElementType
from fusec.runtime.call_timer import random_input
from fusec.runtime.tuning_timer import rotation_copies
from fusec.scheduling.library_tuning import LibraryCall

WARMUP = 3
REPEATS = 7
BATCH_S = 5e-4  # a batch long against the events' resolution (~0.5 us)
MAX_BATCH = 64
SEED = 0


class ClockUnavailable(FusecError):
    """No GPU or no CuPy to time a library call with."""


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as err:
        raise ClockUnavailable("CuPy is not installed") from err
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise ClockUnavailable("no CUDA GPU")
    except cupy.cuda.runtime.CUDARuntimeError as err:
        raise ClockUnavailable("no CUDA GPU") from err
    return cupy


def device_name() -> str:
    """`NVIDIA H100 80GB HBM3 (cc 9.0)`: the GPU calls are timed on."""
    cupy = _cupy()
    dev = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
    major, minor = dev.compute_capability[0], dev.compute_capability[1:]
    return f"{name.decode() if isinstance(name, bytes) else name} (cc {major}.{minor})"


def time_call(call: LibraryCall, l2_bytes: int) -> float:
    """Microseconds per call of `call` (module docstring). Any failure on
    the GPU (no memory left for the operands, a capture the driver refuses)
    is a `ClockUnavailable` saying so: the choice is then the model's. The
    operands' memory goes back to the device afterwards (CuPy's pool would
    keep it from PyTorch's allocator and the model's own buffers)."""
    spec = call.spec()
    if not str(spec.get("library", "")).startswith("cudnn_conv_"):
        raise ClockUnavailable(f"no clock for {spec.get('library')!r} calls")
    cupy = _cupy()
    try:
        return conv_call_us(spec, call.shapes, l2_bytes)
    except FusecError:
        raise
    except Exception as err:  # CuPy's and the driver's errors
        raise ClockUnavailable(f"{type(err).__name__}: {err}") from err
    finally:
        cupy.get_default_memory_pool().free_all_blocks()


def _row(library: str) -> ElementType:
    """The element type of a library call's operands (`cudnn_conv_bf16`: bf16)."""
    row = next((e for e in ELEMENT_TYPES if e.library_conv == library), None)
    if row is None:
        raise ClockUnavailable(f"no element type calls {library!r}")
    return row


def conv_call_us(spec: dict[str, Any], shapes: Sequence[Sequence[int]],
                 l2_bytes: int) -> float:
    """Microseconds per call of the cuDNN convolution `spec` (a launch's
    keys, `codegen/library_conv.py`) on operands of `shapes` (x, w, y)."""
    from fusec.runtime.cudnn_conv import prepare_conv, run_conv

    cupy = _cupy()
    row = _row(str(spec["library"]))
    rng = np.random.default_rng(SEED)
    copies = [[cupy.asarray(random_input(rng, TensorSpec(tuple(s), row.device_dtype), None))
               for s in shapes]
              for _ in range(rotation_copies(sum(map(math.prod, shapes)) * row.width,
                                             l2_bytes))]
    stream = cupy.cuda.Stream(non_blocking=True)
    prepare_conv(spec, copies[0])
    turn = 0

    def run(n: int) -> None:
        nonlocal turn
        for _ in range(n):
            run_conv(spec, copies[turn % len(copies)], stream.ptr)
            turn += 1

    def graph_of(n: int) -> Any:
        """n calls captured as one CUDA graph: replayed, they run back to back,
        as in a compiled model's replay, whatever the host's cost per call."""
        with stream:
            stream.begin_capture()
            try:
                run(n)
            finally:
                graph = stream.end_capture()
        graph.upload(stream)
        return graph

    def seconds(graph: Any) -> float:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        graph.launch(stream)
        end.record(stream)
        end.synchronize()
        return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3

    run(WARMUP)
    stream.synchronize()
    single = graph_of(1)
    seconds(single)
    one = max(seconds(single), 1e-7)
    batch = max(1, min(MAX_BATCH, math.ceil(BATCH_S / one)))
    graph = graph_of(batch)
    seconds(graph)
    return statistics.median(seconds(graph) / batch for _ in range(REPEATS)) * 1e6
