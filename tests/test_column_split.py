"""Column reductions with one pass of statistics and a final pass (softmax,
log-softmax, `x - mean(x)`, `x / sum(|x|)`) whose columns cannot fill the
GPU: split over blocks in two kernels ("Split passes" in
`codegen/reduction.py`), checked in the simulator against the reference
interpreter at tiny shapes, with the fill target scaled down so that few
columns fall below it and many above; and the PTX of the chunked online
update (no branch per element)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fusec.codegen.ptx import compile_program_ptx
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import tensor
from tests.test_column_multipass import _softmax, check_program, column_layer_norm

# A "GPU" filled by 512 threads, blocks of 32 threads, 2 elements per lane
# per split at least: 3 columns (one block of 4 columns x 8 lanes) are split,
# 300 columns (10 blocks of 32 x 1) are not. No row cache: the column is
# re-read, as at full size.
TINY = ReductionOptions(fill_threads=512, block_threads=32, min_split_elems=2, shared_budget=0)


@pytest.fixture(autouse=True)
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", TINY)


def _normalise(shape: tuple[int, ...], axis: int, kind: str) -> str:
    """A normalisation written out of primitives along `axis`."""
    t = tensor(shape)
    k = tensor(tuple(1 if d == axis else n for d, n in enumerate(shape)))
    stat = ("%a = nn.abs %x : {t}\n  %s = nn.reduce_sum %a {{axes = [{axis}], keepdims = true}}"
            " : ({t}) -> {k}\n  %y = nn.div %x, %s : ({t}, {k}) -> {t}") if kind == "l1" else (
            "%s = nn.reduce_mean %x {{axes = [{axis}], keepdims = true}} : ({t}) -> {k}\n"
            "  %y = nn.sub %x, %s : ({t}, {k}) -> {t}")
    body = stat.format(t=t, k=k, axis=axis)
    return f"func.func @f(%x: {t}) -> {t} {{\n  {body}\n  func.return %y : {t}\n}}\n"


# (shape, axis): column counts 3 and 6 below the fill threshold (split),
# 300 above; 37 and 41 rows give ragged last chunks.
BELOW = [((40, 3), 0), ((37, 3), 0), ((2, 41, 3), 1)]
ABOVE = [((13, 300), 0)]


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "axis"), BELOW + ABOVE)
def test_softmax_split_below_the_fill_threshold(op: str, shape: tuple[int, ...],
                                                axis: int) -> None:
    split = (shape, axis) in BELOW
    program = check_program(_softmax(op, shape, axis), launches=2 if split else 1)
    assert ("_partials" in program.kernels_source) == split, program.kernels_source
    assert "chunk_base" in program.kernels_source  # the chunked online update


@pytest.mark.parametrize("kind", ["l1", "centre"])
@pytest.mark.parametrize(("shape", "axis"), BELOW + ABOVE)
def test_normalisation_split(kind: str, shape: tuple[int, ...], axis: int) -> None:
    check_program(_normalise(shape, axis, kind), launches=2 if (shape, axis) in BELOW else 1)


@pytest.mark.parametrize(("columns", "launches"), [(3, 4), (300, 1)])
def test_two_passes_of_statistics(columns: int, launches: int) -> None:
    """A layer-norm-style column (mean, then the mean of centred squares)
    has two passes of statistics, which the scheduler does not split: one
    kernel when its columns fill the GPU; below that, fusion prices the
    one-kernel form under its unsplit schedule and keeps the statistics
    apart, each split over blocks (4 launches; at full size, 65536 x 64:
    4 kernels estimated 31 us against one kernel on 2 blocks)."""
    check_program(column_layer_norm(40, columns), launches=launches)


def test_split_softmax_with_a_per_column_output() -> None:
    """The column sums are an output too: stored once per column (by the
    first split), not by every split."""
    t, k = tensor((40, 3)), tensor((1, 3))
    text = f"""
func.func @f(%x: {t}) -> ({t}, {k}) {{
  %s = nn.reduce_sum %x {{axes = [0], keepdims = true}} : ({t}) -> {k}
  %y = nn.div %x, %s : ({t}, {k}) -> {t}
  func.return %y, %s : {t}, {k}
}}"""
    program = check_program(text, launches=2)
    assert "cuda.blockIdx.y == 0" in program.kernels_source


def test_split_softmax_with_infinities() -> None:
    """-inf filling whole splits before the max, a column of -inf only, a
    NaN and an inf: as the reference computes them."""
    text = _softmax("softmax", (40, 4), 0)
    program = compile_model(text).program
    assert len(program.functions["f"].launches) == 2, program.kernels_source
    x = np.random.default_rng(3).standard_normal((40, 4)).astype(np.float32)
    x[:25, 0] = -np.inf
    x[:, 1] = -np.inf
    x[30, 2] = np.nan
    x[2, 3] = np.inf
    expected = run_module(parse_module(make_context(), text, "t.mlir"), [x], "f")
    got = run_program(program, "f", [x], device="sim")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_split_log_softmax_rescales_across_chunks(order: str) -> None:
    """Sorted columns: the max grows (or shrinks) chunk after chunk and
    split after split, so every combination rescales."""
    text = _softmax("log_softmax", (67, 3), 0)
    program = compile_model(text).program
    assert len(program.functions["f"].launches) == 2, program.kernels_source
    x = np.random.default_rng(5).standard_normal((67, 3)).astype(np.float32) * 8
    x = np.sort(x, axis=0)[:: 1 if order == "ascending" else -1].copy()
    expected = run_module(parse_module(make_context(), text, "t.mlir"), [x], "f")
    got = run_program(program, "f", [x], device="sim")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)


def _loops(ptx: str) -> list[list[str]]:
    """The instructions of each loop of a PTX kernel: from a label to the
    branch back to it."""
    lines = [line.strip() for line in ptx.splitlines()]
    labels = {line[:-1]: i for i, line in enumerate(lines)
              if re.fullmatch(r"\$L__BB\d+_\d+:", line)}
    loops: list[list[str]] = []
    for i, line in enumerate(lines):
        back = re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", line)
        if back and labels.get(back.group(1), i) < i:
            loops.append([x for x in lines[labels[back.group(1)]:i + 1]
                          if x and not x.startswith("//") and not x.endswith(":")])
    return loops


def test_chunked_online_loop_has_no_branch_per_element(monkeypatch: pytest.MonkeyPatch) -> None:
    """The statistics loop of the split column softmax (PTX for sm_90): its
    only branch is the loop's own, every load of a chunk is issued before
    the chunk's first exp, and one exp per element plus one per chunk."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions())
    program = compile_model(_softmax("softmax", (4096, 64), 0)).program
    assert len(program.functions["f"].launches) == 2, program.kernels_source
    ptx = compile_program_ptx(program)["f_g0_reduce_max_partials"]["ptx"]
    loop = max(_loops(ptx), key=len)
    loads = [i for i, x in enumerate(loop) if x.startswith("ld.global")]
    exps = [i for i, x in enumerate(loop) if x.startswith("ex2.approx")]
    branches = [x for x in loop if re.search(r"\bbra\b", x)]
    unroll = reduction.STREAM_UNROLL
    assert len(branches) == 1, "\n".join(loop)
    assert len(loads) >= unroll and len(loads) % unroll == 0
    assert len(exps) == len(loads) // unroll * (unroll + 1), "\n".join(loop)
    assert max(loads[:unroll]) < min(exps), "\n".join(loop)
