"""Kernel builds asked for when `fusec.compile` returns (not at the first
call): each distinct kernel body once, nothing in the simulator."""

from __future__ import annotations

from typing import Any

import pytest

import fusec
from fusec.codegen.ptx import program_signatures
from fusec.compiler.compile import compile_model
from fusec.runtime import kernel_build

# Two relus of the same shape, unfused: two kernels of one body.
TEXT = """func.func @f(%x: tensor<64xf32>, %y: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %a = nn.relu %x : tensor<64xf32>
  %b = nn.relu %y : tensor<64xf32>
  func.return %a, %b : tensor<64xf32>, tensor<64xf32>
}
"""


def test_each_distinct_kernel_is_asked_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, Any]] = []
    monkeypatch.setattr(kernel_build, "kernel_code",
                        lambda unit, sig, cc, label: asked.append((unit.source, cc)))
    program = compile_model(TEXT, target="h200", fusion=False).program
    signatures = program_signatures(program)
    assert len(signatures) == 2
    assert kernel_build.start_builds(program.kernels_source, signatures, (9, 0)) == 1
    assert len(asked) == 1 and asked[0][1] == (9, 0)
    assert kernel_build.start_builds(program.kernels_source, {}, (9, 0)) == 0


def test_the_simulator_asks_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_build, "kernel_code",
                        lambda *a: pytest.fail("no build in the simulator"))
    model = fusec.compile(TEXT, fusion=False, cache=False)
    assert model.start_kernel_builds() == 0
