"""A gather along a table's innermost axis staged by rows
(`scheduling/staged_gather.py`, `codegen/gather_rows.py`): where most of a
row's elements are gathered, each block copies its table row into shared
memory in 16-byte words and gathers its outputs from there. Every program
runs in numba's CUDA simulator against the reference interpreter, on fresh
random tables and ids that repeat, count from the end and reach both ends
of the row.
"""

from __future__ import annotations

import codegen_harness as harness
import numpy as np
import pytest

from fusec.analysis.targets import H100
from fusec.dialects.schedule import PointwiseSchedule
from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import staged_gather

PIPELINE = "decompose,form-fusion-groups,group-each-op,tile-and-promote"
TOLERANCE = {"f32": 2e-6, "bf16": 1e-2}


def columns(table: tuple[int, ...], ids: tuple[int, ...], dtype: str, itype: str = "i64",
            tail: str = "scale") -> str:
    """`gather(table, ids, axis = last)` with a pointwise neighbour after it:
    a scale (`scale`), a tanh GELU of a scaled value (`gelu`), or an add of
    a `[*ids]` tensor broadcast over the table's rows (`add`)."""
    t = harness.tensor
    out = (*table[:-1], *ids)
    tt, ti, to, tb = t(table, dtype), t(ids, itype), t(out, dtype), t(ids, dtype)
    extra = f", %b: {tb}" if tail == "add" else ""
    head = (f"func.func @f(%tab: {tt}, %ids: {ti}{extra}) -> {to} {{\n"
            f"  %g = nn.gather %tab, %ids {{axis = {len(table) - 1}}} : ({tt}, {ti}) -> {to}\n")
    if tail == "add":
        body = f"  %r = nn.add %g, %b : ({to}, {tb}) -> {to}\n"
    else:
        body = (f"  %k = nn.constant dense<1.25> : tensor<{dtype}>\n"
                f"  %r = nn.mul %g, %k : ({to}, tensor<{dtype}>) -> {to}\n")
        if tail == "gelu":
            body = body.replace("%r = nn.mul", "%m = nn.mul") + \
                f'  %r = nn.gelu %m {{approximate = "tanh"}} : {to}\n'
    return head + body + f"  func.return %r : {to}\n}}\n"


def ids_for(shape: tuple[int, ...], row: int, rng: np.random.Generator, itype: str) -> np.ndarray:
    """Ids over the whole row, some negative (from the end), the first ones
    at both ends."""
    ids = rng.integers(-row, row, size=shape)
    flat = ids.reshape(-1)
    flat[: min(3, flat.size)] = [row - 1, -row, 0][: min(3, flat.size)]
    return ids.astype(np.int64 if itype == "i64" else np.int32)


def run(text: str, table: tuple[int, ...], ids: tuple[int, ...], itype: str,
        seed: int) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """The kernels' text, the simulator's outputs and the reference's."""
    program = harness.compile_text(text, PIPELINE)
    assert len(program.functions["f"].launches) == 1, program.kernels_source
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(table).astype(np.float32), ids_for(ids, table[-1], rng, itype)]
    if "%b:" in text:
        inputs.append(rng.standard_normal(ids).astype(np.float32))
    reference = harness.parse_module(harness.make_context(), text, "test.mlir")
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    return program.kernels_source, got, expected


@pytest.mark.parametrize(("table", "ids", "dtype", "itype", "tail"), [
    pytest.param((3, 37), (100,), "f32", "i64", "add",  # odd row, ids a multiple of 4:
                 marks=pytest.mark.slow),  # wide stores
    pytest.param((5, 41), (97,), "f32", "i32", "scale",  # odd everything: one element
                 marks=pytest.mark.slow),  # per access
    pytest.param((2, 3, 29), (9, 12), "f32", "i64", "scale",  # a 3-D table, 2-D ids
                 marks=pytest.mark.slow),
    ((4, 50), (120,), "bf16", "i32", "gelu"),  # halves in 16-byte words
    pytest.param((6, 23), (71,), "bf16", "i64", "add", marks=pytest.mark.slow),
])
def test_a_gather_along_the_innermost_axis_is_staged_and_matches(
        table: tuple[int, ...], ids: tuple[int, ...], dtype: str, itype: str, tail: str) -> None:
    source, got, expected = run(columns(table, ids, dtype, itype, tail), table, ids, itype, 3)
    assert "srow = cuda.shared.array(0" in source  # the row is staged
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got[0], expected[0], rtol=tol, atol=tol, err_msg=source)


