"""The compile job: `fusec MODEL.mlir -o OUT` and `fusec.compile(...)`.

parse → verify → the pass pipeline → code generation → memory plan → the
artifacts of OUT. The pipeline is a spec (`compiler/compile_pipeline.py`): by
default `decompose` → `cse` → `dce` → `fold-constants` (unless
`--no-fold-constants`; with fusion on or off, since computing constants at
compile time is not fusion) → `fuse-attention` and `form-fusion-groups`
(when fusion is on) →
`check-precision` (with `--check-precision`) → `group-each-op` →
`register-budget` → `tile-and-promote`; `-p SPEC -o OUT` runs SPEC instead,
and `--insert-after/--insert-before` add passes to either. The spec that ran
is recorded in plan.json (`pipeline`) and report.md.

```
OUT/model.mlir     the IR after the whole pipeline (fusec parses it again)
OUT/kernels.py     the numba.cuda kernels, importable
OUT/plan.json      the launch plan, below
OUT/report.md      groups, launches and HBM bytes before/after, refused fusions
OUT/constants.npz  the values of the program's nn.constant ops (always written,
                   possibly empty), keyed "c0", "c1", ... as plan.json says
OUT/fusec-out.json the marker: format, version and the files above
                   (`compiler/out_marker.py`); only such an OUT is replaced
```

plan.json (`PLAN_FORMAT`, version `PLAN_VERSION`):

```json
{"format": "fusec-plan", "version": 1, "source": "model.mlir", "target": "auto",
 "fusion": true, "passes": ["decompose", "group-each-op"],
 "pipeline": "decompose,group-each-op",
 "kernels": "kernels.py", "constants_file": "constants.npz",
 "kernels_sha256": "<sha256 of kernels.py>",
 "out_hmac_sha256": "<HMAC-SHA256 of OUT under the user's key>",
 "functions": {"f": {
   "inputs":  [{"name": "x", "value": "v0", "shape": [4, 8], "dtype": "float32"}],
   "outputs": [{"name": "output_0", "value": "v3", "shape": [4, 8], "dtype": "float32"}],
   "launches": [{"kernel": "f_g0_exp", "grid": [1, 1, 1], "block": [256, 1, 1],
                 "shared_bytes": 0, "est_registers": 0, "ops": ["nn.exp"],
                 "group": "g0", "est_time_us": 0.0, "hbm_bytes": 256,
                 "plan": {"kind": "pointwise", "backend": "numba",
                          "schedule": {"elements_per_thread": 4, "block": 256, "tile": 0}},
                 "args": [{"value": "v0", "view_shape": [32], "writes": false}, ...],
                 "registers": 18, "spill_bytes": 0, "register_source": "ptxas sm_90"}],
   "values": {"v0": {"shape": [4, 8], "dtype": "float32"}, ...},
   "views": [{"value": "v5", "source": "v3"}],
   "constants": {"v1": "c0"},
   "memory": {"buffers": [{"id": 0, "bytes": 256}], "assignment": {"v2": 0},
              "live": {"v2": [0, 1]}}}}}
```

`registers`, `spill_bytes` and `register_source` appear only when measured
(`--ptx-info`, `compiler/register_source.py`): from `ptxas sm_90` (the
target's architecture: `sm_80` for `--target a100`), registers
per thread and spill stores + loads in bytes; from the GPU present
(`gpu NVIDIA H200 (cc 9.0)`), registers per thread and local memory per
thread in bytes (where spills go). `est_registers` is the register model's
estimate for the group, always present.
With `--autotune` (`compiler/autotune.py`), each tuned launch also carries
`measured_us` (the kept schedule's median time on the GPU), `model_measured_us`,
`tuned_candidates` and `tuning_choice`, and the plan an `autotune` object
(`compiler/tuning_report.py`).
A library GEMM launch (`--gemm`) names no kernel of kernels.py and carries
`library`, `a`, `b`, `c`, `transpose_a`, `transpose_b`, `batch`, `m`, `n`, `k`
(`codegen/library_gemm.py`); the runtime runs it with CuPy.
`runtime/plan_loading.py` reads it back for `fusec run OUT` (after
`runtime/out_dir.py` checked it against `runtime/plan_schema.py`).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusec.analysis.memory_plan import MemoryPlan, plan_memory
from fusec.analysis.program import (
    FunctionProgram,
    KernelLaunch,
    Program,
    TensorSpec,
)
from fusec.analysis.targets import get_target
from fusec.compiler.compile_pipeline import (
    FUSION_PASS,
    PipelineOptions,
    default_pipeline,
)
from fusec.compiler.compile_pipeline import ScheduleOptions as ScheduleOptions
from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.instrument import Instrumentation
from fusec.compiler.out_writer import OUT_FILES as OUT_FILES
from fusec.compiler.out_writer import OUT_FOLDERS as OUT_FOLDERS
from fusec.compiler.out_writer import write_out_folder
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import Insertion, PipelineRunner, parse_pipeline_spec, pipeline_text
from fusec.compiler.register_source import MeasuredRegisters, measure_registers, resolve_source
from fusec.compiler.report import ReportInputs, render_report
from fusec.compiler.source_file import source_text as source_text
from fusec.compiler.verify import reject_calls, verify_module
from fusec.runtime.out_dir import kernels_digest
from fusec.runtime.plan_schema import PLAN_FORMAT, PLAN_VERSION

if TYPE_CHECKING:
    from fusec.compiler.autotune import AutotuneOptions, TuningResult
    from fusec.compiler.library_tuning import ChoiceTuner

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class CompiledArtifacts:
    """Everything a compile produces, in memory; `write_out` stores it."""

    source_name: str
    module: ModuleOp
    program: Program
    memory: dict[str, MemoryPlan]
    model_mlir: str
    kernels_py: str
    plan: dict[str, Any]
    report_md: str
    constants: dict[str, np.ndarray] = field(default_factory=dict[str, np.ndarray])
    tuning: TuningResult | None = None  # `--autotune`: what was measured


GC_YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections while compiling (Python's
default is 700): a compile allocates millions of IR objects that live until it
ends, and re-scanning them cost about a fifth of a 10,000-op compile."""


