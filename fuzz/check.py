"""One differential check: a program's text through fusec, fused and unfused,
in the CUDA simulator, against the NumPy reference interpreter.

Stages, in order (the first that fails names the `Outcome`):
`parse` (fusec's parser and verifier), `roundtrip` (print and parse again),
`reference`, then per mode (`fused`, `unfused`, and `fused-checked`, fusion
with `--check-precision`, for programs with f16): `compile-MODE`, `run-MODE`,
`compare-MODE`. A `FusecError` while compiling is `rejected` (a clear error,
worth a look but not a crash); any other exception is an `error`; numbers
off the reference are a `mismatch`.

Inputs come from `random_inputs` (positive where an op needs it, gather
indices in range) with the `seed`; with `edges` ("yes"), a few elements of float
inputs become 0, -0, -1, inf, -inf or NaN, with "special" many become inf,
NaN, near-overflow, denormal or -0 values (`special.py`). Kernels run in the
simulator, or on `device="gpu"`. Outputs are compared with the tolerance of
their element type (`element_types.tolerance_of`, relative to max |reference|,
plus a small absolute floor; the half type's in a program with f16 or bf16
values, since a cast to f32 keeps their error); NaN and inf positions must
match a reference's (a NaN also where a finite sum overflows). A result may
match the reference that keeps every value in float64, the type-rounded one
that rounds each stored value to its element type (as an unfused program does,
and as `fusec run --check` uses it: `reference.interpreter.run_typed`), or
that one after `decompose` (an unfused composite stores each of its steps):
fused kernels lie between them, element by element (`within_spread`).
"""

from __future__ import annotations

import re
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.dialects.element_types import HALF_NAMES, element, tolerance_of
from fusec.fuzz.special import EDGE_VALUES, edge_kind, with_edge_values

__all__ = ["EDGE_VALUES", "Outcome", "check_text", "compare", "with_edge_values"]

# Below this fraction of the tolerance times 1, errors count as zero: outputs
# whose values are all tiny (gelu of a large negative) have no scale.
ABSOLUTE_FLOOR = 1e-2


@dataclass(frozen=True)
class Outcome:
    """What happened to one program: `status` is ok, mismatch, error, rejected
    or invalid (fusec's parser or verifier refused the generated text)."""

    status: str
    stage: str = ""
    detail: str = ""

    @property
    def failed(self) -> bool:
        """Anything but ok."""
        return self.status != "ok"

    @property
    def signature(self) -> tuple[str, str, str]:
        """What must stay the same while minimizing: status, stage and the
        error's kind (its first word)."""
        return self.status, self.stage, self.detail.split(":")[0].split(" ")[0]


def check_text(text: str, seed: int = 0, edges: bool | str = False,
               device: str = "sim") -> Outcome:
    """Run every stage on `text` (one function); the first failure, or ok.
    `edges`: False / "no", True / "yes" or "special" (`special.py`)."""
    try:
        module = parse_module(make_context(), text, "fuzz.mlir")
        verify_module(module)
    except FusecError as err:
        return Outcome("invalid", "parse", err.render())
    printed = module_to_text(module)
    try:
        again = module_to_text(parse_module(make_context(), printed, "printed.mlir"))
        # xDSL's parser drops a `_<digits>` suffix from names its printer may
        # have written (`%_4_5` prints back as `%_4`, then as `%0`): a name may
        # change once, the program may not, and the third print must be the second.
        third = module_to_text(parse_module(make_context(), again, "again.mlir"))
    except Exception as err:
        return Outcome("error", "roundtrip", one_line(err))
    if third != again or _unnamed(again) != _unnamed(printed):
        return Outcome("error", "roundtrip", "printing the parsed program is not stable")
    from fusec.reference.interpreter import find_function, random_inputs

    func = find_function(module)
    inputs = random_inputs(func, seed)
    kind = edge_kind(edges)
    if kind != "no":
        inputs = with_edge_values(inputs, seed, kind)
    try:
        references = reference_outputs(module, printed, inputs)
    except Exception as err:
        return Outcome("error", "reference", one_line(err))
    half = half_type(text)
    modes = ["fused", "unfused"] + (["fused-checked"] if half else [])
    for mode in modes:
        outcome = _check_mode(text, mode, func.sym_name.data, inputs, references, half,
                              device)
        if outcome.failed:
            return outcome
    return Outcome("ok")


