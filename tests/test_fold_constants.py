"""The `fold-constants` pass computes at compile time what the program would
compute from constants on every call.

The folded values are checked against the reference interpreter on the
original program: bit for bit against `round_stored=True` in float64 (every
value rounded to its element type once, as the pass rounds it), and within
`fusec run`'s tolerances against the same program computed in float32, as the
kernels compute it. Random constants are drawn away from zero, so that no
relative error hides behind a zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp

from fusec.analysis.diagnostics import loc_of, op_error
from fusec.analysis.remarks import listening
from fusec.compiler.cli import main as fusec_main
from fusec.compiler.compile import compile_model
from fusec.compiler.driver import module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.dialects import nn
from fusec.dialects.element_types import tolerance_of
from fusec.dialects.nn_base import dense_to_numpy
from fusec.passes.decompose import DecomposePass
from fusec.passes.fold_constants import FoldConstantsPass
from fusec.passes.group_each_op import GroupEachOpPass
from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program

FIXTURES = Path(__file__).parent / "fixtures" / "onnx"


def parse(text: str, name: str = "test.mlir") -> ModuleOp:
    module = parse_module(make_context(), text, name)
    verify_module(module)
    return module


def fold(module: ModuleOp, p: FoldConstantsPass | None = None) -> list[str]:
    """Run the pass in place, verify the result; return the remarks it made."""
    lines: list[str] = []
    with listening(lines.append):
        (p or FoldConstantsPass()).apply(make_context(), module)
    verify_module(module)
    return lines


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("nn.")]


def returned_constants(module: ModuleOp) -> list[np.ndarray]:
    """The values a folded, argument-free function returns: all constants."""
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    out: list[np.ndarray] = []
    for v in ret.arguments:
        assert isinstance(v.owner, nn.ConstantOp), f"{v.owner.name} was not folded"
        out.append(dense_to_numpy(v.owner.value))
    return out


def literal(array: np.ndarray) -> str:
    """`dense<...>` text of `array` that reads back exactly."""
    body = np.array2string(array, separator=", ", threshold=1 << 30, max_line_width=1 << 30,
                           formatter={"float_kind": lambda v: repr(float(v)),
                                      "int": str})
    return f"dense<{body}>"


def tensor(shape: tuple[int, ...], dtype: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Magnitudes in [0.5, 2), random signs: never zero."""
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


# --- what folds -------------------------------------------------------------------------


BATCH_NORM = """
func.func @bn(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %gamma = nn.constant dense<[1.5, 0.75, 2.0]> : tensor<3xf32>
  %beta = nn.constant dense<[0.25, -1.0, 0.5]> : tensor<3xf32>
  %mean = nn.constant dense<[0.1, -0.2, 0.3]> : tensor<3xf32>
  %var = nn.constant dense<[0.9, 1.1, 1.7]> : tensor<3xf32>
  %y = nn.batch_norm %x, %gamma, %beta, %mean, %var {epsilon = 1.0e-05}
      : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> tensor<2x3x4x4xf32>
  func.return %y : tensor<2x3x4x4xf32>
}
"""


