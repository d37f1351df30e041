"""Chains of elementwise ops read through slices and view chains
(`form-fusion-groups`' `_recompute_in_views`, `analysis/view_operands.computed_ops`):
`mul -> relu` before a strided slice, a crop, a deinterleave or a window
partition is evaluated at each element the view reads, in the kernel that
reads through the view, so the chain writes nothing (was: a pointwise kernel
writing the whole tensor, then a copy or pointwise kernel reading it back).
Each program runs in numba's CUDA simulator on fresh random inputs against
the reference interpreter, with its kernel count; extents are odd or prime.
"""

from __future__ import annotations

import codegen_harness as harness
import pytest

from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.compile import compile_model
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec

PIPELINE = "decompose,form-fusion-groups{options},group-each-op,tile-and-promote"
TOLERANCE = {"f32": 2e-5, "bf16": 1e-2}
"""By the program's element type: bf16 results come back as float32, and the
reference rounds every intermediate to bf16 where the kernel keeps them in
float32 (a few ulps of an 8-bit mantissa)."""


def t(shape: tuple[int, ...], dtype: str) -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def check(text: str, launches: int, seed: int, options: str = "", dtype: str = "f32"
          ) -> Program:
    """`launches` kernels, numbers as the reference's."""
    pipeline = PIPELINE.format(options=options)
    bound = TOLERANCE[dtype]
    return harness.check_program(text, launches, pipeline, seed=seed, rtol=bound, atol=bound)


def remarks(text: str, options: str = "") -> list[str]:
    """The remarks of `form-fusion-groups` on `text`."""
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(
        make_registry([]), f"decompose,form-fusion-groups{options}")).run(module)
    return collect_remarks(module)


def chain(x: str, shape: tuple[int, ...], dtype: str, ops: list[str]) -> list[str]:
    """Lines applying `ops` (`mul`, `add_bias`, `relu`, `tanh`, `sigmoid`)
    to `%x`, the last defining `%c`; `add_bias` adds `%b` (the innermost
    extent, broadcast)."""
    ty, tb = t(shape, dtype), t(shape[-1:], dtype)
    lines, src = [f"  %k = nn.constant dense<-0.75> : tensor<{dtype}>"], x
    for i, op in enumerate(ops):
        dst = "%c" if i == len(ops) - 1 else f"%e{i}"
        if op == "mul":
            lines.append(f"  {dst} = nn.mul {src}, %k : ({ty}, tensor<{dtype}>) -> {ty}")
        elif op == "add_bias":
            lines.append(f"  {dst} = nn.add {src}, %b : ({ty}, {tb}) -> {ty}")
        else:
            lines.append(f"  {dst} = nn.{op} {src} : {ty}")
        src = dst
    return lines


def program(shape: tuple[int, ...], dtype: str, ops: list[str], body: list[str],
            out: tuple[int, ...]) -> str:
    """`@f(%x, %b)` computing `ops` into `%c`, then `body` returning `%y` of `out`."""
    tx, tb, to = t(shape, dtype), t(shape[-1:], dtype), t(out, dtype)
    return "\n".join([f"func.func @f(%x: {tx}, %b: {tb}) -> {to} {{",
                      *chain("%x", shape, dtype, ops), *body,
                      f"  func.return %y : {to}", "}"]) + "\n"


def header(ops: list[str], rest: str) -> str:
    """The ops line of a kernel's header comment: the chain, then `rest`."""
    return ", ".join(f"nn.{'add' if op == 'add_bias' else op}" for op in ops) + ", " + rest


CHAINS = [["relu"], ["mul", "relu"], ["mul", "add_bias", "tanh"]]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("ops", CHAINS, ids=lambda ops: "-".join(ops))
def test_chain_before_a_lone_strided_slice_is_one_kernel(ops: list[str], dtype: str) -> None:
    # the slice alone was a copy kernel: it can now take the chain
    shape, out = (7, 5, 13, 11), (3, 3, 6, 10)
    ty, to = t(shape, dtype), t(out, dtype)
    body = [f"  %y = nn.slice %c {{starts = [1, 2, 1, 1], limits = [7, 5, 13, 11], "
            f"strides = [2, 1, 2, 1]}} : ({ty}) -> {to}"]
    prog = check(program(shape, dtype, ops, body, out), 1, seed=31, dtype=dtype)
    assert header(ops, "nn.slice") in prog.kernels_source


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("ops", CHAINS, ids=lambda ops: "-".join(ops))
def test_chain_before_a_crop_and_pointwise_ops_is_one_kernel(ops: list[str], dtype: str) -> None:
    shape, out = (5, 7, 3, 13), (3, 5, 2, 9)
    ty, to, ts = t(shape, dtype), t(out, dtype), f"tensor<{dtype}>"
    body = [f"  %s = nn.slice %c {{starts = [1, 2, 1, 3], limits = [4, 7, 3, 12]}} "
            f": ({ty}) -> {to}",
            f"  %h = nn.constant dense<0.5> : {ts}",
            f"  %m = nn.mul %s, %h : ({to}, {ts}) -> {to}",
            f"  %y = nn.tanh %m : {to}"]
    check(program(shape, dtype, ops, body, out), 1, seed=32, dtype=dtype)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("ops", CHAINS, ids=lambda ops: "-".join(ops))