def _fewer_collections(fn: Callable[P, R]) -> Callable[P, R]:
    """Run `fn` with `GC_YOUNG_THRESHOLD`, restoring the thresholds after."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        previous = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *previous[1:])
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*previous)

    return wrapper


@_fewer_collections
def compile_model(
    source: str | Path,
    fusion: bool = True,
    target: str = "auto",
    ptx_info: bool = False,
    plugins: list[str] | None = None,
    sources: dict[str, str] | None = None,
    check_precision: bool = False,
    schedule: ScheduleOptions | None = None,
    register_source: str = "auto",
    fold_constants: bool = True,
    pipeline: str | None = None,
    insertions: Sequence[Insertion] = (),
    instrument: Instrumentation | None = None,
    autotune: AutotuneOptions | bool | None = None,
    source_name: str | None = None,
) -> CompiledArtifacts:
    """Compile a model (its text or a path) into the artifacts of OUT; raises
    `FusecError` for bad input. `sources` receives the text read, by file name,
    so that errors can quote the offending line. `check_precision` runs the
    `check-precision` pass after fusion; `schedule` carries `--max-registers`,
    `--shared-memory-limit` and `--gemm` (register-budget, tile-and-promote).
    `ptx_info` measures each kernel's registers and spills from
    `register_source` (`auto`, `ptxas` or `gpu`; `--register-source`).
    `fold_constants=False` skips `fold-constants` (`--no-fold-constants`).
    `pipeline` (a spec, `-p`) replaces the default pipeline those options
    shape; `insertions` add passes to it; `instrument` dumps IR and times.
    `autotune` times candidate schedules on the GPU (`compiler/autotune.py`;
    True: the default options). `source_name`, when given, says that `source`
    is the text, read already, and names it in messages (the command line
    reads a file once, to look it up in the program cache)."""
    instrument = instrument or Instrumentation()
    text, name = (str(source), source_name) if source_name is not None \
        else source_text(source)
    if sources is not None:
        sources[name] = text
    if ptx_info:
        resolve_source(register_source)  # a bad or unavailable source fails before compiling
    registry = make_registry(plugins or [])
    spec = pipeline if pipeline is not None else default_pipeline(registry, PipelineOptions(
        fusion, target, check_precision, fold_constants, schedule or ScheduleOptions()))
    passes = parse_pipeline_spec(registry, spec, insertions)
    instrument.check_names(passes)
    if pipeline is not None:
        target, fusion = pipeline_target(passes, target), FUSION_PASS in spec_names(passes)
    profile = get_target(target)  # `auto` is resolved here, once, for every pass
    ctx = make_context()
    with instrument.timer.timed("(parse and verify)"):
        module = parse_module(ctx, text, name)
        verify_module(module)
        reject_calls(module)
    options: AutotuneOptions | None = None
    choices: ChoiceTuner | None = None
    made = None
    if autotune:
        from fusec.compiler.autotune import AutotuneOptions, make_timer
        from fusec.compiler.library_tuning import ChoiceTuner

        options = autotune if isinstance(autotune, AutotuneOptions) else AutotuneOptions()
        made = make_timer(options, profile)
        # library against own is timed inside tile-and-promote, where it is chosen
        choices = ChoiceTuner(made, profile, options.tuning_cache(), options.noise_margin,
                              options.quiet)
    from fusec.scheduling.library_tuning import tuning_library_choices

    tuner = choices
    if tuner is None and (schedule or ScheduleOptions()).library_timing:
        from fusec.compiler.library_clock import measured_library_calls
        from fusec.runtime.tuning_cache import TuningCache

        tuner = measured_library_calls(profile, TuningCache.user())
    with tuning_library_choices(tuner):
        PipelineRunner(ctx, passes, instrument=instrument).run(module)
    tuning = None
    model_module = module.clone() if autotune else None  # the model-only program, untuned
    if options is not None and choices is not None:
        from fusec.compiler.autotune import autotune as run_autotune

        with instrument.timer.timed("(autotuning)"):
            limit = (schedule or ScheduleOptions()).shared_memory_limit \
                or profile.shared_memory_per_block
            tuning = run_autotune(module, profile, limit, options, made)
        if tuning is not None:
            tuning.choices = choices.results
    from fusec.codegen.generate import generate_program

    with instrument.timer.timed("(code generation)"):
        program = generate_program(module, profile)
    if tuning is not None and options is not None and model_module is not None:
        from fusec.compiler.whole_call import settle

        with instrument.timer.timed("(autotuning: whole call)"):
            module, program = settle(tuning, (module, program), model_module, profile, options)
    with instrument.timer.timed("(code generation)"):
        memory = {fname: plan_memory(fp) for fname, fp in program.functions.items()}
    registers = measure_registers(program, register_source) if ptx_info \
        else MeasuredRegisters()
    pass_names = spec_names(passes)
    plan, constants = build_plan(program, memory, registers)
    plan.update(source=name, target=target, fusion=fusion, passes=list(pass_names),
                pipeline=pipeline_text(passes))
    report = render_report(ReportInputs(
        source_name=name, module=module, program=program, fusion=fusion,
        fusion_pass_ran=FUSION_PASS in pass_names, target=target, passes=pass_names,
        registers=registers, pipeline=pipeline_text(passes),
    ))
    if tuning is not None and options is not None:
        from fusec.compiler.tuning_report import annotate_plan, report_section

        annotate_plan(plan, program, tuning, options.noise_margin)
        report += "\n" + report_section(tuning, options.noise_margin)
    return CompiledArtifacts(
        source_name=name, module=module, program=program, memory=memory,
        model_mlir=module_to_text(module, remarks=instrument.remarks_in_ir),
        kernels_py=program.kernels_source,
        plan=plan, report_md=report, constants=constants, tuning=tuning,
    )


def spec_names(passes: Sequence[ModulePass]) -> tuple[str, ...]:
    """The names of the passes, in order."""
    return tuple(p.name for p in passes)


def pipeline_target(passes: Sequence[ModulePass], default: str) -> str:
    """The target of a user's pipeline: the `target` option of its first pass
    that has one (form-fusion-groups, register-budget, ...), else `default`."""
    for p in passes:
        value = getattr(p, "target", None)
        if isinstance(value, str):
            return value
    return default


def build_plan(
    program: Program,
    memory: dict[str, MemoryPlan],
    registers: MeasuredRegisters | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """plan.json's dictionary and the constants (by npz key) it refers to;
    `registers` adds the measured counts to the launches they cover."""
    constants: dict[str, np.ndarray] = {}
    functions: dict[str, Any] = {}
    for name, fp in program.functions.items():
        keys: dict[str, str] = {}
        for value, array in fp.constants.items():
            keys[value] = f"c{len(constants)}"
            constants[keys[value]] = np.asarray(array)
        functions[name] = _function_json(fp, memory[name], registers or MeasuredRegisters(),
                                         keys)
    plan: dict[str, Any] = {
        "format": PLAN_FORMAT, "version": PLAN_VERSION,
        "kernels": "kernels.py", "constants_file": "constants.npz",
        "kernels_sha256": kernels_digest(program.kernels_source), "functions": functions,
    }
    return plan, constants


def _tensor(spec: TensorSpec) -> dict[str, Any]:
    return {"shape": list(spec.shape), "dtype": spec.dtype}


def _function_json(fp: FunctionProgram, memory: MemoryPlan,
                   registers: MeasuredRegisters, keys: dict[str, str]) -> dict[str, Any]:
    names = fp.input_names or fp.inputs
    return {
        "inputs": [{"name": n, "value": v, **_tensor(fp.values[v])}
                   for n, v in zip(names, fp.inputs, strict=True)],
        "outputs": [{"name": f"output_{i}", "value": v, **_tensor(fp.values[v])}
                    for i, v in enumerate(fp.outputs)],
        "launches": [_launch_json(launch, registers) for launch in fp.launches],
        "values": {v: _tensor(s) for v, s in fp.values.items()},
        "views": [{"value": w.value, "source": w.source} for w in fp.views],
        "constants": keys,
        "memory": memory.to_json(),
    }


def _launch_json(launch: KernelLaunch, registers: MeasuredRegisters) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "kernel": launch.kernel, "grid": list(launch.grid), "block": list(launch.block),
        "shared_bytes": launch.shared_bytes, "est_registers": launch.est_registers,
        "ops": list(launch.ops), "group": launch.group, "est_time_us": launch.est_time_us,
        "hbm_bytes": launch.hbm_bytes,
        "args": [{"value": a.value, "view_shape": list(a.view_shape), "writes": a.writes}
                 for a in launch.args],
    }
    if launch.library is None and launch.kernel in registers.kernels:
        entry["registers"], entry["spill_bytes"] = registers.kernels[launch.kernel]
        entry["register_source"] = registers.source
    if launch.plan is not None:
        entry["plan"] = launch.plan
    if launch.library:
        entry.update(launch.library)
    return entry


def write_out(artifacts: CompiledArtifacts, out_dir: str | Path,
              kernel_entries: Sequence[tuple[str, str, Any]] = ()) -> None:
    """Write OUT whole or not at all (`compiler/out_writer.py`): the files go
    into a temporary directory beside OUT, which then replaces OUT in one
    rename. An existing OUT is replaced only if fusec wrote it
    (`out_marker.check_replaceable`). `kernel_entries` (key, kernel,
    `KernelCode`) go to OUT/kernels (`--save-kernels`). plan.json is signed
    with the user's key (`runtime/out_signature.py`)."""

    def fill(staging: Path) -> None:
        (staging / "model.mlir").write_text(artifacts.model_mlir, encoding="utf-8")
        (staging / "kernels.py").write_text(artifacts.kernels_py, encoding="utf-8")
        (staging / "report.md").write_text(artifacts.report_md, encoding="utf-8")
        with (staging / "constants.npz").open("wb") as f:
            np.savez(f, **artifacts.constants)  # pyright: ignore[reportArgumentType]
        if kernel_entries:
            from fusec.runtime.kernel_cache import KernelStore

            store = KernelStore(staging / "kernels")
            for k, name, code in kernel_entries:
                store.store(k, name, code, strict=True)

    write_out_folder(out_dir, artifacts.plan, fill)
