"""`fusec run`: run a compiled model's kernels, optionally checked against the
NumPy reference interpreter.

```
fusec run MODEL.mlir --check                 # compile in memory, random inputs, compare
fusec run OUT --inputs in.npz --output out.npz --device gpu
fusec run OUT --registers                    # + registers per kernel on the GPU
fusec run OUT --profile --roofline r.svg     # + each launch timed, and a roofline picture
```

- MODEL_OR_OUT: a `.mlir` file (compiled in memory; `--no-fusion`, `--target`
  apply) or a directory `fusec MODEL -o OUT` wrote (plan.json, kernels.py,
  constants.npz and model.mlir are read; nothing is recompiled).
- Inputs come from `--inputs` (an .npz keyed by argument names: `x` for `%x`)
  or are random (`random_inputs` of the reference, seeded by `--seed`).
- Outputs are saved as `output_0`, `output_1`, ... with `--output`.
- `--check` runs the reference in float64 and prints, per output, the largest
  absolute error and that error relative to the largest |reference| value.
  For a program with f16 or bf16 values, or with a value the float64
  reference computes beyond its type's largest finite value, an output may
  instead match the reference that rounds every value to its element type
  (`run_typed(..., round_stored=True)`), which a line before the outputs
  says; each output's line says which it matched.
  An output passes when `max|out - ref| <= max(tol * max|ref|, floor)` (1
  instead of max|ref| when the reference is all zeros), with `tol` from
  `element_types.tolerance_of` the output's dtype and `floor` that many unit roundoffs
  (`ABSOLUTE_FLOOR_ROUNDOFFS`) of it; integer and boolean outputs must match exactly; NaN and
  infinities must appear in the same places. Any failure exits with 1.
- `--registers` prints, after the run, each kernel's estimated registers
  beside the registers, local memory (spills) and static shared memory the
  driver reports for the variant numba compiled for this run (GPU only; a
  note on the simulator, which compiles no machine code).
- `--profile` times each launch of one more call after the run, beside the
  cost model's estimate, against the copy bandwidth measured in the same run
  (`compiler/run_profile.py`); `--roofline FILE.svg` (which implies it) also
  draws the launches on a roofline. In the simulator the times are the
  host's, with a note.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp

from fusec.analysis.diagnostics import FusecError, counted, escape_controls
from fusec.compiler.arg_parser import FusecArgumentParser
from fusec.compiler.arg_types import non_negative_int
from fusec.dialects.element_types import HALF_NAMES, tolerance_of, unit_roundoff_of
from fusec.dialects.nn_base import element_type_name
from fusec.runtime.launch_timer import PROFILE_CALLS

# Relative tolerance (against max |reference|) per output dtype for --check:
# float32 kernels may reorder sums and use fused multiply-adds, so they differ
# from a float64 oracle by a few float32 ulps times the reduction depth. A
# GPT-2 block at full size (K = 3072 after K = 768, random weights) differs by
# 1.7e-4 on the H200, fused or not, which sets the float32 bound.
# The tolerances are `dialects.element_types` rows (`tolerance_of`).
# Absolute floor of the --check bound, in unit roundoffs of the output dtype:
# an output whose values are all near zero (gelu(-7): 0 in float32, -2.6e-10
# in float64) is computed from values of order one, so its error is a few
# roundoffs of those, however small max |reference| is.
ABSOLUTE_FLOOR_ROUNDOFFS = 4


def build_parser() -> argparse.ArgumentParser:
    """The arguments of `fusec run`."""
    p = FusecArgumentParser(prog="fusec run", description="Run a compiled model's kernels.")
    p.add_argument("model", metavar="MODEL_OR_OUT", help="a .mlir model or an OUT directory")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs keyed by argument name")
    p.add_argument("--output", metavar="OUT.npz", help="save outputs as output_0, output_1, ...")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the random inputs (default 0)")
    p.add_argument("--check", action="store_true",
                   help="compare with the reference interpreter; exit 1 over tolerance")
    p.add_argument("--device", choices=["auto", "gpu", "sim"], default="auto",
                   help="where kernels run (default auto: the GPU if any, else the simulator)")
    p.add_argument("--function", metavar="NAME", help="the entry function (default: the first)")
    p.add_argument("--no-fusion", action="store_true", help="one kernel per op (.mlir only)")
    p.add_argument("--target", default="auto", metavar="NAME", help="GPU profile (.mlir only)")
    p.add_argument("--registers", action="store_true",
                   help="after the run, print each kernel's registers and local memory on "
                   "the GPU beside the estimate (GPU only)")
    p.add_argument("--profile", action="store_true",
                   help="after the run, time each kernel launch of one call on the device "
                   f"(the median of {PROFILE_CALLS} calls after a warm-up call) and the "
                   "device's copy bandwidth, and print per kernel the time beside the "
                   "estimate, the bytes moved, the bandwidth as a fraction of the copy "
                   "floor, flops and FLOP/s, and whether it is memory-bound (in the "
                   "simulator: the simulator's times, which say nothing of a GPU)")
    p.add_argument("--roofline", metavar="FILE.svg",
                   help="with --profile (implied): also write the kernels on a roofline "
                   "(log-log, the measured copy roof and the target's compute roof) as an "
                   "SVG a browser opens")
    p.add_argument("--no-graphs", action="store_true",
                   help="launch the kernels one by one instead of replaying a captured CUDA "
                   "graph (which repeated calls use on a GPU with CuPy)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar while kernels are compiled")
    p.add_argument("--trust-modified-kernels", action="store_true",
                   help="run an OUT whose kernels.py was edited after compiling (it no "
                   "longer matches the digest in plan.json)")
    p.add_argument("--traceback", action="store_true", help=argparse.SUPPRESS)
    return p


@dataclass
class _Loaded:
    """A model ready to run, and the IR its inputs and reference come from."""

    model: object  # CompiledModel (imported lazily)
    module: ModuleOp | None
    compiled: ModuleOp | None = None  # the IR after the pipeline (flops for --profile)
    target: str = "auto"  # the profile the model was compiled for


def main(argv: list[str]) -> int:
    """Entry point of `fusec run`; raises `FusecError` for bad input."""
    args = build_parser().parse_args(argv)
    if args.output:
        _refuse_overwriting_inputs(args.output, args.model, args.inputs)
    if args.roofline is not None:
        from fusec.compiler.run_profile import check_roofline_path

        check_roofline_path(args.roofline, _given_inputs(args.model, args.inputs), args.output)
    from fusec.runtime.device import print_held_notice, select_device
    from fusec.runtime.progress import set_quiet

    set_quiet(args.quiet)
    # Before anything imports numba.cuda; its notice waits until the input is read.
    device = select_device(args.device, notice=False)
    loaded = _load(args, device)
    from fusec.runtime.compiled_model import CompiledModel

    model = loaded.model
    assert isinstance(model, CompiledModel)
    func = _function_op(loaded.module, model.name) if loaded.module is not None else None
    inputs = _inputs(args, model, func)
    print_held_notice()
    result = model(*inputs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    print(f"ran @{escape_controls(model.name)}: "
          f"{counted(model.launches, 'kernel launch', 'kernel launches')} on {device}")
    for i, out in enumerate(outputs):
        print(f"output_{i}: {out.dtype} {tuple(out.shape)}")
    if args.output:
        _save(args.output, {f"output_{i}": o for i, o in enumerate(outputs)})
    if args.registers:
        _print_registers(model, device)
    if args.profile or args.roofline is not None:
        from fusec.compiler.run_profile import profile_call

        profile_call(model, inputs, loaded.compiled, loaded.target, args.roofline)
    if not args.check:
        return 0
    if func is None:
        raise FusecError(f"--check needs {Path(args.model) / 'model.mlir'}")
    return 0 if check_outputs(func, inputs, outputs) else 1


def _print_registers(model: object, device: str) -> None:
    """The `--registers` table, read from the kernels this run compiled."""
    from fusec.codegen.gpu_registers import usage_table
    from fusec.runtime.compiled_model import CompiledModel

    assert isinstance(model, CompiledModel)
    if device != "gpu":
        print("fusec: note: --registers needs a GPU: the simulator compiles no machine "
              "code (for ptxas's counts: fusec MODEL -o OUT --ptx-info)", file=sys.stderr)
        return
    for line in usage_table(model.signature.launches, model.executor.kernel_usage()):
        print(line)


def _load(args: argparse.Namespace, device: str) -> _Loaded:
    from fusec.runtime.compiled_model import CompiledModel, read_out

    path = Path(args.model)
    if path.is_dir():
        if args.no_fusion or args.target != "auto":
            print("fusec: note: --no-fusion and --target apply to a .mlir model; "
                  f"'{path}' is already compiled", file=sys.stderr)
        program, memory, plan = read_out(path, args.trust_modified_kernels)
        model = CompiledModel(program, memory, plan, device, args.function,
                              path / "kernels.py", graphs=False if args.no_graphs else None)
        target = str(plan.get("target", "auto"))
        if not (path / "model.mlir").exists():
            return _Loaded(model, None, target=target)
        from fusec.runtime.out_dir import out_path

        module = _parse(out_path(path, "model.mlir"))  # the IR after the pipeline
        return _Loaded(model, module, module, target)
    if not path.exists():
        raise FusecError(f"cannot read '{args.model}': no such file or directory")
    from fusec.compiler.compile import compile_model

    artifacts = compile_model(path, fusion=not args.no_fusion, target=args.target)
    model = CompiledModel(artifacts.program, artifacts.memory, artifacts.plan, device,
                          args.function, graphs=False if args.no_graphs else None)
    # The reference runs the model as written, before any pass.
    return _Loaded(model, _parse(path), artifacts.module, args.target)


def _parse(path: Path) -> ModuleOp:
    from fusec.compiler.parsing import make_context, parse_module, read_source
    from fusec.compiler.verify import verify_module

    module = parse_module(make_context(), read_source(str(path)), str(path))
    verify_module(module)
    return module


def _function_op(module: ModuleOp, name: str) -> FuncOp:
    from fusec.reference.interpreter import find_function

    try:
        return find_function(module, name)
    except ValueError as err:
        raise FusecError(str(err)) from None


def _inputs(args: argparse.Namespace, model: object, func: FuncOp | None) -> list[np.ndarray]:
    from fusec.runtime.compiled_model import CompiledModel

    assert isinstance(model, CompiledModel)
    if args.inputs:
        return read_inputs(args.inputs, model.input_names, model.name)
    if func is None:
        raise FusecError(f"random inputs need {Path(args.model) / 'model.mlir'}; "
                         "pass --inputs IN.npz")
    from fusec.reference.interpreter import random_inputs

    return random_inputs(func, seed=args.seed)


def read_inputs(path: str, names: list[str], function: str) -> list[np.ndarray]:
    """The arrays of an .npz in argument order; a missing key is an error
    naming it (shapes and dtypes are checked by the executor)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except FileNotFoundError:
        raise FusecError(f"cannot read '{path}': no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise FusecError(f"cannot read inputs '{path}': not a valid .npz ({err})") from None
    for name in names:
        if name not in arrays:
            have = ", ".join(sorted(arrays)) or "no arrays"
            raise FusecError(f"'{path}' has no array '{name}' (input of @{function}; "
                             f"it has: {have})")
    return [arrays[n] for n in names]


def _refuse_overwriting_inputs(output: str, model: str, inputs: str | None) -> None:
    """An error, before anything runs, when `--output` names the model, the
    inputs file or a file of the OUT folder being run."""
    from fusec.compiler.outputs import refuse_input_as_output

    refuse_input_as_output(output, _given_inputs(model, inputs))


def _given_inputs(model: str, inputs: str | None) -> list[str | Path | None]:
    """The files a run reads: the model, the inputs, every file of an OUT."""
    given: list[str | Path | None] = [model, inputs]
    if Path(model).is_dir():
        given += [p for p in Path(model).iterdir() if p.is_file()]
    return given


def _save(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write the .npz whole or not at all."""
    from fusec.compiler.outputs import write_atomically

    write_atomically(path, lambda f: np.savez(f, **arrays))  # pyright: ignore[reportArgumentType]


def check_outputs(func: FuncOp, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> bool:
    """Compare with the float64 reference, and with the type-rounded one
    where it applies (`_rounded_reason`); print one line per output."""
    from fusec.reference.interpreter import run_typed

    try:
        exact = run_typed(func, inputs)
        reason = _rounded_reason(func, exact.overflowed)
        rounded = run_typed(func, inputs, round_stored=True).outputs if reason else None
    except ValueError as err:
        raise FusecError(f"the reference interpreter rejected the inputs: {err}") from None
    if reason:
        print("reference: float64, and every value rounded to its element type as memory "
              f"holds it ({reason}); an output may match either")
    ok = True
    types = [element_type_name(t.element_type) for t in func.function_type.outputs.data
             if isinstance(t, TensorType)]
    for i, (out, ref) in enumerate(zip(outputs, exact.outputs, strict=True)):
        # bf16 comes back as float32 values: its tolerance is bf16's.
        dtype = "bfloat16" if i < len(types) and types[i] == "bf16" else None
        passed, line = compare(np.asarray(out), np.asarray(ref), dtype)
        if not passed and rounded is not None:
            typed_passed, typed_line = compare(np.asarray(out), rounded[i], dtype)
            if typed_passed:
                passed, line = True, (f"{typed_line}, matching the rounded reference "
                                      f"(against float64: {_verdictless(line)})")
            else:
                line += f" (rounded reference: {_verdictless(typed_line)})"
        ok &= passed
        print(f"output_{i}: {line}")
    print("check passed" if ok else "check FAILED: outputs differ from the reference")
    return ok


def _rounded_reason(func: FuncOp, overflowed: tuple[str, ...]) -> str:
    """Why `--check` also compares with the type-rounded reference ('' when
    it does not): the program has half-precision values, whose rounding the
    float64 reference does not model, or a value the float64 reference
    computes beyond its type's largest finite value (inf on a GPU)."""
    names: set[str] = set()
    for op in func.walk():
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
            if isinstance(v.type, TensorType):
                names.add(element_type_name(v.type.element_type))
    halves = sorted(names & HALF_NAMES)
    if halves:
        return f"the program has {' and '.join(halves)} values"
    if overflowed:
        more = f" and {counted(len(overflowed) - 1, 'more value')}" if len(overflowed) > 1 else ""
        whose = "their types'" if more else "its type's"
        return f"{escape_controls(overflowed[0])}{more} beyond {whose} range in float64"
    return ""


def _verdictless(line: str) -> str:
    """A `compare` sentence without its tolerance and final ok / FAIL."""
    return re.sub(r" \(tolerance [^)]*\)", "", line.rsplit(" ", 1)[0])


def _differ(n: int, noun: str) -> str:
    """`1 element differs`, `0 elements differ`."""
    return f"{counted(n, noun)} {'differs' if n == 1 else 'differ'}"


def compare(out: np.ndarray, ref: np.ndarray, dtype: str | None = None) -> tuple[bool, str]:
    """(within tolerance, a sentence with the errors) for one output, at the
    tolerance of NumPy dtype name `dtype` (default: `out`'s)."""
    if out.shape != ref.shape:
        return False, f"shape {out.shape} but the reference has {ref.shape} FAIL"
    if out.dtype.kind not in "fc":
        bad = int(np.count_nonzero(out != ref.astype(out.dtype)))
        return bad == 0, f"{_differ(bad, 'element')} (exact match required) " + (
            "ok" if bad == 0 else "FAIL")
    o, r = out.astype(np.float64), ref.astype(np.float64)
    special = ~np.isfinite(r) | ~np.isfinite(o)
    mismatched = int(np.count_nonzero(special & ~((o == r) | (np.isnan(o) & np.isnan(r)))))
    finite = ~special
    err = float(np.max(np.abs(o[finite] - r[finite]), initial=0.0))
    scale = float(np.max(np.abs(r[finite]), initial=0.0)) or 1.0
    tol = tolerance_of(dtype or out.dtype.name)
    floor = ABSOLUTE_FLOOR_ROUNDOFFS * unit_roundoff_of(dtype or out.dtype.name)
    passed = err <= max(tol * scale, floor) and mismatched == 0
    line = f"max abs err {err:.3g}, max rel err {err / scale:.3g} (tolerance {tol:g})"
    if mismatched:
        line += f", {_differ(mismatched, 'NaN/inf element')}"
    return passed, line + (" ok" if passed else " FAIL")
