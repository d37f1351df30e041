"""Pointwise kernels in numba's CUDA simulator against the reference interpreter.

Every elementwise op runs alone (the fusion-off baseline: one launch per op),
with the broadcasting cases that need distinct index math; hand-written
multi-op groups check chains, several results, broadcast_to inside a group,
a result smaller than the iteration shape and half precision. Shapes are
tiny: the simulator runs every thread in Python.
"""

from __future__ import annotations

import codegen_harness as harness
import pytest

from fusec.analysis.program import Program

BASELINE = "decompose,group-each-op"
# float32 kernels against the float64 oracle; half precision rounds each result.
TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "float64": 1e-12}


def compile_text(text: str, pipeline: str = BASELINE) -> Program:
    """Parse, run `pipeline`, generate."""
    return harness.compile_text(text, pipeline)


def check_program(
    text: str, launches: int, pipeline: str = BASELINE, seed: int = 0
) -> Program:
    """Compile `text`, run `@f` in the simulator, compare with the reference
    (per-dtype tolerance) and assert the launch count."""
    return harness.check_program(text, launches, pipeline, seed, tolerance=TOLERANCE)


def unary(op: str, attrs: str = "", shape: str = "4x8", element: str = "f32") -> str:
    t = f"tensor<{shape}x{element}>"
    return (f"func.func @f(%x: {t}) -> {t} {{\n"
            f"  %y = {op} %x{attrs} : {t}\n  func.return %y : {t}\n}}\n")


def binary(op: str, a: str, b: str, out: str, attrs: str = "", res: str = "f32") -> str:
    ta, tb, to = f"tensor<{a}f32>", f"tensor<{b}f32>", f"tensor<{out}{res}>"
    return (f"func.func @f(%a: {ta}, %b: {tb}) -> {to} {{\n"
            f"  %y = {op} %a, %b{attrs} : ({ta}, {tb}) -> {to}\n  func.return %y : {to}\n}}\n")


UNARY = ["nn.neg", "nn.abs", "nn.exp", "nn.log", "nn.sqrt", "nn.rsqrt", "nn.reciprocal",
         "nn.tanh", "nn.erf", "nn.sigmoid", "nn.relu", "nn.silu"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op: str) -> None:
    check_program(unary(op), launches=1)


@pytest.mark.parametrize("attrs", [
    ' {approximate = "none"}', ' {approximate = "tanh"}', "",
])
def test_gelu(attrs: str) -> None:
    check_program(unary("nn.gelu", attrs), launches=1)


@pytest.mark.parametrize("attrs", [
    " {min = -0.5, max = 0.5}", " {min = 0.0}", " {max = 0.25}",
])
def test_clamp(attrs: str) -> None:
    check_program(unary("nn.clamp", attrs), launches=1)


@pytest.mark.parametrize("op", ["nn.neg", "nn.abs", "nn.relu"])
def test_unary_int(op: str) -> None:
    check_program(unary(op, element="i32"), launches=1)


@pytest.mark.parametrize("op", [
    "nn.add", "nn.sub", "nn.mul", "nn.div", "nn.max", "nn.min", "nn.pow",
])
def test_binary_same_shape(op: str) -> None:
    check_program(binary(op, "4x8x", "4x8x", "4x8x"), launches=1)


@pytest.mark.parametrize(("a", "b", "out"), [
    ("4x8x", "", "4x8x"),  # scalar
    ("4x8x", "8x", "4x8x"),  # row
    ("4x8x", "4x1x", "4x8x"),  # column
    ("2x3x4x", "2x1x4x", "2x3x4x"),  # middle dimension
    ("4x1x", "1x8x", "4x8x"),  # both operands broadcast
    ("3x1x5x", "4x1x", "3x4x5x"),  # rank extension, broadcast on both sides
    ("3x5x", "5x", "3x5x"),  # row of odd length
    ("4x3x", "4x1x", "4x3x"),  # 12 elements
])
def test_broadcasting(a: str, b: str, out: str) -> None:
    program = check_program(binary("nn.sub", a, b, out), launches=1)
    # Fewer elements than one chunk: loads clamped, stores guarded.
    assert "ok3 = w3_raw < " in program.kernels_source


def test_whole_chunks_need_no_guards() -> None:
    # 2 chunks of 1024: each thread's 4 elements 256 apart, loaded first.
    program = check_program(binary("nn.add", "2048x", "2048x", "2048x"), launches=1)
    launch = program.functions["f"].launches[0]
    assert launch.grid == (2, 1, 1) and launch.block == (256, 1, 1)
    text = program.kernels_source
    assert "w3 = base + uint32(768)" in text and "ok0" not in text
    assert text.index("a1_3_0 = in1[w3]") < text.index("t0_0_0 = ") < text.index("out0[w0] = ")


