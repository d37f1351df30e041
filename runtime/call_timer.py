"""Timing whole calls of programs on the GPU: the autotuner's last check
(`compiler/whole_call.py`), tuned program against the model's.

Each program runs through its own `Executor` (graphs off: the same launch
path for both) on one stream, every function of it on the same fresh random
inputs at the real shapes, into outputs allocated once (as bench/run_gpu.py
times calls). The programs' calls are measured together by
`interleaved_samples` (warm-up, calibrated batches of calls between CUDA
events, round robin). Where a function's inputs, outputs and buffers fit
`ROTATE_FACTOR` times the L2, it is called on rotating copies of its inputs
and outputs, so calls read DRAM as those of a large model do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from fusec.analysis.program import FunctionProgram, Program, TensorSpec
from fusec.runtime.bf16_io import host_bits, is_bf16
from fusec.runtime.tuning_timer import MAX_QUEUED, BatchClock, interleaved_samples, rotation_copies

INPUT_SEED = 0


class StreamClock(BatchClock, Protocol):
    """A batch clock and the stream it times (`tuning_timer.EventClock`)."""

    stream: Any


def random_input(rng: np.random.Generator, spec: TensorSpec, bound: int | None) -> np.ndarray:
    """A fresh random host input of `spec`: floats from N(0, 1) in their
    device dtype (bf16 as its bits), integers uniform below `bound` (a
    `FunctionProgram.index_bounds` entry), else zeros: an index always in
    range, and a Boolean mask."""
    if is_bf16(spec.dtype):
        return host_bits(rng.standard_normal(spec.shape).astype(np.float32))
    kind = np.dtype(spec.dtype).kind
    if kind == "f":
        return rng.standard_normal(spec.shape).astype(spec.dtype)
    if kind in "iu" and bound is not None:
        return rng.integers(0, bound, spec.shape).astype(spec.dtype)
    return np.zeros(spec.shape, spec.dtype)


def random_inputs(fp: FunctionProgram, seed: int = INPUT_SEED) -> list[np.ndarray]:
    """Fresh random host inputs of `fp` (`random_input`: gather indices drawn
    below the table they index)."""
    rng = np.random.default_rng(seed)
    return [random_input(rng, fp.values[v], fp.index_bounds.get(v)) for v in fp.inputs]


def time_programs(cuda: Any, clock: StreamClock, programs: Sequence[Program], l2_bytes: int,
                  budget_s: float, device: str = "gpu") -> list[list[float]]:
    """Microseconds per call of each program, per repeat: the sum over the
    functions of the first program (the others have the same). `clock`
    has the `stream` the calls run on."""
    from fusec.runtime.executor import Executor

    totals: list[list[float]] = [[] for _ in programs]
    for fname, fp in programs[0].functions.items():
        executors = [Executor(p, fname, device=device, graphs=False) for p in programs]
        if not any(ex.fp.launches for ex in executors):
            continue
        inputs = [cuda.to_device(h, stream=clock.stream) for h in random_inputs(fp)]
        runs = [_calls(cuda, ex, inputs, l2_bytes, clock.stream) for ex in executors]
        caps = [max(1, MAX_QUEUED // max(1, len(ex.fp.launches))) for ex in executors]
        samples = interleaved_samples(runs, clock, budget_s, caps, clock.stream.synchronize)
        for total, row in zip(totals, samples, strict=True):
            if total:  # functions after the first: add repeat by repeat
                total[:] = [t + s * 1e6 for t, s in zip(total, row, strict=False)]
            else:
                total.extend(s * 1e6 for s in row)
    return totals


def _calls(cuda: Any, ex: Any, inputs: list[Any], l2_bytes: int,
           stream: Any) -> Callable[[int], None]:
    """`run(n)`: n calls of `ex` on rotating copies of `inputs` and its outputs."""
    _, storage = ex.launch(inputs, stream=stream)
    given = {ex.roots[v] for v in ex.fp.inputs}
    # What `launch` allocates when no outputs are given, in its order.
    outputs = [storage[root] for root, cls in ex.classes.items()
               if cls == "output" and root not in given]
    nbytes = sum(int(a.nbytes) for a in (*inputs, *outputs)) + ex.memory.total_bytes
    copies = rotation_copies(nbytes, l2_bytes)
    sets = [(inputs, outputs)]
    for _ in range(copies - 1):
        sets.append(([_copy(cuda, a, stream) for a in inputs],
                     [_copy(cuda, a, stream) for a in outputs]))
    position = [0]

    def run(n: int) -> None:
        for _ in range(n):
            ins, outs = sets[position[0] % copies]
            position[0] += 1
            ex.launch(ins, outs, stream=stream)

    return run


def _copy(cuda: Any, a: Any, stream: Any) -> Any:
    copy = cuda.device_array(a.shape, dtype=a.dtype, stream=stream)
    copy.copy_to_device(a, stream=stream)
    return copy
