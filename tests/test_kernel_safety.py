"""Names from the model never reach kernels.py unsanitized.

A model is untrusted input: its function names, group names and attribute
strings must not be able to put code into the generated module. kernels.py
must parse, import only math/numpy/numba, and contain nothing but `@cuda.jit`
functions whose identifiers are plain `[A-Za-z0-9_]` words (besides the fixed
prelude, which holds no model text).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fusec.analysis.program import Program
from fusec.codegen.fast_erf import fast_erf_prelude
from fusec.codegen.fast_tanh import fast_tanh_prelude
from fusec.codegen.generate import generate_program
from fusec.codegen.kernel_source import KERNEL_PRELUDE, PRELUDE_NAMES, TRIG_PRELUDE, NameTable
from fusec.codegen.mma import MMA_PRELUDE, MMA_ROW_PRELUDE
from fusec.compiler.cli import main
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module

SAFE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# llvmlite, numba.core and numba.cuda.extending: the wide-access intrinsics
# (codegen/wide_access.py), numba's own toolchain; sys: the prelude raises the
# recursion limit for numba's control-flow analysis of large kernels.
ALLOWED_IMPORTS = {"math", "numpy", "numba", "numba.types", "numba.cuda", "llvmlite",
                   "numba.core", "numba.cuda.extending", "sys"}
# The prelude's statements other than imports (the simulator's IEEE helpers).
PRELUDE_BLOCKS = {ast.dump(n) for n in
                  ast.parse(KERNEL_PRELUDE + fast_erf_prelude() + fast_tanh_prelude()
                            + fast_tanh_prelude(f32_ir=False) + TRIG_PRELUDE + MMA_PRELUDE
                            + MMA_ROW_PRELUDE).body
                  if not isinstance(n, ast.Import | ast.ImportFrom)}

# The parser does not accept quoted SSA names (`%"__import__('os')"`), so the
# hostile text goes where the syntax allows it: symbol names, group names and
# the characters MLIR permits in value names.
HOSTILE = r"""
func.func @"x(): import os"(%__import__: tensor<4x8xf32>, %b.c$d: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<8x4xf32>) {
  %y = nn.add %__import__, %b.c$d : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t = nn.transpose %y {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %y, %t : tensor<4x8xf32>, tensor<8x4xf32>
}
func.func @"x(); import os"(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = fusion.group (%x) {name = "g0\nimport os\n__import__('os').system('true')",
                          kind = "pointwise"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %r = nn.exp %a : tensor<4xf32>
    fusion.yield %r : tensor<4xf32>
  }
  func.return %e : tensor<4xf32>
}
func.func @"\"\"\"; exec('1')"(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = nn.neg %x : tensor<4xf32>
  func.return %e : tensor<4xf32>
}
"""


def compile_hostile() -> Program:
    ctx = make_context()
    module = parse_module(ctx, HOSTILE, "hostile.mlir")
    verify_module(module)
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "group-each-op")).run(module)
    return generate_program(module)


def test_kernels_parse_and_import_only_math_numpy_numba() -> None:
    source = compile_hostile().kernels_source
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= ALLOWED_IMPORTS
        elif isinstance(node, ast.ImportFrom):
            assert node.module in ALLOWED_IMPORTS
        elif ast.dump(node) not in PRELUDE_BLOCKS:
            assert isinstance(node, ast.FunctionDef), ast.dump(node)
            assert [ast.unparse(d) for d in node.decorator_list] == ["cuda.jit"]


def test_every_identifier_is_safe() -> None:
    source = compile_hostile().kernels_source
    generated = [n for n in ast.parse(source).body if ast.dump(n) not in PRELUDE_BLOCKS]
    for node in (node for top in generated for node in ast.walk(top)):
        names: list[str] = []
        if isinstance(node, ast.FunctionDef):
            names = [node.name, *(a.arg for a in node.args.args)]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        for name in names:
            assert SAFE_IDENTIFIER.fullmatch(name), name
            assert not name.startswith("__"), name
        # No string literal can carry model text into the module.
        assert not (isinstance(node, ast.Constant) and isinstance(node.value, str))


def test_hostile_text_appears_nowhere() -> None:
    source = compile_hostile().kernels_source
    # Sanitized names keep the letters (`x____import_os`) but never the
    # spaces, parentheses or quotes that would make them code.
    for fragment in ("import os", "__import__(", "exec(", "system(", '"""', "'", "\\"):
        assert fragment not in source
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("import ", "from ")):
            assert not line.startswith(" ")


