"""The register-resident row schedule (`codegen/reduction_registers.py`):
numbers in the simulator (shared-memory tree branch) against the reference,
and the GPU branch (warp shuffles) compiled to sm_90 PTX without a GPU."""

from __future__ import annotations

import re
import shutil

import pytest

from fusec.codegen.ptx import compile_program_ptx
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import check_program

HAS_PTXAS = shutil.which("ptxas") is not None

SOFTMAX = """
func.func @f(%x: tensor<{r}x{n}xf32>) -> tensor<{r}x{n}xf32> {{
  %y = nn.softmax %x {{axis = -1}} : tensor<{r}x{n}xf32>
  func.return %y : tensor<{r}x{n}xf32>
}}"""

LAYERNORM = """
func.func @f(%x: tensor<3x{n}xf32>, %r: tensor<3x{n}xf32>, %g: tensor<{n}xf32>,
             %b: tensor<{n}xf32>) -> tensor<3x{n}xf32> {{
  %h = nn.add %x, %r : (tensor<3x{n}xf32>, tensor<3x{n}xf32>) -> tensor<3x{n}xf32>
  %y = nn.layer_norm %h, %g, %b {{axis = -1, epsilon = 1.0e-05}}
      : (tensor<3x{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>) -> tensor<3x{n}xf32>
  %o = nn.gelu %y : tensor<3x{n}xf32>
  func.return %o : tensor<3x{n}xf32>
}}"""

FUSE = "decompose,form-fusion-groups"


def test_softmax_long_row_spans_warps() -> None:
    # 4096 elements: 128 lanes x 32 elements, four warps per row.
    program = check_program(SOFTMAX.format(r=2, n=4096), pipeline=FUSE)
    launch = program.functions["f"].launches[0]
    assert launch.block == (128, 1, 1) and launch.grid == (2, 1, 1)
    # 32 elements per lane, as 8 quads; one version (no `_u` twin)
    assert "a0_31 = quad0_7[3]" in program.kernels_source
    assert "a0_32" not in program.kernels_source and "a0_31_u" not in program.kernels_source


@pytest.fixture
def scalar_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows read one element per access (`vector = 1`): the layout these
    tests describe (quads: tests/test_reduction_vector.py)."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(vector=1))


@pytest.mark.usefixtures("scalar_rows")
def test_layernorm_one_warp_per_row() -> None:
    program = check_program(LAYERNORM.format(n=96), pipeline=FUSE)
    launch = program.functions["f"].launches[0]
    assert launch.block == (32, 4, 1)  # 3 elements per lane, 4 rows per block
    # x + r is read once per element: 3 loads of each input.
    assert program.kernels_source.count("in0[c0 * uint32(96)") == 3


def _ptx(program_text: str) -> str:
    program = check_program(program_text, pipeline=FUSE)
    info = compile_program_ptx(program)
    (kernel,) = info.values()
    if HAS_PTXAS:
        assert kernel["spill_bytes"] == 0
    return str(kernel["ptx"])


@pytest.mark.slow
@pytest.mark.usefixtures("scalar_rows")
def test_gpu_branch_shuffles_and_one_barrier_per_stage() -> None:
    ptx = _ptx(SOFTMAX.format(r=2, n=4096))
    # max and sum: 5 butterfly steps each, one barrier each (4 warps per row).
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 10
    assert len(re.findall(r"bar\.sync", ptx)) == 2
    assert ".local" not in ptx  # the row stays in registers


@pytest.mark.slow
@pytest.mark.usefixtures("scalar_rows")
def test_gpu_branch_single_warp_rows_need_no_barrier() -> None:
    ptx = _ptx(LAYERNORM.format(n=96))
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 10
    assert "bar.sync" not in ptx
    assert ".local" not in ptx


DIV_BY_ROW_MAX = """
func.func @f(%x: tensor<4x64xf32>, %z: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %m = nn.reduce_max %z {axes = [1], keepdims = true} : (tensor<4x64xf32>) -> tensor<4x1xf32>
  %y = nn.div %x, %m : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}"""


def test_division_by_a_row_value_multiplies_by_its_reciprocal() -> None:
    """One division per row, a multiply per element; the rows whose divisor
    is subnormal (its reciprocal overflows), zero, infinite or NaN divide
    as written."""
    import numpy as np

    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import run_module
    from fusec.runtime.executor import run_program
    from tests.codegen_harness import compile_text

    program = compile_text(DIV_BY_ROW_MAX, FUSE)
    assert len(program.functions["f"].launches) == 1
    assert "rcp_" in program.kernels_source
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    z = -np.abs(rng.standard_normal((4, 64))).astype(np.float32)
    z[0, 5] = 2.5  # a normal divisor
    z[1] = -1.0
    z[1, 7] = 1e-39  # subnormal: 1 / 1e-39 overflows float32
    x[1] = np.float32(1e-39)
    z[2] = -np.inf
    z[3, 0] = np.nan
    got = run_program(program, "f", [x, z], device="sim")[0]
    want = run_module(parse_module(make_context(), DIV_BY_ROW_MAX, "t.mlir"), [x, z], "f")[0]
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2e-7, equal_nan=True)
    assert np.allclose(got[1], 1.0)  # 1e-39 / 1e-39, not 1e-39 * inf

