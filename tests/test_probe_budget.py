"""A register probe with an unbounded budget waits for its build (the
register corpus test counts every kernel so): `budget_s=math.inf` once
handed `inf` to a condition wait, an OverflowError."""

from __future__ import annotations

import math

import pytest

from fusec.analysis.targets import get_target
from fusec.codegen.build_pool import find_ptxas, forget_builds
from fusec.codegen.kernel_probe import KernelProbe
from fusec.compiler.compile import compile_model
from fusec.dialects.fusion import GroupOp

PROGRAM = """func.func @f(%x: tensor<64x96xf32>) -> tensor<64x96xf32> {
  %0 = nn.softmax %x {axis = 1} : tensor<64x96xf32>
  %1 = nn.tanh %0 : tensor<64x96xf32>
  func.return %1 : tensor<64x96xf32>
}
"""


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_an_unbounded_budget_waits_for_the_count(tmp_path: object,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path))  # nothing cached: a build to wait for
    forget_builds()
    art = compile_model(PROGRAM, target="h200")
    groups = [op for op in art.module.walk() if isinstance(op, GroupOp)]
    count = KernelProbe(budget_s=math.inf).count(groups[0], get_target("h200"))
    assert count is not None and count.registers > 0
