"""Tiled window kernels (`codegen/window_tiled.py`) in numba's CUDA simulator
against the reference interpreter: the 1x1-conv pixel GEMM, the general conv
with its halo tile, depthwise convs and pools with one channel per block,
their prologues and epilogues, the schedules `tile-and-promote` records and
the shared-memory limit."""

from __future__ import annotations

import re

import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.remarks import collect_remarks
from fusec.analysis.targets import H200
from fusec.codegen.generate import generate_program
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import WindowSchedule
from fusec.dialects.shapes import conv2d_shape, pool2d_shape
from tests.codegen_harness import check_program, emit_scheduled, tensor

PIPELINE = "group-each-op,register-budget,tile-and-promote"
FUSED = ("decompose,form-fusion-groups{target=h200},group-each-op,register-budget,"
         "tile-and-promote")
F64 = {"float64": 1e-10}


def run(text: str, pipeline: str) -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return module


def window_groups(module: ModuleOp) -> list[GroupOp]:
    return [op for op in module.walk() if isinstance(op, GroupOp)
            and op.attributes["kind"].data == "window"]  # type: ignore[attr-defined]


WINDOW_FIELDS = {"window_tile": ("th", "tw", "oc_t", "ci_step"), "window_thread": ("pt", "ot")}


def ints(group: GroupOp, key: str) -> list[int]:
    """The block tile (`window_tile`) or thread tile (`window_thread`) of
    the group's `#fusion.window` schedule, or an integer array attribute."""
    if key not in WINDOW_FIELDS:
        return [a.value.data for a in group.attributes[key].data]  # type: ignore[attr-defined]
    attr = group.attributes["schedule"]
    assert isinstance(attr, WindowSchedule)
    return [attr.int_field(k) for k in WINDOW_FIELDS[key]]


def schedule_text(path: str, tile: list[int], thread: list[int]) -> str:
    """`#fusion.window<...>` for a hand-recorded plan."""
    values = dict(zip(("th", "tw", "oc_t", "ci_step", "pt", "ot"), [*tile, *thread], strict=True))
    return f'#fusion.window<path = "{path}", ' + ", ".join(
        f"{k} = {v}" for k, v in values.items()) + ">"


def conv_program(x: tuple[int, int, int, int], w: tuple[int, int, int, int],
                 strides: list[int], pads: list[int], dilations: list[int], groups: int,
                 dtype: str = "f32") -> str:
    out = tensor(conv2d_shape(x, w, strides, pads, dilations, groups), dtype)
    xt, wt = tensor(x, dtype), tensor(w, dtype)
    attrs = f"strides = {strides}, pads = {pads}, dilations = {dilations}, groups = {groups}"
    return f"""
func.func @f(%x: {xt}, %w: {wt}) -> {out} {{
  %y = nn.conv2d %x, %w {{{attrs}}} : ({xt}, {wt}) -> {out}
  func.return %y : {out}
}}"""


def schedule(text: str, pipeline: str = PIPELINE) -> GroupOp:
    """The window group after `pipeline` and code generation (which adds
    the kernel's `grid` and `block`)."""
    module = run(text, pipeline)
    generate_program(module)
    (g,) = window_groups(module)
    return g