def test_batch_norm_chain_folds_to_one_multiply_add() -> None:
    module = parse(BATCH_NORM)
    DecomposePass().apply(make_context(), module)
    fold(module)
    # Two [3, 1, 1] vectors remain, read by the only two ops on %x.
    assert op_names(module) == ["nn.constant", "nn.constant", "nn.mul", "nn.add"]
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    (want,) = run_module(parse(BATCH_NORM), [x])
    (got,) = run_module(module, [x])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_reductions_matmul_and_layout_of_constants() -> None:
    rng = np.random.default_rng(1)
    a, b = away_from_zero(rng, (3, 5)), away_from_zero(rng, (5, 4))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    text = f"""
func.func @f() -> (tensor<3xf32>, tensor<1x5xf32>, tensor<3xf32>, tensor<3x4xf32>,
                   tensor<5x3xf32>, tensor<2x4xf32>) {{
  %a = nn.constant {literal(a32)} : tensor<3x5xf32>
  %b = nn.constant {literal(b32)} : tensor<5x4xf32>
  %s = nn.reduce_sum %a {{axes = [1]}} : (tensor<3x5xf32>) -> tensor<3xf32>
  %m = nn.reduce_mean %a {{axes = [0], keepdims = true}} : (tensor<3x5xf32>) -> tensor<1x5xf32>
  %x = nn.reduce_max %a {{axes = [-1]}} : (tensor<3x5xf32>) -> tensor<3xf32>
  %p = nn.matmul %a, %b : (tensor<3x5xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  %t = nn.transpose %a {{perm = [1, 0]}} : (tensor<3x5xf32>) -> tensor<5x3xf32>
  %c = nn.slice %p {{starts = [1, 0], limits = [3, 4]}} : (tensor<3x4xf32>) -> tensor<2x4xf32>
  func.return %s, %m, %x, %p, %t, %c
      : tensor<3xf32>, tensor<1x5xf32>, tensor<3xf32>, tensor<3x4xf32>, tensor<5x3xf32>,
        tensor<2x4xf32>
}}"""
    module = parse(text)
    fold(module)
    assert set(op_names(module)) == {"nn.constant"}
    got = returned_constants(module)
    want = run_module(parse(text), [], round_stored=True)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(got[3], a32.astype(np.float64) @ b32, rtol=1e-6)


def test_integer_boolean_and_cast_types() -> None:
    text = """
func.func @f() -> (tensor<3xi32>, tensor<i64>, tensor<3xi1>, tensor<3xf32>, tensor<3xi32>,
                   tensor<3xf16>) {
  %a = nn.constant dense<[7, -3, 2147483647]> : tensor<3xi32>
  %one = nn.constant dense<1> : tensor<i32>
  %w = nn.add %a, %one : (tensor<3xi32>, tensor<i32>) -> tensor<3xi32>
  %l = nn.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %s = nn.reduce_sum %l {axes = [0, 1]} : (tensor<2x2xi64>) -> tensor<i64>
  %gt = nn.cmp %a, %one {predicate = "gt"} : (tensor<3xi32>, tensor<i32>) -> tensor<3xi1>
  %f = nn.constant dense<[-2.75, 0.5, 3.25]> : tensor<3xf32>
  %z = nn.constant dense<-1.0> : tensor<f32>
  %sel = nn.select %gt, %f, %z : (tensor<3xi1>, tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %i = nn.cast %f : (tensor<3xf32>) -> tensor<3xi32>
  %h = nn.cast %f : (tensor<3xf32>) -> tensor<3xf16>
  func.return %w, %s, %gt, %sel, %i, %h
      : tensor<3xi32>, tensor<i64>, tensor<3xi1>, tensor<3xf32>, tensor<3xi32>, tensor<3xf16>
}"""
    module = parse(text)
    fold(module)
    w, s, gt, sel, i, h = returned_constants(module)
    # i32 wraps around as it does on the GPU; the cast truncates toward zero.
    np.testing.assert_array_equal(w, np.array([8, -2, -2147483648], np.int32))
    assert s.dtype == np.int64 and int(s) == 10
    np.testing.assert_array_equal(gt, [True, False, True])
    np.testing.assert_array_equal(sel, np.array([-2.75, -1.0, 3.25], np.float32))
    np.testing.assert_array_equal(i, np.array([-2, 0, 3], np.int32))
    assert h.dtype == np.float16
    for g, want in zip((w, s, gt, sel, i, h), run_module(parse(text), [], round_stored=True),
                       strict=True):
        np.testing.assert_array_equal(g, want)


DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_precision_matches_the_reference(dtype: str, seed: int) -> None:
    """A chain of transcendental, broadcasting, reducing and contracting ops of
    random constants: rounded once per op, as the unfused program stores."""
    rng = np.random.default_rng(seed)
    np_type = DTYPES[dtype]
    a = away_from_zero(rng, (4, 6)).astype(np_type)
    b = away_from_zero(rng, (6,)).astype(np_type)
    c = away_from_zero(rng, (6, 3)).astype(np_type)
    ta, tb, tc = tensor((4, 6), dtype), tensor((6,), dtype), tensor((6, 3), dtype)
    tr, tm, tk = tensor((4, 1), dtype), tensor((4, 3), dtype), tensor((4, 6), dtype)
    text = f"""
func.func @f() -> ({tk}, {tr}, {tm}) {{
  %a = nn.constant {literal(a)} : {ta}
  %b = nn.constant {literal(b)} : {tb}
  %c = nn.constant {literal(c)} : {tc}
  %m = nn.mul %a, %b : ({ta}, {tb}) -> {ta}
  %e = nn.exp %m : {ta}
  %ab = nn.abs %a : {ta}
  %r = nn.rsqrt %ab : {ta}
  %d = nn.div %e, %r : ({ta}, {ta}) -> {ta}
  %t = nn.tanh %d : {ta}
  %g = nn.gelu %t {{approximate = "none"}} : {ta}
  %s = nn.sigmoid %g : {ta}
  %mean = nn.reduce_mean %s {{axes = [1], keepdims = true}} : ({ta}) -> {tr}
  %p = nn.matmul %s, %c : ({ta}, {tc}) -> {tm}
  func.return %s, %mean, %p : {tk}, {tr}, {tm}
}}"""
    module = parse(text)
    fold(module)
    got = returned_constants(module)
    exact = run_module(parse(text), [], round_stored=True)
    # Kernels compute f16 and f32 in f32, f64 in f64.
    compute = np.float64 if np_type is np.float64 else np.float32
    as_kernels = run_module(parse(text), [], dtype=compute, round_stored=True)
    for g, want, kernel in zip(got, exact, as_kernels, strict=True):
        assert g.dtype == np_type
        np.testing.assert_array_equal(g, want.astype(np_type))
        assert np.all(np.isfinite(g)) and np.all(g != 0)
        tol = tolerance_of(np.dtype(np_type).name)
        scale = float(np.max(np.abs(kernel)))
        assert float(np.max(np.abs(g.astype(np.float64) - kernel))) <= tol * scale


def test_folded_constants_print_and_parse_back_exactly() -> None:
    """Long values print as hex bytes, short ones as literals, non-finite
    ones (log of -1 and 0, an f16 overflow) as hex: each reads back bit for bit."""
    rng = np.random.default_rng(3)
    long = away_from_zero(rng, (40,)).astype(np.float32)
    text = f"""
func.func @f() -> (tensor<40xf32>, tensor<3xf32>, tensor<40xf16>, tensor<3xi1>, tensor<2xf16>) {{
  %a = nn.constant {literal(long)} : tensor<40xf32>
  %e = nn.exp %a : tensor<40xf32>
  %v = nn.constant dense<[-1.0, 0.0, 2.0]> : tensor<3xf32>
  %l = nn.log %v : tensor<3xf32>
  %h = nn.cast %e : (tensor<40xf32>) -> tensor<40xf16>
  %z = nn.constant dense<0.0> : tensor<f32>
  %nan = nn.cmp %l, %z {{predicate = "ne"}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %w = nn.constant dense<[2.0, 20.0]> : tensor<2xf16>
  %o = nn.exp %w : tensor<2xf16>
  func.return %e, %l, %h, %nan, %o
      : tensor<40xf32>, tensor<3xf32>, tensor<40xf16>, tensor<3xi1>, tensor<2xf16>
}}"""
    module = parse(text)
    fold(module)
    folded = returned_constants(module)
    printed = module_to_text(module)
    assert 'dense<"0x' in printed
    again = returned_constants(parse(printed, "printed.mlir"))
    for x, y in zip(folded, again, strict=True):
        assert x.dtype == y.dtype
        assert x.tobytes() == y.tobytes()
    assert np.isnan(folded[1][0]) and folded[1][1] == -np.inf
    assert folded[4][1] == np.inf  # exp(20) overflows f16, as the kernel's store does