@pytest.mark.parametrize("predicate", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_cmp(predicate: str) -> None:
    # eq/ne need equal elements: compare against a clamped copy.
    text = """func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xi1> {
  %c = nn.clamp %a {min = 0.0} : tensor<4x8xf32>
  %m = nn.cmp %a, %c {predicate = "PRED"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %n = nn.cmp %a, %b {predicate = "PRED"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %y = nn.select %m, %m, %n : (tensor<4x8xi1>, tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  func.return %y : tensor<4x8xi1>
}
"""
    check_program(text.replace("PRED", predicate), launches=4)


def test_select_broadcasts_all_operands() -> None:
    text = """func.func @f(%m: tensor<4x1xi1>, %a: tensor<8xf32>, %b: tensor<f32>)
    -> tensor<4x8xf32> {
  %y = nn.select %m, %a, %b : (tensor<4x1xi1>, tensor<8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""
    check_program(text, launches=1)


@pytest.mark.parametrize(("src", "dst"), [
    ("f32", "f16"), ("f16", "f32"), ("f32", "i32"), ("i32", "f32"), ("f32", "i1"),
    ("i1", "f32"), ("i32", "i64"), ("i1", "i32"),
])
def test_cast(src: str, dst: str) -> None:
    scale = "" if src != "f32" else "  %s = nn.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) " \
        "-> tensor<4x8xf32>\n"
    source = "%s" if scale else "%x"
    text = (f"func.func @f(%x: tensor<4x8x{src}>) -> tensor<4x8x{dst}> {{\n{scale}"
            f"  %y = nn.cast {source} : (tensor<4x8x{src}>) -> tensor<4x8x{dst}>\n"
            f"  func.return %y : tensor<4x8x{dst}>\n}}\n")
    check_program(text, launches=2 if scale else 1)


def test_broadcast_to_alone() -> None:
    text = """func.func @f(%x: tensor<4x1xf32>) -> tensor<2x4x8xf32> {
  %y = nn.broadcast_to %x : (tensor<4x1xf32>) -> tensor<2x4x8xf32>
  func.return %y : tensor<2x4x8xf32>
}
"""
    check_program(text, launches=1)


# --- multi-op groups ---------------------------------------------------------------


def chain_group(length: int) -> str:
    """One group of `length` ops alternating `* 1.001` and `+ 0.001` (chain16)."""
    t = "tensor<64xf32>"
    lines, prev = [], "%xa"
    for k in range(length):
        op, c = ("nn.mul", "%ca") if k % 2 == 0 else ("nn.add", "%da")
        lines.append(f"    %t{k} = {op} {prev}, {c} : ({t}, tensor<f32>) -> {t}")
        prev = f"%t{k}"
    body = "\n".join(lines)
    return f"""func.func @f(%x: {t}) -> {t} {{
  %c = nn.constant dense<1.001> : tensor<f32>
  %d = nn.constant dense<0.001> : tensor<f32>
  %y = fusion.group (%x, %c, %d) {{name = "g0", kind = "pointwise"}}
      : ({t}, tensor<f32>, tensor<f32>) -> {t} {{
  ^bb0(%xa: {t}, %ca: tensor<f32>, %da: tensor<f32>):
{body}
    fusion.yield {prev} : {t}
  }}
  func.return %y : {t}
}}
"""


def test_chain_of_32_ops_is_one_vectorized_kernel() -> None:
    program = check_program(chain_group(32), launches=1, pipeline="group-each-op")
    launch = program.functions["f"].launches[0]
    assert [a.view_shape for a in launch.args] == [(64,), (1,), (1,), (64,)]
    assert launch.ops == ["nn.mul", "nn.add"] * 16
    assert "a0_3_0 = in0[w3]" in program.kernels_source


HORIZONTAL = """func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xi1>) {
  %y:4 = fusion.group (%x, %b, %c) {name = "g0", kind = "pointwise"}
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>)
      -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xi1>) {
  ^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>, %ca: tensor<4x1xf32>):
    %e = nn.exp %ba : tensor<8xf32>
    %bb = nn.broadcast_to %e : (tensor<8xf32>) -> tensor<4x8xf32>
    %s = nn.mul %xa, %bb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %t = nn.add %s, %ca : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %m = nn.cmp %t, %s {predicate = "gt"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    %u = nn.select %m, %t, %xa : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>)
        -> tensor<4x8xf32>
    fusion.yield %s, %u, %e, %m : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xi1>
  }
  func.return %y#0, %y#1, %y#2, %y#3
      : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xi1>
}
"""


def test_multi_output_group_with_smaller_result() -> None:
    program = check_program(HORIZONTAL, launches=1, pipeline="group-each-op")
    # The [8] result is written once per element, by the threads of row 0.
    text = program.kernels_source
    assert "c0_1 = uint32(j0 // uint32(8))" in text and "if c0_1 == uint32(0):" in text


HALF = """func.func @f(%x: tensor<4x8xf16>, %b: tensor<8xf16>)
    -> (tensor<4x8xf16>, tensor<4x8xf32>) {
  %y:2 = fusion.group (%x, %b) {name = "g0", kind = "pointwise"}
      : (tensor<4x8xf16>, tensor<8xf16>) -> (tensor<4x8xf16>, tensor<4x8xf32>) {
  ^bb0(%xa: tensor<4x8xf16>, %ba: tensor<8xf16>):
    %s = nn.add %xa, %ba : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
    %g = nn.gelu %s {approximate = "tanh"} : tensor<4x8xf16>
    %w = nn.cast %g : (tensor<4x8xf16>) -> tensor<4x8xf32>
    %h = nn.cast %w : (tensor<4x8xf32>) -> tensor<4x8xf16>
    %v = nn.cast %h : (tensor<4x8xf16>) -> tensor<4x8xf32>
    fusion.yield %g, %v : tensor<4x8xf16>, tensor<4x8xf32>
  }
  func.return %y#0, %y#1 : tensor<4x8xf16>, tensor<4x8xf32>
}
"""


def test_half_precision_group() -> None:
    program = check_program(HALF, launches=1, pipeline="group-each-op")
    # Loads of 4 halves (8-byte words, widened to float32 lane by lane); the
    # explicit cast to f16 rounds inside the kernel.
    assert "ld_wide64(in0, k0)" in program.kernels_source
    assert "float32(float16(" in program.kernels_source


def test_collapse_dims() -> None:
    from fusec.analysis.collapsed_dims import collapse_dims

    assert collapse_dims((2, 3, 4), [(2, 3, 4), (2, 3, 4)]) == ((24,), [(24,), (24,)])
    assert collapse_dims((2, 3, 4), [(2, 3, 4), (4,)]) == ((6, 4), [(6, 4), (1, 4)])
    assert collapse_dims((2, 3, 4), [(2, 1, 4)]) == ((2, 3, 4), [(2, 1, 4)])
    assert collapse_dims((4, 1, 8), [(4, 1, 8), ()]) == ((32,), [(32,), (1,)])


BATCH_NORM = """func.func @f(%x: tensor<2x3x2x2xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>,
             %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x2x2xf32> {
  %y = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-03 FUSION}
      : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> tensor<2x3x2x2xf32>
  func.return %y : tensor<2x3x2x2xf32>
}
"""


@pytest.mark.parametrize(("pipeline", "contract"), [
    ("group-each-op", ""),  # undecomposed: one kernel reads [C] along axis 1
    (BASELINE, ', fusion = "never"'),  # decompose leaves a contracted composite whole
])
def test_batch_norm_whole(pipeline: str, contract: str) -> None:
    program = check_program(BATCH_NORM.replace(" FUSION", contract), launches=1,
                            pipeline=pipeline)
    assert "math.sqrt" in program.kernels_source


SPLAT_INSIDE = """func.func @f(%x: tensor<4x8xf32>, %i: tensor<8xi32>)
    -> (tensor<4x8xf32>, tensor<8xi1>, tensor<f32>) {
  %y:3 = fusion.group (%x, %i) {name = "g0", kind = "pointwise"}
      : (tensor<4x8xf32>, tensor<8xi32>) -> (tensor<4x8xf32>, tensor<8xi1>, tensor<f32>) {
  ^bb0(%xa: tensor<4x8xf32>, %ia: tensor<8xi32>):
    %c = nn.constant dense<1.5> : tensor<f32>
    %k = nn.constant dense<3> : tensor<8xi32>
    %s = nn.mul %xa, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %m = nn.cmp %ia, %k {predicate = "lt"} : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %e = nn.exp %c : tensor<f32>
    fusion.yield %s, %m, %e : tensor<4x8xf32>, tensor<8xi1>, tensor<f32>
  }
  func.return %y#0, %y#1, %y#2 : tensor<4x8xf32>, tensor<8xi1>, tensor<f32>
}
"""


def test_splat_constants_inside_a_group_are_literals() -> None:
    program = check_program(SPLAT_INSIDE, launches=1, pipeline="group-each-op")
    assert "float32(1.5)" in program.kernels_source
    assert "int32(3)" in program.kernels_source
    # The scalar result is written by one thread only.
    assert "if j0 == uint32(0):\n            out2[0] = " in program.kernels_source
