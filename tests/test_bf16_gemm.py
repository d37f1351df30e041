"""bf16 library GEMMs: the plan takes cuBLAS (`cublas_gemm_ex_bf16`) for a
bf16 matmul, and the runtime's cublasGemmEx calls (column-major, on the
uint16 buffers' pointers) compute the right product.

On the CPU a stand-in for CuPy's cuBLAS bindings reads and writes the
simulator's buffers through the very pointers and leading dimensions the
runtime passes, with cuBLAS's column-major semantics, accumulating in f32
and rounding to bf16 as CUBLAS_COMPUTE_32F with CUDA_R_16BF C does."""

from __future__ import annotations

import ctypes
import sys
import types
from typing import Any

import numpy as np
import pytest

from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import bf16_bits, bf16_values, element
from fusec.reference.interpreter import (
    find_function,
    random_inputs,
    round_to_element_type,
    run_module,
)
from fusec.runtime import bf16_gemm
from fusec.runtime.bf16_gemm import CUBLAS_COMPUTE_32F, CUDA_R_16BF, gemm_ex_calls
from fusec.runtime.executor import run_program
from fusec.scheduling import gemm_choice as gemm_choice_module


def _program(x: str, w: str, out: str, perm: bool, bias: str) -> str:
    """`gelu(x @ w(^T) + b)` in bf16, shapes as MLIR dims ("2x8x16")."""
    t = lambda s: f"tensor<{s}xbf16>"  # noqa: E731
    wt_shape = "x".join(reversed(w.split("x"))) if perm else w
    lines = [f"func.func @f(%x: {t(x)}, %w: {t(w)}, %b: {t(bias)}) -> {t(out)} {{"]
    operand = "%w"
    if perm:
        lines.append(f"  %wt = nn.transpose %w {{perm = [1, 0]}} : ({t(w)}) -> {t(wt_shape)}")
        operand = "%wt"
    lines += [
        f"  %m = nn.matmul %x, {operand} : ({t(x)}, {t(wt_shape)}) -> {t(out)}",
        f"  %s = nn.add %m, %b : ({t(out)}, {t(bias)}) -> {t(out)}",
        f"  %g = nn.gelu %s : {t(out)}",
        f"  func.return %g : {t(out)}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _column_major(ptr: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The rows x cols column-major bf16 matrix at `ptr` with leading
    dimension `ld`, as a writable uint16 view."""
    assert ld >= max(rows, 1)
    raw = np.ctypeslib.as_array((ctypes.c_uint16 * (ld * (cols - 1) + rows)).from_address(ptr))
    return np.lib.stride_tricks.as_strided(raw, (rows, cols), (2, 2 * ld))


def _scalar(ptr: int) -> float:
    return float(ctypes.c_float.from_address(ptr).value)


class FakeCublas:
    """cublasGemmEx / cublasGemmStridedBatchedEx over host memory."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.mode = 1  # CUBLAS_POINTER_MODE_DEVICE: the runtime must switch to host

    def getPointerMode(self, handle: int) -> int:
        return self.mode

    def setPointerMode(self, handle: int, mode: int) -> None:
        self.mode = mode

    def gemmEx(self, handle: int, ta: int, tb: int, m: int, n: int, k: int, alpha: int,
               a: int, atype: int, lda: int, b: int, btype: int, ldb: int, beta: int,
               c: int, ctype: int, ldc: int, compute: int, algo: int) -> None:
        assert (atype, btype, ctype, compute) == (CUDA_R_16BF,) * 3 + (CUBLAS_COMPUTE_32F,)
        assert self.mode == bf16_gemm.CUBLAS_POINTER_MODE_HOST  # alpha, beta: host pointers
        self.calls.append("gemmEx")
        self._one(ta, tb, m, n, k, _scalar(alpha), a, lda, b, ldb, _scalar(beta), c, ldc)

    def gemmStridedBatchedEx(self, handle: int, ta: int, tb: int, m: int, n: int, k: int,
                             alpha: int, a: int, atype: int, lda: int, sa: int, b: int,
                             btype: int, ldb: int, sb: int, beta: int, c: int, ctype: int,
                             ldc: int, sc: int, count: int, compute: int, algo: int) -> None:
        assert (atype, btype, ctype, compute) == (CUDA_R_16BF,) * 3 + (CUBLAS_COMPUTE_32F,)
        assert self.mode == bf16_gemm.CUBLAS_POINTER_MODE_HOST
        self.calls.append(f"gemmStridedBatchedEx x{count}")
        for i in range(count):
            self._one(ta, tb, m, n, k, _scalar(alpha), a + 2 * i * sa, lda, b + 2 * i * sb,
                      ldb, _scalar(beta), c + 2 * i * sc, ldc)

    @staticmethod
    def _one(ta: int, tb: int, m: int, n: int, k: int, alpha: float, a: int, lda: int,
             b: int, ldb: int, beta: float, c: int, ldc: int) -> None:
        op_a = _column_major(a, k, m, lda).T if ta else _column_major(a, m, k, lda)
        op_b = _column_major(b, n, k, ldb).T if tb else _column_major(b, k, n, ldb)
        out = _column_major(c, m, n, ldc)
        acc = alpha * (bf16_values(op_a).astype(np.float64) @ bf16_values(op_b)).astype(
            np.float32)
        if beta:
            acc = acc + beta * bf16_values(out)
        out[...] = bf16_bits(acc.astype(np.float32))


class _Buffer:
    """A CuPy array stand-in: the simulator array's memory and shape."""

    def __init__(self, a: Any) -> None:
        self.host = np.asarray(a)
        self.shape = self.host.shape
        self.data = types.SimpleNamespace(ptr=self.host.ctypes.data)


@pytest.fixture
def fake_cublas(monkeypatch: pytest.MonkeyPatch) -> FakeCublas:
    """CuPy replaced by a module whose cuBLAS is `FakeCublas`."""
    cublas = FakeCublas()
    fake = types.ModuleType("cupy")
    fake.asarray = _Buffer  # type: ignore[attr-defined]
    fake.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        ExternalStream=None, cublas=cublas,
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    return cublas


def _check(text: str, mode: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Compile `text` with `--gemm mode`, run it in the simulator, compare
    with the reference interpreter within bf16's tolerance."""
    # the plain gemmEx path: the epilogue stays out of the call (cuBLASLt is
    # tests/test_library_epilogue.py's)
    art = compile_model(text, target="h200",
                        schedule=ScheduleOptions(gemm=mode, library_epilogue=False))
    reference = parse_module(make_context(), text, "t.mlir")
    func = find_function(reference, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, 3), func.function_type.inputs.data, strict=True)]
    assert all(np.any(x != 0) for x in inputs)
    (expected,) = run_module(reference, inputs, "f")
    (got,) = run_program(art.program, "f", inputs, device="sim")
    scale = max(float(np.max(np.abs(expected))), 1.0)
    assert float(np.max(np.abs(got - expected))) <= element("bf16").tolerance * scale
    return art.plan, art.plan["functions"]["f"]["launches"]


