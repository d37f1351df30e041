"""The writers' registry (codegen/writers.py): a writer per built-in (backend,
kind), the backend a group uses read from what the passes recorded on it,
and registrations that would make a group's writer ambiguous refused."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import StringAttr

from fusec.analysis.group_kind import registered_kinds
from fusec.codegen import pointwise, writers
from fusec.codegen.library_gemm import LibraryGemmWriter
from fusec.codegen.writers import (
    LIBRARY,
    NUMBA,
    NumbaWriter,
    group_backend,
    register_writer,
    registered_writers,
    writer_for,
)
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp

GROUP = """func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "contraction"}
      : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>):
    %m = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
    fusion.yield %m : tensor<4x2xf32>
  }
  func.return %y : tensor<4x2xf32>
}
"""


def _group() -> GroupOp:
    module = parse_module(make_context(), GROUP, "g.mlir")
    return next(op for op in module.walk() if isinstance(op, GroupOp))


def test_every_builtin_kind_has_a_numba_writer_and_the_library_a_gemm() -> None:
    make_context()  # registers the built-in kinds
    pairs = set(registered_writers())
    assert {(NUMBA, kind) for kind in registered_kinds()} <= pairs
    assert (LIBRARY, "contraction") in pairs
    for (backend, kind), writer in registered_writers().items():
        assert isinstance(writer, writers.Writer)
        assert (writer.backend, writer.kind) == (backend, kind)


def test_the_backend_is_what_the_group_records() -> None:
    group = _group()
    assert group_backend(group) == NUMBA
    assert writer_for(group) is registered_writers()[(NUMBA, "contraction")]
    group.attributes["gemm"] = StringAttr("library")  # what the GEMM choice records
    assert group_backend(group) == LIBRARY
    assert isinstance(writer_for(group), LibraryGemmWriter)
    group.attributes["backend"] = StringAttr("numba")  # a pass's choice comes first
    assert group_backend(group) == NUMBA


def test_register_writer_refuses_what_is_not_a_writer_and_a_taken_pair(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "_REGISTRY", registered_writers())
    with pytest.raises(TypeError, match="does not implement the Writer protocol"):
        register_writer(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend 'numba' and kind 'pointwise' is registered "
                       "twice"):
        register_writer(NumbaWriter("pointwise", pointwise.emit))
    again = registered_writers()[(NUMBA, "pointwise")]
    assert register_writer(again) is again  # the same writer again changes nothing