def test_kernel_names_are_unique_and_launches_refer_to_them() -> None:
    program = compile_hostile()
    module = ast.parse(program.kernels_source)
    defined = [n.name for n in module.body if isinstance(n, ast.FunctionDef)]
    assert len(defined) == len(set(defined)) == 4
    launched = [la.kernel for fp in program.functions.values() for la in fp.launches]
    assert sorted(launched) == sorted(defined)
    # The model's own names stay in the plan (for messages), not in kernels.py.
    assert program.functions["x(): import os"].input_names == ["__import__", "b.c$d"]


def test_kernel_names_never_shadow_the_prelude() -> None:
    # 40 characters survive sanitizing; the rest, and the trailing
    # underscores, go: the name would be `math`, which the kernels use.
    assert NameTable().fresh("math" + " " * 40) == "math_2"
    padded = "math" + " " * 40
    text = f"""func.func @"{padded}"(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %y = nn.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}}
"""
    ctx = make_context()
    module = parse_module(ctx, text, "shadow.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "group-each-op")).run(module)
    program = generate_program(module)
    (launch,) = program.functions[padded].launches
    assert launch.kernel not in PRELUDE_NAMES
    assert f"def {launch.kernel}(" in program.kernels_source


# Hostile function and argument names around the paths that once built a
# name from expression text: a reduction dividing by a splat
# (`rcp_float32(2.0) = ...`) and a matmul reading a splat operand.
HOSTILE_SPLATS = r"""
func.func @"f\"\n__import__('os').system('x')#"(%__import__: tensor<4x8xf32>,
    %b.c$d: tensor<8x6xf32>) -> (tensor<4x8xf32>, tensor<4x6xf32>) {
  %c = nn.constant dense<2.0> : tensor<4x8xf32>
  %s = nn.softmax %__import__ {axis = 1} : tensor<4x8xf32>
  %y = nn.div %s, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %k = nn.constant dense<0.5> : tensor<8x6xf32>
  %m = nn.matmul %y, %k : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %n = nn.matmul %__import__, %b.c$d : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %z = nn.add %m, %n : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %y, %z : tensor<4x8xf32>, tensor<4x6xf32>
}
"""


@pytest.mark.parametrize("flags", [[], ["--no-fusion"]])
def test_hostile_names_with_splat_operands_compile_safely_and_run(
        tmp_path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "hostile.mlir"
    model.write_text(HOSTILE_SPLATS)
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), *flags]) == 0, capsys.readouterr().err
    source = (out / "kernels.py").read_text()
    generated = [n for n in ast.parse(source).body if ast.dump(n) not in PRELUDE_BLOCKS]
    kernels = "\n".join(ast.get_source_segment(source, n) or "" for n in generated)
    assert "def " in kernels
    for fragment in ("__import__(", "system(", "'", '"', "\\", "float32(2.0) ="):
        assert fragment not in kernels
    for node in (node for top in generated for node in ast.walk(top)):
        if isinstance(node, ast.Name):
            assert SAFE_IDENTIFIER.fullmatch(node.id) and not node.id.startswith("__"), node.id
    assert main(["run", str(out), "--check", "--device", "sim"]) == 0
    captured = capsys.readouterr()
    assert "check passed" in captured.out + captured.err
