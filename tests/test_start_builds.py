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


def test_builders_start_early_only_where_gpu_kernels_will_be_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`start_kernel_builders` (what torch.compile's backend calls before
    aot_autograd traces): never in the simulator or without a GPU."""
    from fusec.codegen import build_pool
    from fusec.compiler import python_api
    from fusec.runtime import device

    started: list[int] = []
    monkeypatch.setattr(build_pool, "start_workers", lambda: started.append(1) or object())
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(device, "_loaded_mode", lambda: None)
    assert python_api.start_kernel_builders("sim") is False and started == []
    assert python_api.start_kernel_builders("auto") is True and started == [1]
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert python_api.start_kernel_builders("auto") is False and started == [1]
    assert python_api.start_kernel_builders("gpu") is True and started == [1, 1]
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    assert python_api.start_kernel_builders("gpu") is False and started == [1, 1]