# --- what stays ----------------------------------------------------------------------


def test_size_guard() -> None:
    text = """
func.func @f() -> (tensor<300x300xf32>, tensor<300x300xf32>) {
  %one = nn.constant dense<1.0> : tensor<f32>
  %wide = nn.broadcast_to %one : (tensor<f32>) -> tensor<300x300xf32>
  %w = nn.constant dense<0.5> : tensor<300x300xf32>
  %neg = nn.neg %w : tensor<300x300xf32>
  func.return %wide, %neg : tensor<300x300xf32>, tensor<300x300xf32>
}"""
    module = parse(text)
    remarks = fold(module)
    # 90000 elements out of 1: kept. Out of an operand as large: folded.
    assert op_names(module) == ["nn.constant", "nn.broadcast_to", "nn.constant"]
    assert any("nn.broadcast_to (%wide) not folded: its result holds 90000 elements" in r
               for r in remarks)
    module = parse(text)
    fold(module, FoldConstantsPass(max_elements=90000))
    assert op_names(module) == ["nn.constant", "nn.constant"]
    module = parse(text)
    fold(module, FoldConstantsPass(max_elements=0))
    assert "nn.broadcast_to" in op_names(module) and "nn.neg" not in op_names(module)
    with pytest.raises(ValueError, match="max_elements must be 0 or more"):
        FoldConstantsPass(max_elements=-1)


def test_byte_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`max_bytes` bounds what a fold holds (operands and result, 8 bytes an
    element, a splat as one): past it the op stays, with a remark."""
    model = tmp_path / "m.mlir"
    model.write_text("""
func.func @f() -> (tensor<300x2xf32>, tensor<300x300xf32>) {
  %a = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = nn.broadcast_to %a : (tensor<2xf32>) -> tensor<300x2xf32>
  %e = nn.exp %b : tensor<300x2xf32>
  %s = nn.constant dense<0.5> : tensor<300x300xf32>
  %t = nn.exp %s : tensor<300x300xf32>
  func.return %e, %t : tensor<300x2xf32>, tensor<300x300xf32>
}""")
    assert fusec_main([str(model), "-p", "fold-constants{max_bytes=5000}", "--remarks"]) == 0
    out, err = capsys.readouterr()
    # 8 * (2 + 600) bytes: folded; then 8 * (600 + 600): kept; a splat: 16 bytes.
    assert "remark: folded nn.broadcast_to (%b)" in err
    assert "missed: nn.exp (%e) not folded: computing it would hold 9600 bytes, more " \
        "than max_bytes = 5000" in err
    assert "%e = nn.exp" in out and "%t = nn.constant dense<1.6487" in out
    with pytest.raises(ValueError, match="max_bytes must be 0 or more"):
        FoldConstantsPass(max_bytes=-1)


def test_constants_left_unread_are_erased_and_other_dead_code_stays() -> None:
    text = """
func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %a = nn.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %b = nn.constant dense<2.0> : tensor<f32>
  %ab = nn.mul %a, %b : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %unused = nn.constant dense<7.0> : tensor<f32>
  %dead = nn.exp %x : tensor<3xf32>
  %y = nn.add %x, %ab : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %z = nn.add %x, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y, %z : tensor<3xf32>, tensor<3xf32>
}"""
    module = parse(text)
    fold(module)
    printed = module_to_text(module)
    assert "%b = " not in printed  # read only by the folded op: erased
    assert "%a = nn.constant" in printed  # still read by %z
    assert "%ab = nn.constant dense<[2.0, 4.0, 6.0]>" in printed
    # Dead code the pass did not make is not its business.
    assert "%unused = nn.constant" in printed and "%dead = nn.exp" in printed


def test_contracts_and_refused_values_stay_with_a_remark() -> None:
    text = """
