"""Index arithmetic of reduction kernels (`codegen/reduction_index.py`):
collapsed axes, unsigned 32-bit indices, and reduced coordinates advanced by
carries rather than divided out per element. Run in numba's simulator
against the reference interpreter, at tiny shapes."""

from __future__ import annotations

import pytest

from fusec.analysis.index_types import INDEX32_LIMIT
from fusec.codegen.reduction_index import RowIndex
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import check_program, compile_text

FUSE = "decompose,form-fusion-groups"

CHANNEL_STATS = """
func.func @f(%x: tensor<{n}x4x{h}x{w}xf32>) -> (tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {{
  %m = nn.reduce_mean %x {{axes = [0, 2, 3], keepdims = true}}
      : (tensor<{n}x4x{h}x{w}xf32>) -> tensor<1x4x1x1xf32>
  %d = nn.sub %x, %m : (tensor<{n}x4x{h}x{w}xf32>, tensor<1x4x1x1xf32>) -> tensor<{n}x4x{h}x{w}xf32>
  %q = nn.mul %d, %d
      : (tensor<{n}x4x{h}x{w}xf32>, tensor<{n}x4x{h}x{w}xf32>) -> tensor<{n}x4x{h}x{w}xf32>
  %v = nn.reduce_mean %q {{axes = [0, 2, 3], keepdims = true}}
      : (tensor<{n}x4x{h}x{w}xf32>) -> tensor<1x4x1x1xf32>
  func.return %m, %v : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>
}}"""


@pytest.mark.parametrize("n,h,w", [(3, 5, 6), (2, 4, 8)])
def test_channel_stats_collapses_spatial_axes(n: int, h: int, w: int) -> None:
    # [n, 4, h, w] over [0, 2, 3] is [n, 4, h*w] over [0, 2]: the row in
    # registers divides each element's number by h*w once, never by w.
    program = check_program(CHANNEL_STATS.format(n=n, h=h, w=w), pipeline=FUSE)
    src = program.kernels_source
    assert f"% uint32({h * w})" in src and f"% uint32({w})" not in src


@pytest.mark.parametrize("n,h,w", [(3, 5, 6), (2, 4, 7)])
def test_channel_stats_streamed_carries(monkeypatch: pytest.MonkeyPatch, n: int, h: int,
                                        w: int) -> None:
    # Streamed rows: the inner coordinate is advanced by a carry, no division
    # inside the loop.
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(registers=False))
    program = check_program(CHANNEL_STATS.format(n=n, h=h, w=w), pipeline=FUSE)
    src = program.kernels_source
    # one division per pass, before its loop (two passes)
    assert src.count(f"% uint32({h * w})") == 2 and f"% uint32({w})" not in src
    assert f"wrap1 = c2 >= uint32({h * w})" in src


def test_channel_stats_split_rows_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rows split over blocks: each block's digits start from its chunk.
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS",
                        ReductionOptions(fill_threads=4096, min_split_elems=2, max_lanes=32))
    text = """
func.func @f(%x: tensor<8x4x7x9xf32>) -> tensor<1x4x1x1xf32> {
  %m = nn.reduce_mean %x {axes = [0, 2, 3], keepdims = true}
      : (tensor<8x4x7x9xf32>) -> tensor<1x4x1x1xf32>
  func.return %m : tensor<1x4x1x1xf32>
}"""
    program = check_program(text, pipeline="group-each-op")
    assert program.functions["f"].launches[0].grid[1] > 1, program.kernels_source
    assert "j_first = uint32(uint32(cuda.blockIdx.y) * " in program.kernels_source


def test_three_separate_reduced_axes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Axes 0, 2, 4 of a 5-d tensor: three digits, two carries per element.
    text = """
func.func @f(%x: tensor<3x2x5x3x7xf32>) -> tensor<1x2x1x3x1xf32> {
  %s = nn.reduce_sum %x {axes = [0, 2, 4], keepdims = true}
      : (tensor<3x2x5x3x7xf32>) -> tensor<1x2x1x3x1xf32>
  func.return %s : tensor<1x2x1x3x1xf32>
}"""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(registers=False))
    src = check_program(text, pipeline="group-each-op").kernels_source
    assert "wrap2 = " in src and "wrap1 = " in src


