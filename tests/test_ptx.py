"""Generated kernels compile to PTX for Hopper (sm_90) without a GPU.

numba compiles through NVRTC in a subprocess without the simulator
(`codegen/ptx.py`); where `ptxas` is installed it reports registers and spill
bytes. This catches what the simulator cannot: code that runs as Python but
does not type-check or lower in numba.cuda (half-precision conversions,
mixed integer widths, booleans).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.codegen.generate import generate_program
from fusec.codegen.ptx import compile_program_ptx, program_signatures
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
HAS_PTXAS = shutil.which("ptxas") is not None

# Every pointwise and layout construct in one module, so one subprocess
# compiles them all: half, bool and integer element types, broadcasting, the
# chunked path, a multi-output group with a smaller result, every layout op
# (the tiled transpose included).
ALL_CONSTRUCTS = """
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %h: tensor<4x8xf16>, %i: tensor<4x8xi32>,
             %ids: tensor<3xi64>, %ids32: tensor<2xi32>, %odd: tensor<3x5xf32>,
             %big: tensor<2x64x48xf16>)
    -> (tensor<4x8xf32>, tensor<4x8xf16>, tensor<4x8xi1>, tensor<4x8xi32>, tensor<8x4xf32>,
        tensor<2x4xf32>, tensor<8x8xf32>, tensor<3x8xf32>, tensor<4x2xf32>, tensor<8xf32>,
        tensor<3x5xf32>, tensor<2x48x64xf16>) {
  %c = nn.constant dense<0.5> : tensor<f32>
  %e = nn.exp %x : tensor<4x8xf32>
  %g = nn.gelu %e {approximate = "tanh"} : tensor<4x8xf32>
  %ge = nn.gelu %g : tensor<4x8xf32>
  %cl = nn.clamp %ge {min = -1.0, max = 1.0} : tensor<4x8xf32>
  %p = nn.pow %cl, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.cmp %p, %b {predicate = "ge"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %s = nn.select %m, %p, %c : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %hh = nn.sigmoid %h : tensor<4x8xf16>
  %hc = nn.cast %s : (tensor<4x8xf32>) -> tensor<4x8xf16>
  %ha = nn.add %hh, %hc : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  %ic = nn.cast %m : (tensor<4x8xi1>) -> tensor<4x8xi32>
  %ia = nn.relu %i : tensor<4x8xi32>
  %im = nn.max %ia, %ic : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %t = nn.transpose %s {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %sl = nn.slice %s {starts = [0, 1], limits = [4, 8], strides = [2, 2]}
      : (tensor<4x8xf32>) -> tensor<2x4xf32>
  %cc = nn.concat %s, %x {axis = 0} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %ga = nn.gather %s, %ids {axis = 0} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  %gb = nn.gather %s, %ids32 {axis = 1} : (tensor<4x8xf32>, tensor<2xi32>) -> tensor<4x2xf32>
  %o = nn.neg %odd : tensor<3x5xf32>
  %bt = nn.transpose %big {perm = [0, 2, 1]} : (tensor<2x64x48xf16>) -> tensor<2x48x64xf16>
  %y:2 = fusion.group (%x, %b) {name = "fused", kind = "pointwise"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>):
    %eb = nn.exp %ba : tensor<8xf32>
    %bb = nn.broadcast_to %eb : (tensor<8xf32>) -> tensor<4x8xf32>
    %mm = nn.mul %xa, %bb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    fusion.yield %mm, %eb : tensor<4x8xf32>, tensor<8xf32>
  }
  func.return %y#0, %ha, %m, %im, %t, %sl, %cc, %ga, %gb, %y#1, %o, %bt
      : tensor<4x8xf32>, tensor<4x8xf16>, tensor<4x8xi1>, tensor<4x8xi32>, tensor<8x4xf32>,
        tensor<2x4xf32>, tensor<8x8xf32>, tensor<3x8xf32>, tensor<4x2xf32>, tensor<8xf32>,
        tensor<3x5xf32>, tensor<2x48x64xf16>
}
"""


def compile_text(text: str, name: str) -> Program:
    ctx = make_context()
    module = parse_module(ctx, text, name)
    verify_module(module)
    passes = parse_pipeline_spec(make_registry([]), "decompose,group-each-op")
    PipelineRunner(ctx, passes).run(module)
    return generate_program(module)


def check_ptx(program: Program) -> dict[str, dict[str, object]]:
    """Compile every kernel of `program`; each gets PTX with one entry, and
    (with ptxas) a register count and no spills."""
    info = compile_program_ptx(program)
    assert set(info) == set(program_signatures(program))
    for name, kernel in info.items():
        assert ".entry" in str(kernel["ptx"]), name
        if HAS_PTXAS:
            assert isinstance(kernel["registers"], int) and kernel["registers"] > 0, name
            assert kernel["spill_bytes"] == 0, name
    return info


@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_pointwise_and_layout_kernels_compile_for_sm90() -> None:
    program = compile_text(ALL_CONSTRUCTS, "all.mlir")
    info = check_ptx(program)
    assert len(info) == 21
    # Pointwise kernels take flat views, whatever the element count.
    signatures = program_signatures(program)
    assert signatures["f_g0_exp"] == [(1, "float32"), (1, "float32")]
    assert signatures["f_g11_relu"] == [(1, "int32"), (1, "int32")]
    assert signatures["f_g18_neg"] == [(1, "float32"), (1, "float32")]
    # The tiled transpose (layout kernels run on the pointwise view schedule)
    # takes flat views too, and stages its f16 tile as float32.
    assert signatures["f_g19_transpose"] == [(1, "float16"), (1, "float16")]
    assert "cuda.shared.array(" in program.kernels_source.split("def f_g19_transpose")[1]


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.mlir")), ids=lambda p: p.stem)
def test_example_kernels_compile_for_sm90(path: Path) -> None:
    try:
        program = compile_text(path.read_text(encoding="utf-8"), str(path))
    except FusecError as err:
        if "not available yet" in err.message:
            pytest.skip(err.message)
        raise
    check_ptx(program)
