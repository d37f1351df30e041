"""Library GEMMs with their epilogue in the cuBLASLt call, checked on a GPU.

For every epilogue variant (bias, bias + relu, bias + tanh GELU, bias +
residual, bias + residual + relu, GELU alone, residual alone) x f32 / f16 /
bf16 x operand layout (plain, B transposed, A transposed, batched with a
shared weight, batched weights), it compiles the model with the library
forced, checks that the plan folded the epilogue, runs it (no graphs), and
prints the max error against the NumPy reference interpreter relative to
the element type's tolerance. It then runs one model under CUDA-graph
capture, checks that the graph was used, and times fc1 + bias + tanh GELU of
GPT-2 (f16, 1024 x 768 x 3072) folded against unfolded.

Anything cuBLASLt refuses is named with its status (CUBLAS_STATUS_...):
a refused call outside a capture falls back to the GEMM plus a CuPy
epilogue with a warning, which this script turns into a FAIL line.

    python bench/library_epilogue_check.py          # exit status 1 on any failure
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass

import numpy as np
from library_check import compare

M, K, N, BATCH = 128, 64, 96, 3
TYPES = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Variant:
    """An epilogue after `%m = x @ w`, as MLIR lines, and the keys it folds."""

    name: str
    body: str
    keys: frozenset[str]


VARIANTS = (
    Variant("bias", "%y = nn.add %m, %b : (MN, NV) -> MN", frozenset({"bias"})),
    Variant("bias_relu", "%s = nn.add %m, %b : (MN, NV) -> MN\n%y = nn.relu %s : MN",
            frozenset({"bias", "activation"})),
    Variant("bias_gelu_tanh",
            '%s = nn.add %m, %b : (MN, NV) -> MN\n%y = nn.gelu %s {approximate = "tanh"} : MN',
            frozenset({"bias", "activation"})),
    Variant("bias_residual", "%s = nn.add %m, %b : (MN, NV) -> MN\n"
            "%y = nn.add %s, %r : (MN, MN) -> MN", frozenset({"bias", "residual"})),
    Variant("bias_residual_relu", "%s = nn.add %m, %b : (MN, NV) -> MN\n"
            "%t = nn.add %r, %s : (MN, MN) -> MN\n%y = nn.relu %t : MN",
            frozenset({"bias", "residual", "activation"})),
    Variant("gelu_tanh", '%y = nn.gelu %m {approximate = "tanh"} : MN',
            frozenset({"activation"})),
    Variant("residual", "%y = nn.add %m, %r : (MN, MN) -> MN", frozenset({"residual"})),
)
LAYOUTS = ("plain", "transpose_b", "transpose_a", "batched_shared_w", "batched_w")


def model_text(v: Variant, dt: str, layout: str) -> str:
    """`%y = epilogue(x @ w)` with x, w laid out as `layout` says."""
    def t(*dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{dt}>"

    batch = (BATCH,) if layout.startswith("batched") else ()
    mn, nv = t(*batch, M, N), t(N)
    x_shape = (K, M) if layout == "transpose_a" else (*batch, M, K)
    w_shape = {"transpose_b": (N, K), "batched_w": (BATCH, K, N)}.get(layout, (K, N))
    lines = [f"func.func @f(%x: {t(*x_shape)}, %w: {t(*w_shape)}, %b: {nv}, %r: {mn}) -> {mn} {{"]
    x, w = "%x", "%w"
    if layout == "transpose_a":
        lines.append(f"%xt = nn.transpose %x {{perm = [1, 0]}} : ({t(K, M)}) -> {t(M, K)}")
        x = "%xt"
    if layout == "transpose_b":
        lines.append(f"%wt = nn.transpose %w {{perm = [1, 0]}} : ({t(N, K)}) -> {t(K, N)}")
        w = "%wt"
    a_t = t(*batch, M, K)
    b_t = t(*((BATCH,) if layout == "batched_w" else ()), K, N)
    lines.append(f"%m = nn.matmul {x}, {w} : ({a_t}, {b_t}) -> {mn}")
    lines.append(v.body.replace("MN", mn).replace("NV", nv))
    lines += [f"func.return %y : {mn}", "}"]
    return "\n".join(lines) + "\n"


def check(v: Variant, dt: str, layout: str, graphs: bool = False) -> tuple[bool, str]:
    """Compile, run and compare one case: (passed, a line saying how it went)."""
    import fusec
    from fusec.codegen.library_gemm import EPILOGUE_KEYS

    text = model_text(v, dt, layout)
    model = fusec.compile(text, device="gpu", gemm="library", graphs=graphs)
    launches = model.signature.launches
    lib = next((la.library for la in launches if la.library), None)
    folded = frozenset(k for k in EPILOGUE_KEYS if lib and k in lib)
    if lib is None or folded != v.keys or len(launches) != 1:
        return False, (f"plan: {len(launches)} launches, folded {sorted(folded)}, "
                       f"expected 1 launch folding {sorted(v.keys)}")
    return compare(model, text, dt, graphs)


def direct_verify() -> list[str]:
    """Each epilogue through `CublasLt.verify` (no compiler): the statuses."""
    import cupy

    from fusec.runtime.cublaslt import CublasLt, epilogue_name

    lt = CublasLt(cupy)
    lines = []
    for lib in ("cublas_sgemm", "cublas_gemm_ex_f16", "cublas_gemm_ex_bf16"):
        for extra in ({"bias": "b"}, {"bias": "b", "activation": "relu"},
                      {"bias": "b", "activation": "gelu_tanh"}, {"residual": "r"},
                      {"bias": "b", "residual": "r", "activation": "gelu_tanh"}):
            spec = {"library": lib, "m": M, "n": N, "k": K, "transpose_a": False,
                    "transpose_b": True, "batch": [], **extra}
            try:
                err = lt.verify(spec, (M, K), (N, K), 0)
                lines.append(f"PASS direct {lib} {epilogue_name(spec)}: max rel err {err:.3g}")
            except Exception as e:  # every failure is reported, none stops the run
                lines.append(f"FAIL direct {lib} {epilogue_name(spec)}: {e}")
    return lines


def timing() -> list[str]:
    """fc1 + bias + tanh GELU of GPT-2 (f16): folded against two launches."""
    import cupy

    import fusec

    text = (
        "func.func @f(%x: tensor<1024x768xf16>, %w: tensor<768x3072xf16>, "
        "%b: tensor<3072xf16>) -> tensor<1024x3072xf16> {\n"
        "%m = nn.matmul %x, %w : (tensor<1024x768xf16>, tensor<768x3072xf16>) -> "
        "tensor<1024x3072xf16>\n"
        "%s = nn.add %m, %b : (tensor<1024x3072xf16>, tensor<3072xf16>) -> tensor<1024x3072xf16>\n"
        '%y = nn.gelu %s {approximate = "tanh"} : tensor<1024x3072xf16>\n'
        "func.return %y : tensor<1024x3072xf16>\n}\n")
    rng = np.random.default_rng(0)
    ins = [cupy.asarray(rng.standard_normal(s).astype(np.float16))
           for s in ((1024, 768), (768, 3072), (3072,))]
    lines = []
    for folded in (True, False):
        model = fusec.compile(text, device="gpu", gemm="library", library_epilogue=folded)
        for _ in range(20):
            model(*ins)
        cupy.cuda.Device().synchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(200):
            model(*ins)
        end.record()
        end.synchronize()
        us = cupy.cuda.get_elapsed_time(start, end) * 1e3 / 200
        lines.append(f"TIME fc1+bias+gelu_tanh f16 folded={folded}: {us:.1f} us per call "
                     f"({len(model.signature.launches)} launches)")
    return lines


def main() -> int:
    failed = 0
    for dt in TYPES:
        for layout in LAYOUTS:
            for v in VARIANTS:
                try:
                    ok, line = check(v, dt, layout)
                except Exception:
                    ok, line = False, traceback.format_exc(limit=4).strip().replace("\n", " | ")
                failed += not ok
                print(f"{'PASS' if ok else 'FAIL'} {dt:4} {layout:16} {v.name:20} {line}",
                      flush=True)
    try:
        ok, line = check(VARIANTS[4], "f16", "transpose_b", graphs=True)
    except Exception:
        ok, line = False, traceback.format_exc(limit=4).strip().replace("\n", " | ")
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'} graph capture f16 bias_residual_relu: {line}", flush=True)
    for section in (direct_verify, timing):
        try:
            for line in section():
                failed += line.startswith("FAIL")
                print(line, flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {section.__name__}: {traceback.format_exc(limit=4)}", flush=True)
    print(f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