def reference_outputs(module: ModuleOp, text: str,
                      inputs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """The outputs a kernel may match: the float64 reference of `module`, the
    one rounding every stored value to its type, that one after `decompose`
    of `text` (every step of a composite stored), as unfused kernels store
    them, and the rounded one computed in float32, as kernels compute: a sum
    or a dot product whose partial results pass float32's range is inf or NaN
    there (inf - inf) where float64 stays finite."""
    from fusec.reference.interpreter import find_function, run_typed

    with warnings.catch_warnings():  # NumPy's "Mean of empty slice" and kin
        warnings.simplefilter("ignore", RuntimeWarning)
        return [run_typed(find_function(m), inputs, round_stored=r, dtype=d).outputs
                for m, r, d in ((module, False, np.float64), (module, True, np.float64),
                                (_decomposed(text), True, np.float64),
                                (module, True, np.float32))]


def match_outputs(got: list[np.ndarray], references: list[list[np.ndarray]], half: str,
                  stage: str) -> Outcome:
    """ok when every output matches one of `references` (`compare`), else the
    first mismatch. A value computed in the half type `half` (or '') and cast
    to f32 carries that type's error."""
    floor = element(half).tolerance if half else 0.0
    for i, g in enumerate(got):
        problems = [compare(np.asarray(g), ref[i], floor) for ref in references]
        if all(problems) and not within_spread(np.asarray(g), [ref[i] for ref in references],
                                               floor):
            return Outcome("mismatch", f"compare-{stage}", f"output {i}: {problems[0]}")
    return Outcome("ok")


def within_spread(got: np.ndarray, wants: list[np.ndarray], min_tolerance: float = 0.0) -> bool:
    """Whether `got` matches the references `wants` element by element where
    they disagree among themselves. A fused kernel skips some roundings the
    type-rounded references keep and keeps others, so an element may match no
    single reference: it is accepted within the references' range there,
    widened by that range and the type's tolerance (an ill-conditioned
    step, such as a layer norm over 3 nearly equal values, spreads the
    references as far as it spreads the kernel's result). A NaN is accepted
    where the float64 reference (`wants[0]`) is finite and a reference
    passes the type's range: a sum that overflows is inf or NaN (inf - inf)
    depending on its order and on fused multiply-adds. Other NaN and inf
    positions must match one reference."""
    if got.dtype.kind != "f" or any(w.shape != got.shape for w in wants):
        return False
    with np.errstate(all="ignore"):
        ws = np.stack([w.astype(got.dtype).astype(np.float64) for w in wants])
        g = got.astype(np.float64)
        # finite in float64, past the type's range in some reference (itself, or
        # a partial sum of the one computed in float32)
        overflow = np.isfinite(wants[0].astype(np.float64)) & np.any(np.isinf(ws), axis=0)
        finite = np.isfinite(ws)
        nan_ok = np.isnan(g) & (np.any(np.isnan(ws), axis=0) | overflow)
        inf_ok = np.isinf(g) & np.any(ws == g, axis=0)
        number = np.isfinite(g) & np.any(finite, axis=0)
        if not np.all(nan_ok | inf_ok | number):
            return False
        lo = np.min(np.where(finite, ws, np.inf), axis=0)[number]
        hi = np.max(np.where(finite, ws, -np.inf), axis=0)[number]
        off = np.maximum(np.maximum(lo - g[number], g[number] - hi), 0.0)
        scale = float(np.max(np.abs(ws[finite]), initial=0.0))
    tol = max(tolerance_of(got.dtype.name), min_tolerance)
    return bool(np.all(off <= (hi - lo) + tol * max(scale, ABSOLUTE_FLOOR)))


def half_type(text: str) -> str:
    """The narrowest half-precision element type `text` uses, or ''."""
    found = [h for h in sorted(HALF_NAMES) if f"{h}>" in text]
    return max(found, key=lambda h: element(h).tolerance, default="")


def _unnamed(text: str) -> str:
    """`text` with every SSA name replaced by `%v`: what a renaming keeps."""
    return re.sub(r"%[A-Za-z0-9_$.\-]+", "%v", text)


def _decomposed(text: str) -> ModuleOp:
    """The program after `fold-empty` and `decompose` (as the compile job runs
    them): unfused, every op of a composite
    (layer_norm, softmax, ...) stores its result in the element type."""
    ctx = make_context()
    module = parse_module(ctx, text, "printed.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "fold-empty,decompose")).run(module)
    return module


def _check_mode(text: str, mode: str, name: str, inputs: list[np.ndarray],
                references: list[list[np.ndarray]], half: str, device: str) -> Outcome:
    from fusec.compiler.compile import compile_model
    from fusec.runtime.executor import run_program

    try:
        artifacts = compile_model(text, fusion=mode != "unfused",
                                  check_precision=mode == "fused-checked")
    except FusecError as err:
        return Outcome("rejected", f"compile-{mode}", err.message.splitlines()[0])
    except Exception as err:
        return Outcome("error", f"compile-{mode}", one_line(err))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            got = run_program(artifacts.program, name, [a.copy() for a in inputs], device=device)
    except Exception as err:
        return Outcome("error", f"run-{mode}", one_line(err))
    return match_outputs(got, references, half, mode)


def compare(got: np.ndarray, want: np.ndarray, min_tolerance: float = 0.0) -> str:
    """'' when `got` matches the reference `want`, else what differs; the
    tolerance is that of got's element type, at least `min_tolerance`."""
    if got.shape != want.shape:
        return f"shape {got.shape}, reference {want.shape}"
    if got.dtype.kind not in "fc":
        bad = int(np.count_nonzero(got != want.astype(got.dtype)))
        return f"{bad} element(s) differ" if bad else ""
    with np.errstate(all="ignore"):
        w = want.astype(got.dtype).astype(np.float64)  # overflow in the output type is inf
    g = got.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return "NaN " + _at(g, w, np.isnan(g) != np.isnan(w))
    inf_g, inf_w = np.where(np.isinf(g), g, 0), np.where(np.isinf(w), w, 0)
    if not np.array_equal(inf_g, inf_w):
        return "inf " + _at(g, w, inf_g != inf_w)
    finite = np.isfinite(w)
    err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0))
    scale = float(np.max(np.abs(w[finite]), initial=0.0))
    tol = max(tolerance_of(got.dtype.name), min_tolerance)
    if err > tol * max(scale, ABSOLUTE_FLOOR):
        return f"max abs err {err:.3g} over {tol:g} x max|ref| {scale:.3g}"
    return ""


def _at(g: np.ndarray, w: np.ndarray, differs: np.ndarray) -> str:
    """`at (0, 2): got 1.0, reference nan` for the first element that differs."""
    i = tuple(int(k) for k in np.argwhere(differs)[0])
    return f"at {i}: got {g[i]!r}, reference {w[i]!r}"


def one_line(err: BaseException) -> str:
    """`TypeError: message (file.py:123)`: the exception and where it came from."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    message = " ".join(str(err).split())[:300]
    return f"{type(err).__name__}: {message}{where}"