def test_chain_before_a_deinterleave_is_one_kernel(ops: list[str], dtype: str) -> None:
    # two stride-2 slices read disjoint halves: the chain is evaluated once
    # per element of the input
    shape, out = (7, 22), (7, 11)
    ty, to = t(shape, dtype), t(out, dtype)
    body = [f"  %ev = nn.slice %c {{starts = [0, 0], limits = [7, 22], strides = [1, 2]}} "
            f": ({ty}) -> {to}",
            f"  %od = nn.slice %c {{starts = [0, 1], limits = [7, 22], strides = [1, 2]}} "
            f": ({ty}) -> {to}",
            f"  %a = nn.add %ev, %od : ({to}, {to}) -> {to}",
            f"  %y = nn.tanh %a : {to}"]
    check(program(shape, dtype, ops, body, out), 1, seed=33, dtype=dtype)


def window_reverse(windows: int, w: int, c: int, grid: tuple[int, int, int]) -> list[str]:
    """`[B * H/w * W/w, w, w, C]` windows back to `[B, H, W, C]`: reshape,
    transpose, reshape (Swin's window_reverse, the windows flattened)."""
    b, gh, gw = grid
    tw, t6 = f"{windows}x{w * w}x{c}", f"{b}x{gh}x{gw}x{w}x{w}x{c}"
    tt, to = f"{b}x{gh}x{w}x{gw}x{w}x{c}", f"{b}x{gh * w}x{gw * w}x{c}"
    return [f"  %r = nn.reshape %c : (tensor<{tw}xDT>) -> tensor<{t6}xDT>",
            f"  %p = nn.transpose %r {{perm = [0, 1, 3, 2, 4, 5]}} : (tensor<{t6}xDT>) "
            f"-> tensor<{tt}xDT>",
            f"  %y = nn.reshape %p : (tensor<{tt}xDT>) -> tensor<{to}xDT>"]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("ops", CHAINS, ids=lambda ops: "-".join(ops))
