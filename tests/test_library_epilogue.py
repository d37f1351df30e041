"""A library GEMM's epilogue folded into its cuBLASLt call (bias, residual,
relu / tanh GELU): the plans, the cost model's pricing, the option that
turns it off, and the cuBLASLt call's arguments emulated with NumPy. The
library is forced (`gemm="library"`, CuPy's availability monkeypatched)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from fusec.compiler.compile import ScheduleOptions, compile_model
from fusec.scheduling import gemm_choice as gemm_choice_module
from tests.fake_cupy import install_fake_cupy

TYPES = ("f32", "f16", "bf16")
M, K, N = 8, 16, 12

BODIES = {
    "relu": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
             "%y = nn.relu %s : T_MN", {"bias", "activation"}, 1),
    "gelu_tanh": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                  '%y = nn.gelu %s {approximate = "tanh"} : T_MN', {"bias", "activation"}, 1),
    "residual": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                 "%y = nn.add %s, %r : (T_MN, T_MN) -> T_MN", {"bias", "residual"}, 1),
    "gelu_erf": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                 "%y = nn.gelu %s : T_MN", {"bias"}, 2),
    "times_two": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                  "%c = nn.constant dense<2.0> : tensor<DT>\n"
                  "%y = nn.mul %s, %c : (T_MN, tensor<DT>) -> T_MN", {"bias"}, 2),
    # the bias sum feeds both the relu and the multiply: the fold stops after it
    "used_twice": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                   "%u = nn.relu %s : T_MN\n"
                   "%y = nn.mul %u, %s : (T_MN, T_MN) -> T_MN", {"bias"}, 2),
    # the activation comes before the residual: only relu(x @ w + b) folds
    "relu_then_residual": ("%s = nn.add %m, %b : (T_MN, T_N) -> T_MN\n"
                           "%u = nn.relu %s : T_MN\n"
                           "%y = nn.add %u, %r : (T_MN, T_MN) -> T_MN", {"bias", "activation"}, 2),
    "bias_view": ("%b2 = nn.reshape %b : (T_N) -> tensor<1xNxDT>\n"
                  "%s = nn.add %m, %b2 : (T_MN, tensor<1xNxDT>) -> T_MN\n"
                  "%y = nn.relu %s : T_MN", {"bias", "activation"}, 1),
}


def model(body: str, dt: str, batch: tuple[int, ...] = (), w_batch: tuple[int, ...] = ()
          ) -> str:
    """`%y = epilogue(x @ w)` over inputs x, w, b (N) and r (the result's shape)."""
    def t(*dims: int) -> str:
        return "tensor<" + "x".join(map(str, dims)) + f"x{dt}>"

    mn, n = t(*batch, M, N), t(N)
    text = (f"func.func @f(%x: {t(*batch, M, K)}, %w: {t(*w_batch, K, N)}, %b: {n}, "
            f"%r: {mn}) -> {mn} {{\n"
            f"%m = nn.matmul %x, %w : ({t(*batch, M, K)}, {t(*w_batch, K, N)}) -> {mn}\n"
            f"{body}\nfunc.return %y : {mn}\n}}\n")
    return (text.replace("T_MN", mn).replace("T_N", n).replace("xNx", f"x{N}x")
            .replace("DT", dt))


def plan(text: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> dict[str, Any]:
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(text, target="h200",
                        schedule=ScheduleOptions(gemm="library", **options))
    return art.plan


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("name", sorted(BODIES))
def test_folded_plan(name: str, dt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    body, keys, launches = BODIES[name]
    got = plan(model(body, dt), monkeypatch)["functions"]["f"]["launches"]
    assert len(got) == launches
    lib = got[0]
    assert "library" in lib and {"bias", "residual", "activation"} & set(lib) == keys
    assert [a["value"] for a in lib["args"]] == [
        lib["a"], lib["b"], lib["c"], *(lib[k] for k in ("bias", "residual") if k in lib)]
    if "activation" in lib:
        assert lib["activation"] == ("gelu_tanh" if name == "gelu_tanh" else "relu")
    if launches == 2:
        assert "library" not in got[1] and got[1]["args"][0]["value"] == lib["c"]


def test_what_stays_in_the_pointwise_remainder(monkeypatch: pytest.MonkeyPatch) -> None:
    launches = {n: plan(model(BODIES[n][0], "f16"), monkeypatch)["functions"]["f"]["launches"]
                for n in ("gelu_erf", "times_two", "used_twice", "relu_then_residual")}
    assert launches["gelu_erf"][1]["ops"] == ["nn.gelu"]  # erf GELU is not cuBLASLt's
    assert launches["times_two"][1]["ops"] == ["nn.mul"]
    assert launches["used_twice"][1]["ops"] == ["nn.relu", "nn.mul"]
    assert launches["relu_then_residual"][1]["ops"] == ["nn.add"]
    assert launches["relu_then_residual"][0]["ops"] == ["nn.matmul", "nn.add", "nn.relu"]


@pytest.mark.parametrize("batch, w_batch, folds", [
    ((2,), (), True), ((2,), (2,), True), ((2, 3), (1, 1), True), ((2, 3), (3,), False)])
def test_batched(batch: tuple[int, ...], w_batch: tuple[int, ...], folds: bool,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The bias is the same vector for every batch entry; an operand whose
    batch broadcasts only partly has no cuBLASLt stride: nothing folds."""
    got = plan(model(BODIES["residual"][0], "f32", batch, w_batch),
               monkeypatch)["functions"]["f"]["launches"]
    assert len(got) == (1 if folds else 2)
    assert got[0]["batch"] == list(batch) and ("bias" in got[0]) == folds


def test_option_off_restores_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """`library-epilogue=false` gives the plan of a compiler that folds nothing."""
    from fusec.analysis import library_epilogue

    text = model(BODIES["residual"][0] + "\n", "f16").replace(
        "%y = nn.add %s, %r", "%t = nn.add %s, %r").replace(
        "func.return %y", '%y = nn.gelu %t {approximate = "tanh"} : '
        f"tensor<{M}x{N}xf16>\nfunc.return %y")
    off = plan(text, monkeypatch, library_epilogue=False)
    with monkeypatch.context() as m:
        m.setattr(library_epilogue, "fold_epilogue",
                  lambda *a: library_epilogue.EpilogueFold())
        for module in ("fusec.scheduling.gemm_choice", "fusec.analysis.library_gemm_cost",
                       "fusec.codegen.library_gemm"):
            m.setattr(sys.modules[module], "fold_epilogue",
                      lambda *a: library_epilogue.EpilogueFold())
        never = plan(text, monkeypatch)
    on = plan(text, monkeypatch)
    off.pop("pipeline", None), never.pop("pipeline", None)
    assert json.dumps(off, sort_keys=True) == json.dumps(never, sort_keys=True)
    assert len(off["functions"]["f"]["launches"]) == 2
    assert len(on["functions"]["f"]["launches"]) == 1


def test_pricing_takes_the_folded_ops_as_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chooser's library time loses the epilogue kernel when all of it
    folds; fusion legality's library cost loses the second launch."""
    from fusec.analysis.library_gemm_cost import library_cost
    from fusec.analysis.remarks import RemarkCollector
    from fusec.analysis.targets import get_target
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.dialects import nn
    from fusec.dialects.nn_base import tensor_shape
    from fusec.scheduling.gemm_choice import GemmChooser

    h200 = get_target("h200")
    text = model(BODIES["gelu_tanh"][0], "f16")
    module = parse_module(make_context(), text, "t.mlir")
    ops = list(next(iter(module.ops)).body.block.ops)[:-1]
    mm = ops[0]
    assert isinstance(mm, nn.MatmulOp)
    inputs = frozenset(next(iter(module.ops)).body.block.args)

    def nbytes(v: Any) -> int:
        return int(np.prod(tensor_shape(v))) * 2

    outs = [ops[-1].results[0]]
    with_fold = library_cost(ops, inputs, outs, nbytes, "f16", h200)
    without = library_cost(ops, inputs, outs, nbytes, "f16", h200, epilogue=False)
    assert with_fold.launches == 1 and without.launches == 2
    assert with_fold.busy_time(h200) < without.busy_time(h200)

    from fusec.compiler.driver import make_registry
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec

    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    spec = 'decompose,form-fusion-groups{target="h200" gemm="fused"},group-each-op'
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    group = next(op for op in module.walk() if op.name == "fusion.group")
    mm = next(op for op in group.block.ops if isinstance(op, nn.MatmulOp))
    on = GemmChooser(h200, "library", True, RemarkCollector())
    off = GemmChooser(h200, "library", True, RemarkCollector(), epilogue=False)
    priced_on = on.price(group, mm, on.fold(group, mm))
    priced_off = off.price(group, mm, off.fold(group, mm))
    assert priced_on.t_library < priced_off.t_library
    # at least the epilogue kernel's launch is saved
    assert priced_off.t_library - priced_on.t_library >= h200.launch_overhead


def test_remark_names_the_folded_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(model(BODIES["residual"][0], "bf16"), target="h200",
                        schedule=ScheduleOptions(gemm="library"))
    assert ("the library call computes nn.add (bias), nn.add (residual) (cuBLASLt epilogue)"
            in art.report_md)


def test_plan_keys_load_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.runtime.plan_loading import program_from_plan

    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(model(BODIES["gelu_tanh"][0], "f16"), target="h200",
                        schedule=ScheduleOptions(gemm="library"))
    program, _ = program_from_plan(art.plan, art.kernels_py, art.constants)
    spec = program.functions["f"].launches[0].library
    assert spec is not None and spec["activation"] == "gelu_tanh" and "bias" in spec


def test_bad_activation_in_a_plan_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.analysis.diagnostics import FusecError
    from fusec.runtime.plan_schema import check_plan

    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    art = compile_model(model(BODIES["relu"][0], "f32"), target="h200",
                        schedule=ScheduleOptions(gemm="library"))
    check_plan(art.plan, "plan.json", lambda name: True)
    launch = art.plan["functions"]["f"]["launches"][0]
    launch["activation"] = "gelu"
    with pytest.raises(FusecError, match="activation: expected one of relu, gelu_tanh"):
        check_plan(art.plan, "plan.json", lambda name: True)
    launch["activation"], launch["bias"] = "relu", "v99"
    with pytest.raises(FusecError, match="bias: unknown value 'v99'"):
        check_plan(art.plan, "plan.json", lambda name: True)


# --- the cuBLASLt call, emulated ------------------------------------------------------------------


def _column_major(buf: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    idx = offset + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return buf[idx]


def _emulate(p: Any, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
             residual: np.ndarray | None, act: str | None) -> np.ndarray:
    """cublasLtMatmul on flat buffers: its A is our b, its B our a, D = act(AB + C + bias)
    with the bias per row of the column-major D."""
    from fusec.runtime.cublaslt import epilogue_values

    fa, fb = b.ravel(), a.ravel()
    d = np.zeros(p.count * p.d.stride if p.count > 1 else p.d.rows * p.d.cols)
    for i in range(p.count):
        ma = _column_major(fa, i * p.a.stride, p.a.rows, p.a.cols, p.a.ld)
        mb = _column_major(fb, i * p.b.stride, p.b.rows, p.b.cols, p.b.ld)
        prod = (ma.T if p.transa else ma) @ (mb.T if p.transb else mb)
        if residual is not None:
            prod = prod + _column_major(residual.ravel(), i * p.d.stride, p.d.rows, p.d.cols,
                                        p.d.ld)
        if bias is not None:
            prod = prod + bias[:, None]  # one value per row of D
        spec = {"activation": act} if act else {}
        prod = epilogue_values(np, spec, prod, None, None)
        for col in range(p.d.cols):
            d[i * p.d.stride + col * p.d.ld: i * p.d.stride + col * p.d.ld + p.d.rows] = \
                prod[:, col]
    return d


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch_a, batch_b", [((), ()), ((3,), (3,)), ((3,), ()), ((2, 3), ())])
@pytest.mark.parametrize("act", [None, "relu", "gelu_tanh"])
def test_lt_arguments_compute_the_row_major_epilogue(
        ta: bool, tb: bool, batch_a: tuple[int, ...], batch_b: tuple[int, ...],
        act: str | None) -> None:
    from fusec.runtime.cublaslt import EPILOGUES, epilogue_values, lt_problem

    rng = np.random.default_rng(5)
    m, n, k = 4, 5, 3
    batch = batch_a
    a = rng.standard_normal((*batch_a, *((k, m) if ta else (m, k))))
    b = rng.standard_normal((*batch_b, *((n, k) if tb else (k, n))))
    bias, residual = rng.standard_normal(n), rng.standard_normal((*batch, m, n))
    spec: dict[str, Any] = {"library": "cublas_sgemm", "m": m, "n": n, "k": k,
                            "transpose_a": ta, "transpose_b": tb, "batch": list(batch),
                            "bias": "v2", "residual": "v3"}
    if act:
        spec["activation"] = act
    p = lt_problem(spec, a.shape, b.shape)
    assert p.epilogue == EPILOGUES[(True, act)]
    product = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    want = epilogue_values(np, spec, product, bias, residual)
    got = _emulate(p, a, b, bias, residual, act)
    np.testing.assert_allclose(got, want.ravel(), rtol=1e-6, atol=1e-6)


def test_epilogue_values_and_status_names() -> None:
    from fusec.runtime.cublaslt import (
        alignment,
        epilogue_values,
        from_stored,
        status_name,
        to_stored,
    )

    x = np.array([-1.0, 0.0, 1.0, 3.0], np.float32)
    gelu = epilogue_values(np, {"activation": "gelu_tanh"}, x, None, None)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(gelu, want, rtol=1e-6)
    assert status_name(15) == "CUBLAS_STATUS_NOT_SUPPORTED (15)"
    assert alignment(0x1000) == 256 and alignment(0x1010) == 16
    bits = to_stored(np, np.array([1.0, 1.00390625, -2.5], np.float32), np.uint16)
    np.testing.assert_array_equal(from_stored(np, bits), [1.0, 1.0, -2.5])  # ties to even


def test_fallback_epilogue_through_a_cupy_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libcublasLt the runtime runs the GEMM, then the epilogue with
    CuPy (here NumPy), bias and residual read in the plan's argument order."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function, random_inputs, run_module
    from fusec.runtime import library_gemm
    from fusec.runtime.executor import run_program

    install_fake_cupy(monkeypatch, no_cublaslt=True)
    monkeypatch.setattr(library_gemm, "_LT_REFUSED", set())
    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    text = model(BODIES["residual"][0], "f32").replace(
        "%y = nn.add %s, %r", "%t = nn.add %r, %s").replace(
        "func.return %y", f'%y = nn.gelu %t {{approximate = "tanh"}} : tensor<{M}x{N}xf32>\n'
        "func.return %y")
    art = compile_model(text, target="h200", schedule=ScheduleOptions(gemm="library"))
    assert len(art.program.functions["f"].launches) == 1
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), 0)
    (expected,) = run_module(reference, inputs, "f")
    with pytest.warns(UserWarning, match="cuBLASLt refused"):
        (got,) = run_program(art.program, "f", inputs, device="sim")
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_compiling_loads_neither_cupy_nor_cublaslt() -> None:
    code = (
        "import sys\n"
        "from fusec.scheduling import gemm_choice\n"
        "gemm_choice.library_available = lambda: True\n"
        "from fusec.compiler.compile import ScheduleOptions, compile_model\n"
        f"art = compile_model({model(BODIES['gelu_tanh'][0], 'f16')!r}, target='h200',"
        " schedule=ScheduleOptions(gemm='library'))\n"
        "assert 'activation' in art.plan['functions']['f']['launches'][0]\n"
        "assert 'cupy' not in sys.modules and 'cupy_backends' not in sys.modules\n"
        "assert 'cublasLt' not in open('/proc/self/maps').read()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_cli_flag_keeps_the_epilogue_out(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Any) -> None:
    """`fusec --no-library-epilogue` is `library-epilogue=false` of the default
    pipeline: relu(x @ w + b) as a GEMM and an epilogue kernel, not one call."""
    from fusec.compiler.cli import main

    monkeypatch.setattr(gemm_choice_module, "library_available", lambda: True)
    src = tmp_path / "m.mlir"
    src.write_text(model(BODIES["relu"][0], "f32"))
    for flags, launches in (([], 1), (["--no-library-epilogue"], 2)):
        out = tmp_path / f"out{len(flags)}"
        assert main([str(src), "-o", str(out), "--gemm", "library", "--quiet", *flags]) == 0
        plan = json.loads((out / "plan.json").read_text())
        assert len(plan["functions"]["f"]["launches"]) == launches
    # with -p the flag has no pipeline to shape: an error naming the option
    assert main([str(src), "-p", "decompose", "--no-library-epilogue"]) == 1

