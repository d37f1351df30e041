"""bench/programs/embedding_layernorm.mlir without a GPU: token ids gather
rows of a GPT-2-sized table, positions are added, a layer norm follows. At
full size it compiles to one kernel (the gather read in place); shrunk, it
runs in the simulator and its torch peer (bench/torch_peer.py) on the CPU,
both against the reference. The suite's inputs draw token ids in range and
its floor counts the gathered rows, not the table. Timing needs a GPU:

    python bench/run_gpu.py --rows embedding_layernorm
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import (
    DEFAULT_INDEX_BOUND,
    find_function,
    index_bounds,
    random_inputs,
    run_function,
)
from fusec.runtime.executor import run_program

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
TEXT = (BENCH / "programs" / "embedding_layernorm.mlir").read_text(encoding="utf-8")
NAME = "embedding_layernorm"


def _small(text: str) -> str:
    """The program at batch 2, sequence 4, vocabulary 50, hidden 16."""
    return (text.replace("768", "16").replace("50257", "50").replace("32x512", "2x4")
            .replace("512x", "4x"))


def _func(text: str) -> object:
    return find_function(parse_module(make_context(), text, "m.mlir"), None)


def test_full_size_is_one_kernel_reading_the_table_in_place() -> None:
    program = compile_model(TEXT, fusion=True, target="h200").program
    fp = program.functions[NAME]
    assert len(fp.launches) == 1, program.kernels_source
    assert index_bounds(_func(TEXT)) == [50257, None, None, None, None]


def test_small_runs_in_the_simulator_like_the_reference() -> None:
    text = _small(TEXT)
    program = compile_model(text, fusion=True, target="h200").program
    assert len(program.functions[NAME].launches) == 1
    inputs = random_inputs(_func(text), seed=4)
    assert inputs[0].max() < 50 and len(np.unique(inputs[0])) > 1
    (want,) = run_function(_func(text), inputs)
    (got,) = run_program(program, NAME, inputs, device="sim")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_torch_peer_and_suite_inputs_on_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    from run_gpu import _inputs  # pyright: ignore[reportPrivateUsage]
    from torch_peer import floor_work, torch_peer

    func = _func(_small(TEXT))
    fp = compile_model(_small(TEXT), fusion=True, target="h200").program.functions[NAME]
    model = SimpleNamespace(signature=fp)
    inputs = _inputs(torch, model, func, device="cpu")
    ids = inputs[0]
    assert ids.dtype == torch.int64 and int(ids.min()) >= 0 and int(ids.max()) < 50
    assert len(torch.unique(ids)) > 1 and inputs[1].dtype == torch.float32
    got = torch_peer(func)(*inputs)
    (want,) = run_function(func, [t.numpy() for t in inputs])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    moved, flops = floor_work(func, inputs, [got])
    table = 50 * 16 * 4
    gathered = 2 * 4 * 16 * 4  # 8 rows of 16 floats: fewer than the 50 of the table
    everything = sum(t.numel() * t.element_size() for t in [*inputs, got])
    assert moved == everything - table + gathered and flops != flops


def test_index_bounds_default_and_floats() -> None:
    text = """func.func @f(%i: tensor<3xi32>, %x: tensor<3xf32>) -> tensor<3xi32> {
  func.return %i : tensor<3xi32>
}"""
    assert index_bounds(_func(text)) == [DEFAULT_INDEX_BOUND, None]