def test_chain_before_a_window_reverse_is_one_kernel(ops: list[str], dtype: str) -> None:
    grid, w, c = (1, 3, 5), 3, 7
    windows = grid[0] * grid[1] * grid[2]
    body = [line.replace("DT", dtype) for line in window_reverse(windows, w, c, grid)]
    out = (grid[0], grid[1] * w, grid[2] * w, c)
    prog = check(program((windows, w * w, c), dtype, ops, body, out), 1, seed=34, dtype=dtype)
    assert header(ops, "nn.reshape, nn.transpose, nn.reshape") in prog.kernels_source


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_chain_before_a_window_partition_is_one_kernel(dtype: str) -> None:
    # [B, H, W, C] into [B * H/w * W/w, w * w, C] windows of 3 x 3
    b, h, w, c, k = 2, 9, 6, 5, 3
    shape, out = (b, h, w, c), (b * (h // k) * (w // k), k * k, c)
    t6, tt = f"{b}x{h // k}x{k}x{w // k}x{k}x{c}", f"{b}x{h // k}x{w // k}x{k}x{k}x{c}"
    body = [f"  %r = nn.reshape %c : ({t(shape, dtype)}) -> tensor<{t6}x{dtype}>",
            f"  %p = nn.transpose %r {{perm = [0, 1, 3, 2, 4, 5]}} : (tensor<{t6}x{dtype}>) "
            f"-> tensor<{tt}x{dtype}>",
            f"  %y = nn.reshape %p : (tensor<{tt}x{dtype}>) -> {t(out, dtype)}"]
    check(program(shape, dtype, ["mul", "add_bias", "sigmoid"], body, out), 1, seed=35, dtype=dtype)


def test_chain_before_a_sliced_row_sum_is_one_kernel() -> None:
    # a reduction group reading a slice evaluates the chain at its row elements
    shape, out = (5, 13), (5, 1)
    ty, ts = t(shape, "f32"), t((5, 11), "f32")
    body = [f"  %s = nn.slice %c {{starts = [0, 2], limits = [5, 13]}} : ({ty}) -> {ts}",
            f"  %y = nn.reduce_sum %s {{axes = [1], keepdims = true}} : ({ts}) -> "
            f"{t(out, 'f32')}"]
    check(program(shape, "f32", ["mul", "add_bias", "tanh"], body, out), 1, seed=36)


# --- refusals --------------------------------------------------------------------------


def test_a_chain_value_returned_too_stays_written() -> None:
    # %e0 (the multiply) is a result: its kernel writes it anyway
    shape, out = (5, 13), (5, 6)
    ty, to = t(shape, "f32"), t(out, "f32")
    text = "\n".join([f"func.func @f(%x: {ty}, %b: {t((13,), 'f32')}) -> ({to}, {ty}) {{",
                      *chain("%x", shape, "f32", ["mul", "relu"]),
                      f"  %y = nn.slice %c {{starts = [0, 1], limits = [5, 13], "
                      f"strides = [1, 2]}} : ({ty}) -> {to}",
                      f"  func.return %y, %e0 : {to}, {ty}", "}"]) + "\n"
    check(text, 2, seed=37)
    assert any(r.startswith("missed: nn.mul (%e0), nn.relu (%c) not recomputed")
               and "nn.mul (%e0) is also a result of the function" in r
               for r in remarks(text)), remarks(text)


def test_a_chain_read_whole_elsewhere_stays_written() -> None:
    # a matmul reads %c whole: its kernel writes %c anyway
    shape, out = (5, 13), (5, 6)
    ty, to, tw, tz = t(shape, "f32"), t(out, "f32"), t((13, 3), "f32"), t((5, 3), "f32")
    text = "\n".join([f"func.func @f(%x: {ty}, %b: {t((13,), 'f32')}, %w: {tw}) -> "
                      f"({to}, {tz}) {{",
                      *chain("%x", shape, "f32", ["mul", "relu"]),
                      f"  %y = nn.slice %c {{starts = [0, 1], limits = [5, 13], "
                      f"strides = [1, 2]}} : ({ty}) -> {to}",
                      f"  %z = nn.matmul %c, %w : ({ty}, {tw}) -> {tz}",
                      f"  func.return %y, %z : {to}, {tz}", "}"]) + "\n"
    check(text, 3, seed=38)
    assert any("not recomputed" in r and "it is also read by nn.matmul (%z)" in r
               for r in remarks(text)), remarks(text)


STENCIL = """func.func @f(%x: tensor<9x7xf32>, %b: tensor<7xf32>) -> tensor<7x7xf32> {
  %k = nn.constant dense<-0.75> : tensor<f32>
  %e0 = nn.mul %x, %k : (tensor<9x7xf32>, tensor<f32>) -> tensor<9x7xf32>
  %c = nn.tanh %e0 : tensor<9x7xf32>
  %s0 = nn.slice %c {starts = [0, 0], limits = [7, 7]} : (tensor<9x7xf32>) -> tensor<7x7xf32>
  %s1 = nn.slice %c {starts = [1, 0], limits = [8, 7]} : (tensor<9x7xf32>) -> tensor<7x7xf32>
  %s2 = nn.slice %c {starts = [2, 0], limits = [9, 7]} : (tensor<9x7xf32>) -> tensor<7x7xf32>
  %a = nn.add %s0, %s1 : (tensor<7x7xf32>, tensor<7x7xf32>) -> tensor<7x7xf32>
  %y = nn.add %a, %s2 : (tensor<7x7xf32>, tensor<7x7xf32>) -> tensor<7x7xf32>
  func.return %y : tensor<7x7xf32>
}
"""


def test_overlapping_views_price_the_duplicated_work() -> None:
    # three row-shifted slices evaluate the 7-flop chain about 2.3 times per
    # element: within the default limit, one kernel; over a limit of 8 flops
    # of duplicated work per element, the chain stays a kernel of its own
    check(STENCIL, 1, seed=39)
    check(STENCIL, 2, seed=39, options="{max_recompute_flops=8}")
    lines = remarks(STENCIL, "{max_recompute_flops=8}")
    assert any(r.startswith("missed: nn.mul (%e0), nn.tanh (%c) not recomputed")
               and "its views read elements more than once" in r
               and "over max_recompute_flops = 8" in r for r in lines), lines


def test_a_kernel_without_layout_ops_looks_for_no_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 48-op elementwise program: fusion legality asked, for every op of every
    # candidate kernel, which ops views evaluate, re-running the whole search each
    # time (bench/programs/wide_tanh.mlir took 100 s); without a layout op in the
    # kernel there is nothing to search.
    from fusec.analysis import view_operands

    calls = 0
    real = view_operands._computed_here

    def counted(*args: object) -> bool:
        nonlocal calls
        calls += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(view_operands, "_computed_here", counted)
    t = "tensor<1024xf32>"
    lines = [f"func.func @f(%a: {t}, %b: {t}) -> {t} {{",
             f"%v0 = nn.add %a, %b : ({t}, {t}) -> {t}"]
    for i in range(1, 48):
        lines.append(f"%v{i} = nn.add %v{i - 1}, %{'a' if i % 2 else 'b'} : ({t}, {t}) -> {t}")
    lines += [f"func.return %v47 : {t}", "}"]
    art = compile_model("\n".join(lines) + "\n", target="h200")
    assert len(art.plan["functions"]["f"]["launches"]) == 1
    assert calls == 0