def test_auto_takes_the_bf16_library_gemm_at_model_sizes(fake_cublas: FakeCublas) -> None:
    """The cost model (auto) prices cuBLAS's bf16 tensor-core rate: a GPT-2
    sized MLP matmul goes to the library, the plan (plan.json) names it."""
    art = compile_model(_program("512x768", "3072x768", "512x3072", True, "3072"),
                        target="h200", schedule=ScheduleOptions(library_epilogue=False))
    first, *epilogue = art.plan["functions"]["f"]["launches"]
    assert first["library"] == "cublas_gemm_ex_bf16" and first["ops"][-1] == "nn.matmul"
    assert all("library" not in e for e in epilogue)
    assert "library GEMM + epilogue" in art.report_md and "library (faster)" in art.report_md


def test_bf16_library_gemm_with_bias_gelu_epilogue(fake_cublas: FakeCublas) -> None:
    """`gelu(x @ w^T + b)`: cuBLAS computes C, one kernel the epilogue."""
    _, launches = _check(_program("8x16", "12x16", "8x12", True, "12"), "library")
    assert len(launches) == 2
    first, epilogue = launches
    assert first["library"] == "cublas_gemm_ex_bf16"
    assert (first["transpose_a"], first["transpose_b"]) == (False, True)
    assert "library" not in epilogue and "nn.gelu" in epilogue["ops"]
    assert fake_cublas.calls == ["gemmEx"]