def test_broadcast_operand_keeps_axes_apart() -> None:
    # y varies along h only: h and w cannot merge (y's index needs h alone).
    text = """
func.func @f(%x: tensor<2x3x4x5xf32>, %y: tensor<4x1xf32>) -> tensor<1x3x1x1xf32> {
  %p = nn.mul %x, %y : (tensor<2x3x4x5xf32>, tensor<4x1xf32>) -> tensor<2x3x4x5xf32>
  %s = nn.reduce_sum %p {axes = [0, 2, 3], keepdims = true}
      : (tensor<2x3x4x5xf32>) -> tensor<1x3x1x1xf32>
  func.return %s : tensor<1x3x1x1xf32>
}"""
    src = check_program(text, pipeline=FUSE).kernels_source
    assert "% uint32(20)" not in src and "% uint32(5)" in src


def test_softmax_rows_collapse_to_one_kept_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    # [2, 3, 40] softmax over the last axis: rows are [6], index row * 40 + j.
    text = """
func.func @f(%x: tensor<2x3x40xf32>) -> tensor<2x3x40xf32> {
  %y = nn.softmax %x {axis = 2} : tensor<2x3x40xf32>
  func.return %y : tensor<2x3x40xf32>
}"""
    # one element per access: a quad's `jq + uint32(3)` would match below
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", ReductionOptions(vector=1))
    src = check_program(text, pipeline=FUSE).kernels_source
    assert "c0 = uint32(row)" in src and "uint32(3)" not in src


def _digits(names: list[str], shape: tuple[int, ...], lines: list[str], start: int,
            steps: int, step: int) -> None:
    ix_state = {}
    rest = start
    for name, n in zip(reversed(names), reversed(shape), strict=True):
        ix_state[name] = rest % n if name != names[0] else rest
        rest //= n
    code = "\n".join(lines)
    for k in range(1, steps + 1):
        exec(code, {"uint32": int}, ix_state)
        flat = start + k * step
        want = []
        for n in reversed(shape[1:]):
            want.append(flat % n)
            flat //= n
        want.append(flat)
        assert [ix_state[n] for n in reversed(names)] == want


@pytest.mark.parametrize("shape,step", [((4, 7), 32), ((3, 5, 6), 8), ((5, 3, 2), 256),
                                        ((9, 64), 64), ((2, 3), 1)])
def test_advance_lines_match_division(shape: tuple[int, ...], step: int) -> None:
    # Axes alternate reduced/kept so the collapsed reduced shape is `shape`.
    x_shape: list[int] = []
    for n in shape:
        x_shape += [n, 2]
    axes = tuple(range(0, 2 * len(shape), 2))
    groups = tuple((d,) for d in range(len(x_shape)))
    ix = RowIndex(tuple(x_shape), axes, groups, "uint32")
    assert ix.reduce_shape == shape
    names = [f"d{i}" for i in range(len(shape))]
    for start in (0, 1, step - 1, 17):
        _digits(names, shape, ix.advance_lines(names, step), start, 40, step)


def test_huge_tensor_keeps_64_bit_indices() -> None:
    # 2^32 elements do not fit uint32: the 64-bit path (compiled, not run).
    text = """
func.func @f(%x: tensor<65536x65536xf32>) -> tensor<65536x1xf32> {
  %s = nn.reduce_sum %x {axes = [1], keepdims = true}
      : (tensor<65536x65536xf32>) -> tensor<65536x1xf32>
  func.return %s : tensor<65536x1xf32>
}"""
    src = compile_text(text, "group-each-op").kernels_source
    assert INDEX32_LIMIT <= 65536 * 65536
    kernel = src[src.index("def f_"):]
    assert "lane = uint64(cuda.threadIdx.x)" in kernel and "uint32(" not in kernel