func.func @f() -> (tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<2xbf16>) {
  %a = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %n = nn.neg %a {fusion = "never"} : tensor<2xf32>
  %m = nn.exp %a {fusion = "must"} : tensor<2xf32>
  %idx = nn.constant dense<-3> : tensor<i32>
  %g = nn.gather %a, %idx {axis = 0} : (tensor<2xf32>, tensor<i32>) -> tensor<f32>
  %h = nn.cast %a : (tensor<2xf32>) -> tensor<2xbf16>
  func.return %n, %m, %g, %h : tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<2xbf16>
}"""
    module = parse(text)
    remarks = fold(module)
    assert op_names(module).count("nn.constant") == 3
    assert remarks[-1] == "remark: folded 1 op of @f into constants"
    assert remarks[:-2] == [
        'missed: nn.neg (%n) not folded: it carries fusion = "never"',
        'missed: nn.exp (%m) not folded: it carries fusion = "must"',
        "missed: nn.gather (%g) not folded: 'nn.gather': index -3 is out of range for "
        "axis 0 of size 2",
    ]


def test_only_top_level_ops_fold() -> None:
    """Inside a fusion.group a non-splat constant cannot stand; groups are left alone."""
    text = """
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %y = nn.add %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}"""
    module = parse(text)
    GroupEachOpPass().apply(make_context(), module)
    before = module_to_text(module)
    assert fold(module) == []
    assert module_to_text(module) == before


# --- locations and remarks --------------------------------------------------------------


def test_folded_constants_keep_the_source_location() -> None:
    text = """func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = nn.constant dense<[4.0, 9.0]> : tensor<2xf32>
  %s = nn.sqrt %a : tensor<2xf32>
  %y = nn.mul %x, %s : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}"""
    module = parse(text, "model.mlir")
    fold(module)
    const = next(op for op in module.walk() if isinstance(op, nn.ConstantOp))
    assert str(loc_of(const)) == "model.mlir:3:3"
    assert const.result.name_hint == "s"
    rendered = op_error(const, "a later error").render({"model.mlir": text})
    assert rendered.startswith("model.mlir:3:3: error: a later error\n")
    assert "%s = nn.sqrt %a" in rendered


def test_remarks_reach_listeners_but_not_the_module() -> None:
    module = parse(BATCH_NORM)
    DecomposePass().apply(make_context(), module)
    remarks = fold(module)
    assert remarks[0].startswith("remark: folded nn.reshape (%y_scale_bcast) into a constant "
                                 "of 3 ")
    assert remarks[-1] == ("remark: folded 9 ops of @bn into constants; erased 12 constants "
                           "nothing reads any more")
    # fusion.remarks holds fusion decisions, which the report tabulates.
    assert "fusion.remarks" not in module.attributes


# --- in the compile pipeline -----------------------------------------------------------


RETURNS_CONSTANTS = """
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = nn.constant dense<[1.0, 4.0, 9.0, 16.0]> : tensor<4xf32>
  %s = nn.sqrt %a : tensor<4xf32>
  %y = nn.add %x, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y, %s : tensor<4xf32>, tensor<4xf32>
}
"""


@pytest.mark.parametrize("fusion", [True, False])
def test_compile_folds_with_fusion_on_and_off(fusion: bool) -> None:
    art = compile_model(RETURNS_CONSTANTS, fusion=fusion, target="h200")
    passes = art.plan["passes"]
    sink = ["sink-transposes", "unmerge-broadcasts"] if fusion else []  # fusion's rewrites
    assert passes[:6 + len(sink)] == ["fold-empty", "decompose", *sink, "channels-last", "cse",
                                      "dce", "fold-constants"]
    fp = art.program.functions["f"]
    assert [launch.ops for launch in fp.launches] == [["nn.add"]]
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    y, s = run_program(art.program, "f", [x], device="sim", memory=art.memory["f"])
    np.testing.assert_array_equal(s, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(y, x + s)
    off = compile_model(RETURNS_CONSTANTS, fusion=fusion, target="h200", fold_constants=False)
    assert "fold-constants" not in off.plan["passes"]
    assert len(off.program.functions["f"].launches) == (1 if fusion else 2)


def test_cli_no_fold_constants(tmp_path: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text(RETURNS_CONSTANTS)
    assert fusec_main([str(model), "-o", str(tmp_path / "on")]) == 0
    assert fusec_main([str(model), "-o", str(tmp_path / "off"), "--no-fold-constants"]) == 0
    on = json.loads((tmp_path / "on" / "plan.json").read_text())
    off = json.loads((tmp_path / "off" / "plan.json").read_text())
    assert "fold-constants" in on["passes"] and "fold-constants" not in off["passes"]
    assert "%s = nn.constant" in (tmp_path / "on" / "model.mlir").read_text()


@pytest.mark.slow
def test_mobilenet_compiles_to_fewer_kernels_with_the_same_numbers(no_ptxas_probe: None) -> None:
    """Each imported BatchNorm's per-channel chain (5 ops) was a kernel of its
    own with fusion on, 5 kernels with fusion off; now it is two constants."""
    pytest.importorskip("onnx")
    from fusec.importers.onnx import import_model

    result = import_model(FIXTURES / "mobilenet_v2_small.onnx")
    batch_norms = result.text.count("nn.batch_norm")
    counts: dict[tuple[bool, bool], int] = {}
    chains = 0  # fused kernels that only compute BatchNorm scale/shift (siblings may share one)
    for fusion in (True, False):
        for fold_constants in (True, False):
            art = compile_model(result.text, fusion=fusion, target="h200",
                                fold_constants=fold_constants)
            launches = art.program.functions["main_graph"].launches
            counts[fusion, fold_constants] = len(launches)
            if fusion and not fold_constants:
                chains = sum(1 for launch in launches if "nn.rsqrt" in launch.ops
                             and set(launch.ops) <= {"nn.add", "nn.rsqrt", "nn.mul", "nn.sub"})
    assert 0 < chains <= batch_norms
    assert counts[True, True] == counts[True, False] - chains
    assert counts[False, True] == counts[False, False] - 5 * batch_norms
    art = compile_model(result.text, target="h200")
    fp = art.program.functions["main_graph"]
    assert not any("nn.rsqrt" in launch.ops for launch in fp.launches)
    data = np.load(FIXTURES / "mobilenet_v2_small_io.npz")
    (got,) = run_program(art.program, "main_graph", [data["x"]], device="sim",
                         memory=art.memory["main_graph"])
    (reference,) = run_module(result.module, [data["x"]], dtype=np.float32)
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, data["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_half_constants_fold_rounded_to_their_type(element: str) -> None:
    """f16 folds through NumPy's float16, bf16 through float32 rounded to
    nearest even; the folded constant is what the unfolded program computes."""
    t = f"tensor<3x{element}>"
    text = f"""
