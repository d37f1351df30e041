"""`fusec.compile(...)`: the Python API's compile, a model (a path or its
text) compiled by the compile job (`compiler/compile.py`) into a callable
`CompiledModel` (`runtime/compiled_model.py`), nothing written to disk.

```python
import fusec
model = fusec.compile("examples/chain16.mlir", target="h200")
y = model(x)
```
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

from fusec.analysis.cudnn_library import FRONTEND_MISSING, sdpa_available
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.remarks import collect_remarks
from fusec.analysis.targets import get_target
from fusec.compiler.compile import ScheduleOptions, compile_model, source_text
from fusec.compiler.instrument import Instrumentation, PassTimer
from fusec.compiler.program_cache import ProgramStore, program_key
from fusec.runtime.compiled_model import CompiledModel
from fusec.runtime.device import select_device


def compile(
    source: str | Path,
    target: str = "auto",
    fusion: bool = True,
    device: str = "auto",
    gemm: str = "auto",
    fold_constants: bool = True,
    graphs: bool | None = None,
    autotune: bool = False,
    library_epilogue: bool = True,
    cache: bool = True,
    conv: str = "auto",
    conv_tf32: bool = False,
    attention: str = "auto",
    library_timing: bool = True,
    timing: bool = False,
    ptxas_wait: float | None = 0.0,
) -> CompiledModel:
    """Compile a model (a path or its text) and return it ready to call.

    `gemm` is "auto" (the cost model picks cuBLAS through CuPy or the fused
    SIMT kernel per matmul), "library" or "fused", as `fusec --gemm`;
    `fold_constants=False` is `fusec --no-fold-constants`; `graphs=False`
    launches kernels one by one on every call instead of replaying a CUDA
    graph from the second call on (the default where a GPU and CuPy are
    present; docs/running.md); `autotune=True` is `fusec --autotune`
    (docs/scheduling.md); `library_epilogue=False` keeps a library GEMM's
    whole epilogue out of its call (`tile-and-promote{library-epilogue=false}`);
    `conv` is "auto" (the cost model picks cuDNN or fusec's window kernel per
    convolution), "library" or "fused", as `fusec --conv`; `conv_tf32=True`
    lets f32 library convolutions use TF32 tensor cores (`--conv-tf32`);
    `attention` is "auto" (cuDNN's fused attention where the cost model
    says it is faster), "library" or "fused", as `fusec --attention`;
    `library_timing=False` decides cuDNN or own per convolution by the cost
    model alone, without timing cuDNN's call on the GPU compiled for
    (`fusec --no-library-timing`; `compiler/library_clock.py`);
    `timing=True` prints where the compile's time went on stderr, as
    `fusec --mlir-timing` does (a pass per row, the program cache's lookup
    and store, starting the kernel builds); `ptxas_wait` is the most seconds
    `register-budget` waits for ptxas register counts of kernels being
    built (0, the default: estimates and counts kept from earlier builds
    only, as the command line does, so that the kernels start building when
    the front end ends instead of the front end waiting for them; None:
    register-budget's own default, 3 s; docs/scheduling.md, "When ptxas
    decides").

    A model compiled before, with the same options, target and fusec, is read
    back from the per-user cache instead of compiled again
    (`compiler/program_cache.py`; docs/running.md); `cache=False` (and
    `autotune=True`) always compiles."""
    if ptxas_wait is not None:
        if not ptxas_wait >= 0:
            raise FusecError(f"ptxas_wait must be None or >= 0 seconds, not {ptxas_wait!r}")
        ptxas_wait = float(ptxas_wait)  # 0 and 0.0: one option, one program key
    kind = select_device(device)
    text, name = source_text(source)
    schedule = ScheduleOptions(gemm=gemm, library_epilogue=library_epilogue, conv=conv,
                               conv_tf32=conv_tf32, attention=attention,
                               library_timing=library_timing, ptxas_wait=ptxas_wait)
    timer = PassTimer(enabled=timing)
    try:
        store = ProgramStore.user() if cache and not autotune else None
        key = ""
        if store is not None:
            options = {"fusion": fusion, "fold_constants": fold_constants,
                       **dataclasses.asdict(schedule),
                       # a plan calling cuDNN's attention needs its package where it runs
                       "cudnn_attention": sdpa_available()}
            with timer.timed("(program cache lookup)"):
                key = program_key(text, options, get_target(target), kind)
                hit = store.load(key)
            if hit is not None:
                program, memory, plan, kernels_path = hit
                return CompiledModel(program, memory, plan, device, kernels_path=kernels_path,
                                     graphs=graphs)
        if kind == "gpu":  # a compile: before anything could import numba.cuda
            # they import numba while the front end runs, and serve every model; a
            # program from the cache starts none (a kernel its cache lacks starts them)
            from fusec.codegen.build_pool import start_workers

            with timer.timed("(starting kernel builders)"):
                start_workers()
        artifacts = compile_model(text, fusion=fusion, target=target, schedule=schedule,
                                  fold_constants=fold_constants, autotune=autotune or None,
                                  instrument=Instrumentation(timer=timer), source_name=name)
        if any(FRONTEND_MISSING in line for line in collect_remarks(artifacts.module)):
            _note_frontend_missing()
        if store is not None:
            with timer.timed("(program cache store)"):
                store.store(key, artifacts)
        with timer.timed("(starting kernel builds)"):
            model = CompiledModel(artifacts.program, artifacts.memory, artifacts.plan, device,
                                  graphs=graphs)
            model.start_kernel_builds()  # they compile while the caller goes on to its first call
        return model
    finally:
        if timing:
            sys.stderr.write(f"fusec: compile of {name}:\n{timer.report()}")


@functools.cache
def _note_frontend_missing() -> None:
    """Say once per process that cuDNN's attention is a package away (the
    remark says it per attention, but only to a caller that asks for remarks)."""
    print(f"fusec: note: f16/bf16 attentions run as fusec's own kernels here: "
          f"{FRONTEND_MISSING}", file=sys.stderr)


def start_kernel_builders(device: str = "auto") -> bool:
    """Start the kernel compile workers now (`codegen/build_pool.py`), if
    kernels for `device` ("auto", "gpu", "sim") would be built: a caller
    that knows a compile is coming (`torch.compile`'s backend, before
    aot_autograd traces the graph) lets them import numba and warm up
    meanwhile. Returns whether they run. Never selects the device, so that
    the compile itself still does."""
    from fusec.runtime.device import gpu_available, simulator_forced

    if device == "sim" or (device == "auto" and simulator_forced()) or not gpu_available():
        return False
    from fusec.codegen.build_pool import start_workers

    return start_workers() is not None