@pytest.mark.parametrize(("x", "w", "out", "perm", "calls"), [
    ("8x16", "16x12", "8x12", False, ["gemmEx"]),
    ("2x8x16", "16x12", "2x8x12", False, ["gemmStridedBatchedEx x2"]),  # W broadcast
    ("2x8x16", "2x16x12", "2x8x12", False, ["gemmStridedBatchedEx x2"]),
    ("2x1x8x16", "3x16x12", "2x3x8x12", False, ["gemmEx"] * 6),  # not evenly spaced
])
def test_bf16_library_gemm_shapes(fake_cublas: FakeCublas, x: str, w: str, out: str,
                                  perm: bool, calls: list[str]) -> None:
    _, launches = _check(_program(x, w, out, perm, out.split("x")[-1]), "library")
    assert launches[0]["library"] == "cublas_gemm_ex_bf16"
    assert fake_cublas.calls == calls


def test_gemm_ex_calls_swap_operands_for_column_major() -> None:
    """Row-major C = A @ B^T (A 8x16, B stored 12x16) is column-major
    C^T = B @ A^T: B's buffer first, transposed, leading dimension 16."""
    spec = {"m": 8, "n": 12, "k": 16, "transpose_a": False, "transpose_b": True, "batch": []}
    (call,) = gemm_ex_calls(spec, (8, 16), (12, 16))
    assert (call.trans_first, call.trans_second) == (bf16_gemm.CUBLAS_OP_T,
                                                     bf16_gemm.CUBLAS_OP_N)
    assert (call.m, call.n, call.k, call.ld_first, call.ld_second, call.ldc) == \
        (12, 8, 16, 16, 16, 12)
    assert gemm_ex_calls({**spec, "batch": [0]}, (0, 8, 16), (12, 16)) == []


def test_run_bf16_gemm_transposed_a_with_broadcast_batch() -> None:
    """`C[i] = A^T @ B[i]` with A stored (k, m) and shared by the batch:
    one strided batched call with A's stride 0, A transposed."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((16, 8)), rng.standard_normal((3, 16, 12))
    bits = [bf16_bits(a), bf16_bits(b), np.zeros((3, 8, 12), np.uint16)]
    cublas = FakeCublas()
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        cublas=cublas, device=types.SimpleNamespace(get_cublas_handle=lambda: 1)))
    spec = {"m": 8, "n": 12, "k": 16, "transpose_a": True, "transpose_b": False, "batch": [3]}
    bf16_gemm.run_bf16_gemm(cp, spec, *(_Buffer(x) for x in bits))
    assert cublas.calls == ["gemmStridedBatchedEx x3"] and cublas.mode == 1  # restored
    expected = np.swapaxes(bf16_values(bits[0]), 0, 1) @ bf16_values(bits[1])
    np.testing.assert_allclose(bf16_values(bits[2]), expected, rtol=element("bf16").tolerance,
                               atol=element("bf16").tolerance * float(np.abs(expected).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", [False, True])
def test_gpu_bf16_library_gemm_bias_gelu(graphs: bool) -> None:
    """On the GPU, cuBLAS (CUDA_R_16BF, CUBLAS_COMPUTE_32F) + the epilogue
    kernel match the reference within bf16's tolerance, batched and not,
    launched one by one and replayed from a CUDA graph."""
    pytest.importorskip("cupy")
    import fusec

    for x, w, out, perm in (("256x768", "3072x768", "256x3072", True),
                            ("4x64x96", "96x160", "4x64x160", False)):
        text = _program(x, w, out, perm, out.split("x")[-1])
        model = fusec.compile(text, device="gpu", gemm="library", graphs=graphs)
        assert any(launch.library for launch in model.signature.launches)
        func = find_function(parse_module(make_context(), text, "t.mlir"), "f")
        inputs = [round_to_element_type(v, t) for v, t in
                  zip(random_inputs(func, 7), func.function_type.inputs.data, strict=True)]
        (expected,) = run_module(parse_module(make_context(), text, "t.mlir"), inputs, "f")
        for _ in range(2):  # the second call replays the graph
            got = np.asarray(model(*inputs))
            scale = max(float(np.max(np.abs(expected))), 1.0)
            assert float(np.max(np.abs(got - expected))) <= \
                element("bf16").tolerance * scale, (x, w)