# --- 1x1 convs: a GEMM over the pixels ---------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "groups"),
    [
        ((2, 8, 5, 7), (10, 8, 1, 1), 1),  # 35 pixels (ragged tile), 10 channels (ragged oc_t)
        ((1, 36, 12, 13), (12, 36, 1, 1), 1),  # 156 pixels: two tiles; 36 = 4 x 8 + 4 channels
        ((1, 8, 6, 6), (6, 4, 1, 1), 2),  # grouped
    ],
    ids=["ragged", "two-tiles", "groups2"],
)
def test_pointwise_conv(x: tuple[int, int, int, int], w: tuple[int, int, int, int],
                        groups: int) -> None:
    text = conv_program(x, w, [1, 1], [0, 0, 0, 0], [1, 1], groups)
    g = schedule(text)
    assert g.attributes["schedule_text"].data.startswith("window: 1x1 conv as a GEMM over pixels")  # type: ignore[attr-defined]
    th, tw, oc_t, ci_step = ints(g, "window_tile")
    pt, ot = ints(g, "window_thread")
    assert th == 1 and tw % pt == 0 and oc_t % ot == 0
    assert ci_step <= min(32, x[1] // groups)
    program = check_program(text, pipeline=PIPELINE)
    assert "xs = cuda.shared.array" in program.kernels_source


def test_pointwise_conv_default_tiles_at_mobilenet_size() -> None:
    """The two 1x1 convs of the full-size inverted residual block: 128
    pixels x 64 (expand) or 32 (project) channels per block, 4x8 per thread;
    the expand's 32 input channels in one step, the project's 192 in
    pipelined steps of 8."""
    expand = conv_program((32, 32, 56, 56), (192, 32, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1)
    project = conv_program((32, 192, 56, 56), (32, 192, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1)
    g = schedule(expand)
    assert (ints(g, "window_tile"), ints(g, "window_thread")) == ([1, 128, 64, 32], [4, 8])
    assert ints(g, "grid") == [25, 3, 32] and ints(g, "block") == [256, 1, 1]
    shared = g.attributes["shared_bytes_est"].value.data  # type: ignore[attr-defined]
    assert shared == (32 * 128 + 32 * (64 + 4)) * 4
    g = schedule(project)
    assert (ints(g, "window_tile"), ints(g, "window_thread")) == ([1, 128, 32, 8], [4, 8])
    assert ints(g, "grid") == [25, 1, 32] and ints(g, "block") == [128, 1, 1]


# --- general convs: a halo tile per channel step -----------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "strides", "pads", "dilations", "groups"),
    [
        ((1, 3, 9, 10), (5, 3, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1),  # 3x3 pad 1
        ((1, 3, 11, 9), (4, 3, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 1),  # stride 2
        ((2, 2, 9, 8), (3, 2, 3, 2), [1, 1], [2, 0, 1, 1], [2, 2], 1),  # dilation 2, uneven pads
        ((1, 8, 7, 7), (6, 4, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 2),  # groups 2, 4 per group
        ((1, 12, 5, 6), (9, 12, 1, 1), [2, 1], [0, 1, 1, 0], [1, 1], 1),  # 1x1, strided, padded
    ],
    ids=["3x3", "stride2", "dilation2", "groups2", "1x1-strided"],
)
def test_general_conv(x: tuple[int, int, int, int], w: tuple[int, int, int, int],
                      strides: list[int], pads: list[int], dilations: list[int],
                      groups: int) -> None:
    text = conv_program(x, w, strides, pads, dilations, groups)
    g = schedule(text)
    assert g.attributes["schedule_text"].data.startswith("window: output tile")  # type: ignore[attr-defined]
    assert "depthwise" not in g.attributes
    check_program(text, pipeline=PIPELINE)


def recorded_group(x: tuple[int, int, int, int], w: tuple[int, int, int, int], conv_attrs: str,
                   tile: list[int], thread: list[int]) -> str:
    """A conv group carrying a hand-recorded plan (small tiles: many blocks)."""
    groups = x[1] // w[1]
    strides, pads = [1, 1], [0, 0, 0, 0]
    for key, value in (("strides", strides), ("pads", pads)):
        if m := re.search(key + r" = \[([0-9, ]+)\]", conv_attrs):
            value[:] = [int(v) for v in m.group(1).split(",")]
    out = tensor(conv2d_shape(x, w, strides, pads, [1, 1], groups))
    path = "depthwise" if w[1] == 1 else "pixels" if (
        w[2:] == (1, 1) and strides == [1, 1] and not any(pads)) else "general"
    return f"""
func.func @f(%x: {tensor(x)}, %w: {tensor(w)}) -> {out} {{
  %y = fusion.group (%x, %w) {{name = "g0", kind = "window",
      schedule = {schedule_text(path, tile, thread)}}} : ({tensor(x)}, {tensor(w)}) -> {out} {{
  ^bb0(%xa: {tensor(x)}, %wa: {tensor(w)}):
    %c = nn.conv2d %xa, %wa {{{conv_attrs}}} : ({tensor(x)}, {tensor(w)}) -> {out}
    fusion.yield %c : {out}
  }}
  func.return %y : {out}
}}"""


@pytest.mark.parametrize(
    ("x", "w", "attrs", "tile", "thread", "grid", "threads", "shared"),
    [
        # 2x3 tiles of 4x4 outputs, two channel blocks of 4 (the last ragged),
        # 3 of 5 input channels per step (the last step ragged)
        ((1, 5, 7, 10), (7, 5, 3, 3), "pads = [1, 1, 1, 1]", [4, 4, 4, 3], [2, 2],
         (6, 2, 1), 32, (3 * 6 * 6 + 3 * 9 * (4 + 4)) * 4),
        # 1x1: 3 tiles of 16 of the 35 pixels, 3 blocks of 4 of the 10 channels,
        # 3 of 7 input channels per step
        ((2, 7, 5, 7), (10, 7, 1, 1), "", [1, 16, 4, 3], [2, 2], (3, 3, 2), 32,
         (3 * 16 + 3 * (4 + 4)) * 4),
        # depthwise, multiplier 2, stride 2: 3x2 tiles of 2x3 outputs
        ((1, 2, 11, 12), (4, 1, 3, 3), "strides = [2, 2], pads = [1, 1, 0, 0], groups = 2",
         [2, 3, 1, 1], [2, 1], (6, 4, 1), 32, 5 * 7 * 4),
    ],
    ids=["general", "pixels", "depthwise"],
)
def test_many_blocks_and_ragged_steps(x: tuple[int, int, int, int],
                                      w: tuple[int, int, int, int], attrs: str, tile: list[int],
                                      thread: list[int], grid: tuple[int, int, int],
                                      threads: int, shared: int) -> None:
    """16 (or 3) threads own outputs; a block has at least a warp, the rest
    only help stage the tiles."""
    program = check_program(recorded_group(x, w, attrs, tile, thread))
    (launch,) = program.functions["f"].launches
    assert (launch.grid, launch.block) == (grid, (threads, 1, 1))
    # static shared arrays: the launch asks for no dynamic shared memory
    assert launch.shared_bytes == 0
    assert f"static shared memory: {shared} bytes" in program.kernels_source


# --- depthwise convs and pools: one channel per block -----------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "strides", "pads", "groups"),
    [
        ((2, 4, 9, 9), (4, 1, 3, 3), [1, 1], [1, 1, 1, 1], 4),  # multiplier 1
        ((1, 3, 8, 7), (6, 1, 3, 3), [2, 2], [1, 0, 1, 2], 3),  # multiplier 2, strided
        ((1, 2, 12, 11), (2, 1, 9, 8), [1, 1], [4, 3, 4, 4], 2),  # 72 taps: loops over them
    ],
    ids=["multiplier1", "multiplier2", "large-window"],
)
def test_depthwise_conv(x: tuple[int, int, int, int], w: tuple[int, int, int, int],
                        strides: list[int], pads: list[int], groups: int) -> None:
    text = conv_program(x, w, strides, pads, [1, 1], groups)
    g = schedule(text)
    assert g.attributes["schedule"].str_field("path") == "depthwise"  # type: ignore[attr-defined]
    tile = ints(g, "window_tile")
    assert tile[2:] == [1, 1] and ints(g, "window_thread")[1] == 1
    assert ints(g, "grid")[1:] == [w[0], x[0]]  # a block per (output channel, image)
    program = check_program(text, pipeline=PIPELINE)
    assert ("for a in range" in program.kernels_source) == (w[2] * w[3] > 64)


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize(
    ("x", "kernel", "strides", "pads"),
    [
        ((1, 3, 9, 11), [3, 3], [2, 2], [1, 1, 1, 1]),
        ((2, 2, 7, 6), [2, 3], [1, 2], [0, 1, 1, 0]),
        ((1, 2, 6, 6), [2, 2], [2, 2], [0, 0, 0, 0]),
    ],
    ids=["3x3s2p1", "asymmetric", "valid"],
)
def test_pool(op: str, x: tuple[int, int, int, int], kernel: list[int], strides: list[int],
              pads: list[int]) -> None:
    out = tensor(pool2d_shape(x, kernel, strides, pads))
    text = f"""
func.func @f(%x: {tensor(x)}) -> {out} {{
  %y = nn.{op} %x {{kernel = {kernel}, strides = {strides}, pads = {pads}}} : ({tensor(x)}) -> {out}
  func.return %y : {out}
}}"""
    g = schedule(text)
    assert g.attributes["schedule_text"].data.startswith(f"window: {op[:3]} pool, one channel")  # type: ignore[attr-defined]
    program = check_program(text, pipeline=PIPELINE)
    if op == "max_pool2d" and any(pads):
        assert "float32(-math.inf)" in program.kernels_source  # padding never wins


# --- prologues and epilogues -------------------------------------------------------------------


INVERTED_RESIDUAL = """
func.func @f(%x: tensor<2x4x9x9xf32>, %we: tensor<12x4x1x1xf32>, %be: tensor<12x1x1xf32>,
             %wd: tensor<12x1x3x3xf32>, %bd: tensor<12x1x1xf32>, %wp: tensor<4x12x1x1xf32>,
             %bp: tensor<4x1x1xf32>) -> tensor<2x4x9x9xf32> {
  %0 = nn.conv2d %x, %we : (tensor<2x4x9x9xf32>, tensor<12x4x1x1xf32>) -> tensor<2x12x9x9xf32>
  %1 = nn.add %0, %be : (tensor<2x12x9x9xf32>, tensor<12x1x1xf32>) -> tensor<2x12x9x9xf32>
  %2 = nn.clamp %1 {min = 0.0, max = 6.0} : tensor<2x12x9x9xf32>
  %3 = nn.conv2d %2, %wd {pads = [1, 1, 1, 1], groups = 12}
      : (tensor<2x12x9x9xf32>, tensor<12x1x3x3xf32>) -> tensor<2x12x9x9xf32>
  %4 = nn.add %3, %bd : (tensor<2x12x9x9xf32>, tensor<12x1x1xf32>) -> tensor<2x12x9x9xf32>
  %5 = nn.clamp %4 {min = 0.0, max = 6.0} : tensor<2x12x9x9xf32>
  %6 = nn.conv2d %5, %wp : (tensor<2x12x9x9xf32>, tensor<4x12x1x1xf32>) -> tensor<2x4x9x9xf32>
  %7 = nn.add %6, %bp : (tensor<2x4x9x9xf32>, tensor<4x1x1xf32>) -> tensor<2x4x9x9xf32>
  %8 = nn.add %7, %x : (tensor<2x4x9x9xf32>, tensor<2x4x9x9xf32>) -> tensor<2x4x9x9xf32>
  func.return %8 : tensor<2x4x9x9xf32>
}"""


def test_inverted_residual_epilogues_three_kernels() -> None:
    """bias + clamp after the 1x1 expand and the depthwise conv, bias +
    residual add after the 1x1 project: three tiled kernels."""
    modes = [g.attributes["schedule_text"].data.split(",")[0]  # type: ignore[attr-defined]
             for g in window_groups(run(INVERTED_RESIDUAL, FUSED))]
    assert modes == ["window: 1x1 conv as a GEMM over pixels", "window: depthwise conv",
                     "window: 1x1 conv as a GEMM over pixels"]
    check_program(INVERTED_RESIDUAL, launches=3, pipeline=FUSED)


def _prologue_group(conv_attrs: str, x: tuple[int, int, int, int],
                    w: tuple[int, int, int, int]) -> str:
    """clamp(x) then a conv of it, and its result with a bias: one group."""
    out_shape = conv2d_shape(x, w, [1, 1], [1, 1, 1, 1], [1, 1], x[1] // w[1])
    out, xt, wt = tensor(out_shape), tensor(x), tensor(w)
    bt = tensor((w[0], 1, 1))
    return f"""
func.func @f(%x: {xt}, %w: {wt}, %b: {bt}) -> ({out}, {out}) {{
  %y, %c = fusion.group (%x, %w, %b) {{name = "g0", kind = "window"}}
      : ({xt}, {wt}, {bt}) -> ({out}, {out}) {{
  ^bb0(%xa: {xt}, %wa: {wt}, %ba: {bt}):
    %r = nn.clamp %xa {{min = 0.25, max = 1.5}} : {xt}
    %cv = nn.conv2d %r, %wa {{{conv_attrs}}} : ({xt}, {wt}) -> {out}
    %s = nn.add %cv, %ba : ({out}, {bt}) -> {out}
    fusion.yield %s, %cv : {out}, {out}
  }}
  func.return %y, %c : {out}, {out}
}}"""


@pytest.mark.parametrize(
    ("attrs", "x", "w"),
    [
        ("pads = [1, 1, 1, 1]", (1, 3, 6, 7), (4, 3, 3, 3)),
        ("pads = [1, 1, 1, 1], groups = 3", (1, 3, 6, 7), (3, 1, 3, 3)),
    ],
    ids=["general", "depthwise"],
)
def test_clamp_prologue_is_padded_after(attrs: str, x: tuple[int, int, int, int],
                                        w: tuple[int, int, int, int]) -> None:
    """clamp(0.25 .. 1.5) before the conv: padding taps stay zero, not
    clamp(0) = 0.25, and the conv result is a second output."""
    text = _prologue_group(attrs, x, w)
    assert ints(schedule(text, "tile-and-promote"), "window_tile")
    program = check_program(text, pipeline="tile-and-promote")
    assert "float32(0.25))" in program.kernels_source


def test_relu_prologue_before_pool_and_transposed_weight() -> None:
    text = """
func.func @f(%x: tensor<1x2x6x5xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x3x6x5xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "window"}
      : (tensor<1x2x6x5xf32>, tensor<2x3x3x3xf32>) -> tensor<1x3x6x5xf32> {
  ^bb0(%a: tensor<1x2x6x5xf32>, %wa: tensor<2x3x3x3xf32>):
    %r = nn.relu %a : tensor<1x2x6x5xf32>
    %wt = nn.transpose %wa {perm = [1, 0, 2, 3]} : (tensor<2x3x3x3xf32>) -> tensor<3x2x3x3xf32>
    %c = nn.conv2d %r, %wt {pads = [1, 1, 1, 1]}
        : (tensor<1x2x6x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x5xf32>
    fusion.yield %c : tensor<1x3x6x5xf32>
  }
  func.return %y : tensor<1x3x6x5xf32>
}"""
    check_program(text, pipeline="tile-and-promote")
    pool = """
func.func @f(%x: tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "window"}
      : (tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%a: tensor<1x2x7x7xf32>):
    %n = nn.neg %a : tensor<1x2x7x7xf32>
    %p = nn.max_pool2d %n {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
        : (tensor<1x2x7x7xf32>) -> tensor<1x2x4x4xf32>
    fusion.yield %p : tensor<1x2x4x4xf32>
  }
  func.return %y : tensor<1x2x4x4xf32>
}"""
    check_program(pool, pipeline="tile-and-promote")


# --- f64 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "pads", "groups"),
    [
        ((1, 6, 5, 5), (5, 6, 1, 1), [0, 0, 0, 0], 1),
        ((1, 3, 6, 5), (4, 3, 3, 3), [1, 1, 1, 1], 1),
        ((1, 3, 6, 5), (3, 1, 3, 3), [1, 1, 1, 1], 3),
    ],
    ids=["1x1", "3x3", "depthwise"],
)
def test_f64(x: tuple[int, int, int, int], w: tuple[int, int, int, int], pads: list[int],
             groups: int) -> None:
    text = conv_program(x, w, [1, 1], pads, [1, 1], groups, dtype="f64")
    program = check_program(text, pipeline=PIPELINE, tolerance=F64)
    assert "cuda.shared.array" in program.kernels_source
    assert "float64)" in program.kernels_source


# --- the shared-memory limit -------------------------------------------------------------------


def test_shared_memory_limit_forces_a_smaller_tile() -> None:
    text = conv_program((1, 16, 10, 9), (6, 16, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1)
    free = schedule(text)
    limited_pipeline = PIPELINE.replace("tile-and-promote",
                                        "tile-and-promote{shared_memory_limit=1500}")
    module = run(text, limited_pipeline)
    generate_program(module)
    (g,) = window_groups(module)
    used = g.attributes["shared_bytes_est"].value.data  # type: ignore[attr-defined]
    assert used <= 1500 < free.attributes["shared_bytes_est"].value.data  # type: ignore[attr-defined]
    th, tw, _, ci_step = ints(g, "window_tile")
    fth, ftw, _, fci = ints(free, "window_tile")
    assert th * tw * ci_step < fth * ftw * fci
    notes = collect_remarks(module)
    assert any("group g0: window tile" in n and "over the limit of 1500" in n
               for n in notes), notes
    program = check_program(text, pipeline=limited_pipeline)
    assert f"static shared memory: {used} bytes" in program.kernels_source


def test_recorded_plan_that_cannot_be_built_is_an_error() -> None:
    from fusec.analysis.diagnostics import FusecError

    text = recorded_group((1, 4, 6, 6), (4, 4, 3, 3), "pads = [1, 1, 1, 1]", [4, 4, 4, 2], [3, 1])
    g = next(op for op in parse_module(make_context(), text, "t.mlir").walk()
             if isinstance(op, GroupOp))
    with pytest.raises(FusecError, match="not a whole number of thread tiles"):
        emit_scheduled(g, H200)
    g.attributes["schedule"] = WindowSchedule.make(path="general", th=4, tw=4, oc_t=4,
                                                   ci_step=2, pt=2, ot=1)
    emit_scheduled(g, H200)  # 4 rows of 2 per thread, 4 channels of 1: buildable