func.func @f() -> {t} {{
  %a = nn.constant dense<[1.0, 0.1, -3.0]> : tensor<3xf32>
  %h = nn.cast %a : (tensor<3xf32>) -> {t}
  %e = nn.exp %h : {t}
  func.return %e : {t}
}}"""
    module = parse(text)
    expected = run_module(parse(text), [], "f", round_stored=True)[0]
    fold(module)
    assert op_names(module) == ["nn.constant"]
    constant = next(op for op in module.walk() if isinstance(op, nn.ConstantOp))
    got = dense_to_numpy(constant.value)
    assert got.dtype == (np.float16 if element == "f16" else np.float32)
    np.testing.assert_array_equal(got, expected.astype(got.dtype))
    # The folded text reads back as the same bits.
    again = parse(module_to_text(module))
    back = next(op for op in again.walk() if isinstance(op, nn.ConstantOp))
    np.testing.assert_array_equal(dense_to_numpy(back.value), got)


@pytest.mark.parametrize(("cond", "picked", "other"), [
    ("dense<true> : tensor<4x1xi1>", "%a", "%b"),
    ("dense<[[false], [false], [false], [false]]> : tensor<4x1xi1>", "%b", "%a"),
])
def test_a_select_whose_condition_is_one_value_is_the_branch_it_picks(
        cond: str, picked: str, other: str) -> None:
    module = parse(f"""
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %c = nn.constant {cond}
  %s = nn.select %c, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}}