@pytest.mark.slow
def test_few_rows_split_their_outputs_over_blocks() -> None:
    """Three rows cannot fill a GPU: each row's outputs are written by
    several blocks, each staging the whole row."""
    text = columns((3, 37), (160,), "f32")
    program = harness.compile_text(text, PIPELINE)
    launch = program.functions["f"].launches[0]
    assert launch.grid[0] == 3 and launch.grid[1] > 1, launch.grid
    assert launch.shared_bytes == 37 * 4
    _, got, expected = run(text, (3, 37), (160,), "i64", 5)
    np.testing.assert_allclose(got[0], expected[0], rtol=2e-6, atol=2e-6)


def test_a_gather_of_few_ids_reads_the_table_in_place() -> None:
    """Three ids out of a 1000-wide row: staging the row would move more
    than the random reads do."""
    source, got, expected = run(columns((4, 1000), (3,), "f32"), (4, 1000), (3,), "i64", 7)
    assert "srow" not in source
    np.testing.assert_allclose(got[0], expected[0], rtol=2e-6, atol=2e-6)


def test_a_gather_along_an_outer_axis_is_not_staged() -> None:
    t = harness.tensor
    text = (f"func.func @f(%tab: {t((50, 8))}, %ids: {t((300,), 'i64')}) -> {t((300, 8))} {{\n"
            f"  %g = nn.gather %tab, %ids {{axis = 0}} : ({t((50, 8))}, {t((300,), 'i64')}) "
            f"-> {t((300, 8))}\n"
            f"  func.return %g : {t((300, 8))}\n}}\n")
    assert "srow" not in harness.compile_text(text, PIPELINE).kernels_source


def test_parts_fill_the_gpu_without_outweighing_the_outputs() -> None:
    found = staged_gather.StagedGather(None, None, rows=64, row=30011, per_row=239509,  # type: ignore[arg-type]
                                       item=4)
    # a 117 KiB row: one block per SM; 3 to 6 blocks per row fill 73%, 97%,
    # 81% and 97% of their waves of 132 blocks: 4 (256 blocks)
    assert staged_gather.parts(found, 4, H100) == 4
    many = staged_gather.StagedGather(None, None, rows=512, row=50257, per_row=41609,  # type: ignore[arg-type]
                                      item=2)
    assert staged_gather.parts(many, 2, H100) == 1
    too_wide = staged_gather.StagedGather(None, None, rows=8, row=400_000, per_row=10**6,  # type: ignore[arg-type]
                                          item=4)
    assert staged_gather.parts(too_wide, 4, H100) == 0  # a row past a block's shared memory
    few_ids = staged_gather.StagedGather(None, None, rows=8, row=4096, per_row=100,  # type: ignore[arg-type]
                                         item=4)
    assert staged_gather.parts(few_ids, 4, H100) == 0


def test_the_schedule_field_round_trips_and_defaults_to_zero() -> None:
    attr = PointwiseSchedule.make(elements_per_thread=4, block=512, gather_parts=3)
    assert attr.int_field("gather_parts") == 3
    assert PointwiseSchedule.make(elements_per_thread=4, block=256).int_field("gather_parts") == 0
    text = "#fusion.pointwise<elements_per_thread = 4, block = 512, gather_parts = 3>"
    ctx = harness.make_context()
    from xdsl.parser import Parser

    parsed = Parser(ctx, text).parse_attribute()
    assert parsed == attr
    assert str(attr) == text
