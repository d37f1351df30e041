"""Half-precision GEMMs: the library path (cuBLAS through CuPy, f32
accumulation) for f16 (bf16: tests/test_bf16_gemm.py), and the cost model's
per-precision rates and bytes."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.analysis.cost_model import gemm_choice
from fusec.analysis.targets import TARGETS, get_target
from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import element
from fusec.reference.interpreter import (
    find_function,
    random_inputs,
    round_to_element_type,
    run_module,
)
from fusec.runtime.executor import run_program
from fusec.scheduling import gemm_choice as gemm_choice_module
from tests.fake_cupy import install_fake_cupy, out_matmul


def mlp(dtype: str) -> str:
    t = lambda s: f"tensor<{s}x{dtype}>"  # noqa: E731
    return f"""
func.func @f(%x: {t("8x16")}, %w: {t("12x16")}, %b: {t("12")}) -> {t("8x12")} {{
  %wt = nn.transpose %w {{perm = [1, 0]}} : ({t("12x16")}) -> {t("16x12")}
  %m = nn.matmul %x, %wt : ({t("8x16")}, {t("16x12")}) -> {t("8x12")}
  %s = nn.add %m, %b : ({t("8x12")}, {t("12")}) -> {t("8x12")}
  %g = nn.gelu %s : {t("8x12")}
  func.return %g : {t("8x12")}
}}
"""


def test_each_target_knows_each_precisions_rate() -> None:
    h200 = get_target("h200")
    assert h200.library_gemm_rate("f32") == 50.8e12
    assert h200.library_gemm_rate("f32", tf32=True) == 400e12
    assert h200.library_gemm_rate("f16") == h200.library_gemm_rate("bf16") == 790e12
    for target in TARGETS.values():  # tensor cores beat SIMT fp32 everywhere
        assert target.library_gemm_rate("f16") > target.library_gemm_rate("f32", tf32=True) \
            > target.library_gemm_rate("f32"), target.name


def test_half_library_gemm_is_priced_at_the_tensor_core_rate() -> None:
    h200 = get_target("h200")
    flops, n = 2.0 * 4096**3, 4096 * 4096 * 2  # f16: 2 bytes per element
    half = gemm_choice(h200, flops, 2 * n, n, 0, "auto", True, element="f16")
    single = gemm_choice(h200, flops, 4 * n, 2 * n, 0, "auto", True, element="f32")
    # 137 GFLOP at 790 TFLOP/s is 0.17 ms; at 50.8 TFLOP/s 2.7 ms.
    assert half.library and 0.17e-3 < half.t_library < 0.18e-3
    assert 2.7e-3 < single.t_library < 2.8e-3
    assert half.t_fused == pytest.approx(flops / h200.fused_gemm_flops + h200.launch_overhead)


def test_cupy_tf32_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_TF32", "1")
    assert gemm_choice_module.cupy_tf32()
    monkeypatch.setenv("CUPY_TF32", "0")
    assert not gemm_choice_module.cupy_tf32()


def test_f16_matmul_takes_the_library_gemm_and_runs_through_a_cupy_stand_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan names the f16 routine; a fake `cupy` over NumPy views of the
    simulator's arrays computes the product in f32 (as cuBLAS does with
    CUBLAS_COMPUTE_32F), the epilogue kernel reads it."""
    products: list[str] = []

    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        products.append(a.dtype.name)
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)

    install_fake_cupy(monkeypatch, out_matmul(product))
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    text = mlp("f16")
    art = compile_model(text, target="h200",  # the plain GEMM path: no cuBLASLt epilogue
                        schedule=ScheduleOptions(gemm="library", library_epilogue=False))
    first, _ = art.plan["functions"]["f"]["launches"]
    assert first["library"] == "cublas_gemm_ex_f16"
    reference = parse_module(make_context(), text, "t.mlir")
    func = find_function(reference, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, 0), func.function_type.inputs.data, strict=True)]
    (expected,) = run_module(reference, inputs, "f")
    (got,) = run_program(art.program, "f", inputs, device="sim")
    assert products == ["float16"] and got.dtype == np.float16
    scale = max(float(np.max(np.abs(expected))), 1.0)
    assert float(np.max(np.abs(got - expected))) <= element("f16").tolerance * scale