""")
    lines = fold(module)
    assert op_names(module) == []
    assert any(f"always picks {picked}" in line for line in lines), lines
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    assert ret.arguments[0] is func.body.block.args[0 if picked == "%a" else 1]


def test_a_select_with_a_mixed_or_broadcasting_pick_stays() -> None:
    module = parse("""
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = nn.constant dense<[[true], [false], [true], [true]]> : tensor<4x1xi1>
  %t = nn.constant dense<false> : tensor<4x1xi1>
  %s = nn.select %m, %a, %a : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = nn.select %t, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %s, %u : tensor<4x8xf32>, tensor<4x8xf32>
}
""")
    fold(module)
    assert op_names(module).count("nn.select") == 2


def causal_guard_text(s: int, rows: str = "le") -> str:
    """An attention's guard for fully masked rows, as the torch importer
    writes it: a causal mask built from two index ranges (larger than what
    it is built from, so it stays ops), reduced to "does the row keep any
    key", selecting the attention output or 0."""
    r = ", ".join(str(i) for i in range(s))
    return f"""
func.func @f(%o: tensor<2x{s}x8xf32>) -> tensor<2x{s}x8xf32> {{
  %i = nn.constant dense<[{r}]> : tensor<{s}xi64>
  %ic = nn.reshape %i : (tensor<{s}xi64>) -> tensor<{s}x1xi64>
  %j = nn.reshape %i : (tensor<{s}xi64>) -> tensor<1x{s}xi64>
  %keep = nn.cmp %j, %ic {{predicate = "{rows}"}}
      : (tensor<1x{s}xi64>, tensor<{s}x1xi64>) -> tensor<{s}x{s}xi1>
  %kf = nn.cast %keep : (tensor<{s}x{s}xi1>) -> tensor<{s}x{s}xf32>
  %any = nn.reduce_max %kf {{axes = [1], keepdims = true}}
      : (tensor<{s}x{s}xf32>) -> tensor<{s}x1xf32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %row = nn.cmp %any, %zero {{predicate = "gt"}}
      : (tensor<{s}x1xf32>, tensor<f32>) -> tensor<{s}x1xi1>
  %y = nn.select %row, %o, %zero
      : (tensor<{s}x1xi1>, tensor<2x{s}x8xf32>, tensor<f32>) -> tensor<2x{s}x8xf32>
  func.return %y : tensor<2x{s}x8xf32>
}}
"""


def test_a_select_whose_condition_constants_compute_is_decided_and_its_cone_erased() -> None:
    # 300 x 300 mask elements: more than max_elements = 65536 and than the
    # [300] range they are built from, so the mask is not folded; the guard
    # is still decided, and every op computing its condition goes with it
    module = parse(causal_guard_text(300))
    lines = fold(module)
    assert any("always picks %o" in line for line in lines), lines
    assert op_names(module) == []
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp) and ret.arguments[0] is func.body.block.args[0]


def test_a_computed_condition_that_differs_by_row_stays() -> None:
    # "lt": query 0 keeps no key, so the guard is live for that row
    module = parse(causal_guard_text(300, "lt"))
    fold(module)
    assert op_names(module).count("nn.select") == 1


def test_the_guard_costs_no_kernel_in_a_compiled_program(tmp_path: Path) -> None:
    text = causal_guard_text(300)
    (tmp_path / "g.mlir").write_text(text, encoding="utf-8")
    assert fusec_main([str(tmp_path / "g.mlir"), "-o", str(tmp_path / "out"), "--quiet",
                       "--no-cache"]) == 0
    plan = json.loads((tmp_path / "out" / "plan.json").read_text(encoding="utf-8"))
    assert plan["functions"]["f"]["launches"] == []  # the output is the input
