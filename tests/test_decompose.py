"""The `decompose` pass computes what the composites compute.

Every case runs the program twice through the NumPy reference interpreter, as
written and after `decompose`, on the same random inputs in float64, so any
difference is the expansion's, not rounding. The models in shared/models and
examples/ must decompose into IR that verifies and prints back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.dialects.func import FuncOp

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.passes.decompose import DecomposePass

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = Path("/work/shared/models")
# The expansion's epsilon is a constant of the element type (f32 here), the
# composite's a float64 attribute value: they differ by f32 rounding, which
# moves a normalized result by ~1e-9 relative. A wrong expansion moves it by far more.
RTOL = 1e-8
COMPOSITES = ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.rms_norm", "nn.batch_norm")


def parse(text: str, name: str = "test.mlir") -> ModuleOp:
    """Parse and verify `text` the way the driver does."""
    module = parse_module(make_context(), text, name)
    verify_module(module)
    return module


def decompose(module: ModuleOp, p: DecomposePass | None = None) -> ModuleOp:
    """Run the pass in place, verify the result, and return the module."""
    (p or DecomposePass()).apply(make_context(), module)
    verify_module(module)
    return module


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk()]


def functions(module: ModuleOp) -> list[FuncOp]:
    return [op for op in module.walk() if isinstance(op, FuncOp)]


def assert_same_numbers(text: str, rtol: float = RTOL, seed: int = 0) -> None:
    """Every function of `text` gives the same outputs before and after decompose."""
    from fusec.reference.interpreter import random_inputs, run_module

    original = parse(text)
    expanded = decompose(parse(text))
    assert not set(COMPOSITES) & set(op_names(expanded)), module_to_text(expanded)
    for func in functions(original):
        name = func.sym_name.data
        inputs = random_inputs(func, seed)
        want = run_module(original, inputs, function=name, dtype=np.float64)
        got = run_module(expanded, inputs, function=name, dtype=np.float64)
        assert len(want) == len(got)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_allclose(
                g, w, rtol=rtol, atol=rtol,
                err_msg=f"@{name} after decompose:\n{module_to_text(expanded)}",
            )


def unary_func(op: str, shape: str, attrs: str) -> str:
    t = f"tensor<{shape}xf32>"
    return f"""
func.func @f(%x: {t}) -> {t} {{
  %y = {op} %x {attrs} : {t}
  func.return %y : {t}
}}"""


# --- numerics, one composite at a time -----------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
def test_softmax_family(op: str, axis: int) -> None:
    assert_same_numbers(unary_func(op, "3x5x7", f"{{axis = {axis}}}"))


def test_softmax_default_axis_and_large_values() -> None:
    # Inputs around 1e3 overflow exp unless the max is subtracted first.
    text = """
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %c = nn.constant dense<1000.0> : tensor<f32>
  %s = nn.mul %x, %c : (tensor<4x6xf32>, tensor<f32>) -> tensor<4x6xf32>
  %y = nn.softmax %s : tensor<4x6xf32>
  %z = nn.log_softmax %s : tensor<4x6xf32>
  %r = nn.add %y, %z : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %r : tensor<4x6xf32>
}"""
    assert_same_numbers(text)


def norm_func(op: str, shape: tuple[int, ...], axis: int, n_params: int, eps: str) -> str:
    t = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    p_shape = shape[axis % len(shape):]
    p = "tensor<" + "x".join(map(str, p_shape)) + "xf32>"
    params = "".join(f", %p{i}: {p}" for i in range(n_params))
    operands = "".join(f", %p{i}" for i in range(n_params))
    types = "".join(f", {p}" for _ in range(n_params))
    return f"""
func.func @f(%x: {t}{params}) -> {t} {{
  %y = {op} %x{operands} {{axis = {axis}{eps}}} : ({t}{types}) -> {t}
  func.return %y : {t}
}}"""


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((4, 16), -1), ((2, 3, 8), -1), ((2, 3, 8), 1), ((2, 3, 8), -2), ((3, 5), 0)],
)
def test_layer_norm(shape: tuple[int, ...], axis: int) -> None:
    assert_same_numbers(norm_func("nn.layer_norm", shape, axis, 2, ", epsilon = 1.0e-03"))


@pytest.mark.parametrize(("shape", "axis"), [((4, 16), -1), ((2, 3, 8), 1), ((2, 3, 8), -1)])
def test_rms_norm(shape: tuple[int, ...], axis: int) -> None:
    assert_same_numbers(norm_func("nn.rms_norm", shape, axis, 1, ""))


def test_layer_norm_default_epsilon_is_used() -> None:
    # A near-constant row makes the variance tiny, so epsilon decides the result.
    text = """
func.func @f(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %c = nn.constant dense<1.0e-04> : tensor<f32>
  %s = nn.mul %x, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %y = nn.layer_norm %s, %g, %b : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}"""
    assert_same_numbers(text)


def batch_norm_func(shape: tuple[int, ...]) -> str:
    t = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    c = f"tensor<{shape[1]}xf32>"
    return f"""
func.func @f(%x: {t}, %s: {c}, %b: {c}, %m: {c}, %v: {c}) -> {t} {{
  %y = nn.batch_norm %x, %s, %b, %m, %v {{epsilon = 1.0e-03}} : ({t}, {c}, {c}, {c}, {c}) -> {t}
  func.return %y : {t}
}}"""


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3), (2, 3, 6), (1, 4, 2, 2, 3)])
def test_batch_norm(shape: tuple[int, ...]) -> None:
    assert_same_numbers(batch_norm_func(shape))


def test_rank4_batch_norm_uses_channel_vectors() -> None:
    module = decompose(parse(batch_norm_func((2, 3, 4, 5))))
    reshapes = [op for op in module.walk() if op.name == "nn.reshape"]
    assert [str(op.results[0].type) for op in reshapes] == ["tensor<3x1x1xf32>"] * 4
    # The per-channel algebra runs on [C, 1, 1] vectors: a single full-size mul and add.
    big = [op for op in module.walk() if op.name in ("nn.mul", "nn.add")
           and str(op.results[0].type) == "tensor<2x3x4x5xf32>"]
    assert [op.name for op in big] == ["nn.mul", "nn.add"]


def test_f16_rms_norm_close_to_composite() -> None:
    # The epsilon constant is rounded to f16, so only nearly equal.
    text = norm_func("nn.rms_norm", (4, 8), -1, 1, "").replace("f32", "f16")
    assert_same_numbers(text, rtol=1e-6)


def test_bf16_layer_norm_decomposes_and_prints() -> None:
    text = norm_func("nn.layer_norm", (4, 8), -1, 2, "").replace("f32", "bf16")
    printed = module_to_text(decompose(parse(text)))
    assert "tensor<bf16>" in printed
    assert "nn.layer_norm" not in op_names(parse(printed))


# --- what the pass keeps, names and locates --------------------------------------------


def test_new_ops_carry_the_composite_location() -> None:
    text = (
        "func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
        "  %e = nn.exp %x : tensor<4x8xf32>\n"
        "  %y = nn.softmax %e : tensor<4x8xf32>\n"
        "  func.return %y : tensor<4x8xf32>\n"
        "}\n"
    )
    module = decompose(parse(text, "model.mlir"))
    lines: dict[str, set[int]] = {}
    for op in module.walk():
        loc = op.location
        if op.name.startswith("nn.") and isinstance(loc, FileLineColLoc):
            assert loc.filename.data == "model.mlir"
            lines.setdefault(op.name, set()).add(loc.line.data)
    assert lines.pop("nn.exp") == {2, 3}  # the user's exp, and the one from softmax
    assert set(lines) == {"nn.reduce_max", "nn.sub", "nn.reduce_sum", "nn.div"}
    assert all(v == {3} for v in lines.values())


def test_names_follow_the_composite_result() -> None:
    module = decompose(parse(unary_func("nn.softmax", "4x8", "")))
    printed = module_to_text(module)
    for name in ("%y_max", "%y_shifted", "%y_exp", "%y_sum", "%y = nn.div", "func.return %y"):
        assert name in printed


def test_ops_option_selects_composites() -> None:
    text = """
func.func @f(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = nn.softmax %x : tensor<4x8xf32>
  %z = nn.layer_norm %y, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.rms_norm %z, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}"""
    names = op_names(decompose(parse(text), DecomposePass(ops=("softmax", "nn.rms_norm"))))
    assert "nn.softmax" not in names and "nn.rms_norm" not in names
    assert names.count("nn.layer_norm") == 1
    assert "nn.layer_norm" not in op_names(decompose(parse(text), DecomposePass(ops=())))


def test_ops_option_from_the_command_line() -> None:
    (p,) = parse_pipeline_spec(make_registry([]), "decompose{ops=softmax,layer_norm}")
    assert isinstance(p, DecomposePass)
    assert p.selected() == ["softmax", "layer_norm"]
    with pytest.raises(FusecError, match=r"pass 'decompose'.*'ops'.*gelu"):
        parse_pipeline_spec(make_registry([]), "decompose{ops=gelu}")


def test_unknown_composite_in_python() -> None:
    with pytest.raises(ValueError, match="expected some of softmax"):
        DecomposePass(ops=("nn.matmul",))


def test_contract_and_dead_ops_are_kept() -> None:
    text = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %dead = nn.softmax %x : tensor<4x8xf32>
  %unused = nn.exp %x : tensor<4x8xf32>
  %y = nn.softmax %x {fusion = "never"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""
    names = op_names(decompose(parse(text)))
    # The dead softmax is expanded, not erased; the contracted one stays whole.
    assert names.count("nn.softmax") == 1
    assert names.count("nn.exp") == 2
    assert names.count("nn.reduce_max") == 1


# --- whole models ------------------------------------------------------------------------


def model_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.mlir")) if directory.is_dir() else []


@pytest.mark.parametrize(
    "path",
    [*model_files(SHARED_MODELS), *model_files(ROOT / "examples")],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_models_decompose_verify_and_print_back(path: Path) -> None:
    text = path.read_text()
    module = decompose(parse(text, str(path)))
    assert not set(COMPOSITES) & set(op_names(module))
    printed = module_to_text(module)
    assert module_to_text(parse(printed)) == printed


@pytest.mark.parametrize("path", model_files(ROOT / "examples"), ids=lambda p: p.name)
def test_examples_keep_their_numbers(path: Path) -> None:
    assert_same_numbers(path.read_text())
