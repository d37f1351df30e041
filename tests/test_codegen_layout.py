"""Layout kernels (transpose, slice, concat, gather) and reshape views in numba's
CUDA simulator against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.analysis.program import Program
from fusec.codegen.generate import generate_program
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling.layout_collapse import collapse_transpose


def run_text(text: str, launches: int, inputs: list[np.ndarray] | None = None) -> Program:
    """Compile `@f` one kernel per op, run it in the simulator, compare with
    the reference (exactly: layout ops move elements, they compute nothing)."""
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    verify_module(module)
    passes = parse_pipeline_spec(make_registry([]), "decompose,group-each-op")
    PipelineRunner(ctx, passes).run(module)
    program = generate_program(module)
    assert len(program.functions["f"].launches) == launches, program.kernels_source
    reference = parse_module(make_context(), text, "test.mlir")
    if inputs is None:
        inputs = random_inputs(find_function(reference, "f"), seed=1)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_array_equal(g, e.astype(g.dtype), err_msg=program.kernels_source)
    return program


def one_op(op: str, ins: list[str], out: str, attrs: str) -> str:
    args = ", ".join(f"%a{k}: {t}" for k, t in enumerate(ins))
    names = ", ".join(f"%a{k}" for k in range(len(ins)))
    return (f"func.func @f({args}) -> {out} {{\n"
            f"  %y = {op} {names} {{{attrs}}} : ({', '.join(ins)}) -> {out}\n"
            f"  func.return %y : {out}\n}}\n")


@pytest.mark.parametrize(("shape", "perm"), [
    ((4, 8), (1, 0)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 3, 4), (0, 2, 1)),
    ((2, 1, 3, 4), (3, 1, 0, 2)),
    ((2, 3, 4, 2), (0, 1, 3, 2)),
    ((3, 4), (0, 1)),
])
def test_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    src = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    dst = "tensor<" + "x".join(str(shape[p]) for p in perm) + "xf32>"
    run_text(one_op("nn.transpose", [src], dst, f"perm = {list(perm)}"), launches=1)


@pytest.mark.parametrize(("shape", "perm"), [
    ((40, 36), (1, 0)),  # partial tiles in both dimensions
    ((2, 33, 32), (0, 2, 1)),
    ((2, 1, 32, 33), (1, 0, 3, 2)),
    ((3, 1, 5, 7), (0, 3, 1, 2)),  # odd sizes, a size-1 axis, NHWC -> NCHW
])
def test_tiled_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> None:
    """A transpose of the innermost axis goes through the pointwise view
    schedule's shared tile (one flat padded array), 4 elements per thread."""
    src = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    dst = "tensor<" + "x".join(str(shape[p]) for p in perm) + "xf32>"
    program = run_text(one_op("nn.transpose", [src], dst, f"perm = {list(perm)}"), launches=1)
    launch = program.functions["f"].launches[0]
    assert launch.block == (32, 8, 1)
    assert "cuda.shared.array(" in program.kernels_source
    assert "4 elements per thread" in program.kernels_source


def test_collapse_transpose() -> None:
    assert collapse_transpose((2, 3, 4), (2, 0, 1)) == ([6, 4], [1, 0])
    assert collapse_transpose((2, 3, 4), (0, 1, 2)) == ([24], [0])
    assert collapse_transpose((2, 1, 3, 4), (3, 1, 0, 2)) == ([2, 3, 4], [2, 0, 1])
    assert collapse_transpose((1, 1), (1, 0)) == ([1], [0])


@pytest.mark.parametrize(("attrs", "out"), [
    ("starts = [1, 2], limits = [3, 8], strides = [1, 2]", "2x3"),
    ("starts = [0, 0], limits = [4, 8]", "4x8"),
    ("starts = [3, 1], limits = [4, 7], strides = [2, 3]", "1x2"),
])
def test_slice(attrs: str, out: str) -> None:
    run_text(one_op("nn.slice", ["tensor<4x8xf32>"], f"tensor<{out}xf32>", attrs), launches=1)


@pytest.mark.parametrize(("shapes", "axis", "out"), [
    (["2x3", "2x5"], 1, "2x8"),
    (["2x3", "1x3", "3x3"], 0, "6x3"),
    (["2x1x4", "2x2x4", "2x3x4"], -2, "2x6x4"),
    (["2x3"], 0, "2x3"),
])
def test_concat(shapes: list[str], axis: int, out: str) -> None:
    ins = [f"tensor<{s}xf32>" for s in shapes]
    run_text(one_op("nn.concat", ins, f"tensor<{out}xf32>", f"axis = {axis}"), launches=1)


def test_concat_of_one_value_twice() -> None:
    text = """func.func @f(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  %y = nn.concat %a, %a {axis = 1} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  func.return %y : tensor<2x6xf32>
}
"""
    program = run_text(text, launches=1)
    launch = program.functions["f"].launches[0]
    assert len(launch.args) == 2  # the one input, read for both pieces, and the output


@pytest.mark.parametrize(("table", "indices", "axis", "out"), [
    ("10x4xf32", "5xi64", 0, "5x4xf32"),
    ("10x4xf32", "2x3xi32", 0, "2x3x4xf32"),
    ("3x10x2xf32", "4xi64", 1, "3x4x2xf32"),
    ("3x10xi32", "2x2xi32", 1, "3x2x2xi32"),
])
def test_gather(table: str, indices: str, axis: int, out: str) -> None:
    text = one_op("nn.gather", [f"tensor<{table}>", f"tensor<{indices}>"], f"tensor<{out}>",
                  f"axis = {axis}")
    run_text(text, launches=1)


def test_gather_wraps_negative_and_clamps_out_of_range_indices() -> None:
    text = one_op("nn.gather", ["tensor<5x2xf32>", "tensor<4xi64>"], "tensor<4x2xf32>",
                  "axis = 0")
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    program = generate_program_for(text)
    indices = np.array([-1, -5, 7, -9], dtype=np.int64)
    (got,) = run_program(program, "f", [table, indices], device="sim")
    # -1 and -5 wrap as numpy.take does; 7 and -9 are outside: clamped.
    np.testing.assert_array_equal(got, table[[4, 0, 4, 0]])


def generate_program_for(text: str) -> Program:
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "group-each-op")).run(module)
    return generate_program(module)


def test_reshape_is_a_view() -> None:
    text = """func.func @f(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<8x4xf32>) {
  %e = nn.exp %x : tensor<4x8xf32>
  %r = nn.reshape %e : (tensor<4x8xf32>) -> tensor<32xf32>
  %s = nn.reshape %r : (tensor<32xf32>) -> tensor<8x4xf32>
  %t = nn.neg %s : tensor<8x4xf32>
  func.return %r, %t : tensor<32xf32>, tensor<8x4xf32>
}
"""
    program = run_text(text, launches=2)
    fp = program.functions["f"]
    assert len(fp.views) == 2
    assert fp.views[1].source == fp.views[0].value


def test_layout_after_pointwise_and_constant() -> None:
    text = """func.func @f(%x: tensor<4x6xf32>) -> tensor<3x4xf32> {
  %c = nn.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32>
  %y = nn.add %x, %c : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %s = nn.slice %y {starts = [0, 0], limits = [4, 6], strides = [1, 2]}
      : (tensor<4x6xf32>) -> tensor<4x3xf32>
  %t = nn.transpose %s {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  func.return %t : tensor<3x4xf32>
}
"""
    program = run_text(text, launches=3)
    assert len(program.functions["f"].constants) == 1


@pytest.mark.parametrize(("ins", "out", "op", "attrs"), [
    # the benchmark cases at tiny shapes, odd sizes and size-1 axes
    (["3x5x7xf32"], "3x7x5xf32", "nn.transpose", "perm = [0, 2, 1]"),
    (["2x1x5xf32"], "2x5x1xf32", "nn.transpose", "perm = [0, 2, 1]"),
    (["2x3x5xf32", "2x4x5xf32"], "2x7x5xf32", "nn.concat", "axis = 1"),
    (["3x1x5xf32", "3x2x5xf32"], "3x3x5xf32", "nn.concat", "axis = 1"),
    (["7x3xf32", "2x5xi64"], "2x5x3xf32", "nn.gather", "axis = 0"),
    (["7x1xf32", "3xi32"], "3x1xf32", "nn.gather", "axis = 0"),
    (["2x3x5x3xf16"], "2x3x3x5xf16", "nn.transpose", "perm = [0, 3, 1, 2]"),
    (["1x3x1x5xf16"], "1x5x3x1xf16", "nn.transpose", "perm = [0, 3, 1, 2]"),
    (["3x1x7x5xf32"], "3x1x3x5xf32", "nn.slice",
     "starts = [0, 0, 1, 0], limits = [3, 1, 7, 5], strides = [1, 1, 2, 1]"),
    (["3x4x5xf32"], "1x4x5xf32", "nn.slice", "starts = [2, 0, 0], limits = [3, 4, 5]"),
])
def test_collapsed_layout_kernels(ins: list[str], out: str, op: str, attrs: str) -> None:
    """One kernel per layout op, several elements per thread, uint32 index
    math, exact against the reference on fresh random inputs."""
    text = one_op(op, [f"tensor<{s}>" for s in ins], f"tensor<{out}>", attrs)
    program = run_text(text, launches=1)
    source = program.kernels_source
    assert "elements per thread" in source and "uint32(" in source, source
    assert "for i in range" not in source  # not one element per grid-stride step


def test_layout_index_type_follows_the_largest_array() -> None:
    """A small gather from a table of 2^31 elements or more indexes in
    uint64; a table that fits, in uint32."""
    def source(rows: int) -> str:
        text = one_op("nn.gather", [f"tensor<{rows}x1024xf32>", "tensor<4xi64>"],
                      "tensor<4x1024xf32>", "axis = 0")
        return generate_program_for(text).kernels_source.split("\ndef f_")[-1]
    assert "uint64(" in source(2**21) and "uint32(" not in source(2**21)
    assert "uint32(" in source(2**20 - 1) and "uint64(" not in source(2**20 - 1)


def test_collapsed_shapes() -> None:
    """Concat, gather and slice collapse to as few dimensions as they allow."""
    text = one_op("nn.concat", ["tensor<2x3x4x5xf32>", "tensor<2x1x4x5xf32>"],
                  "tensor<2x4x4x5xf32>", "axis = 1")
    assert "iteration shape 2x80\n" in generate_program_for(text).kernels_source
    text = one_op("nn.gather", ["tensor<2x9x3x4xf32>", "tensor<5x6xi64>"],
                  "tensor<2x5x6x3x4xf32>", "axis = 1")
    assert "iteration shape 2x30x12\n" in generate_program_for(text).kernels_source
    text = one_op("nn.slice", ["tensor<4x6x5xf32>"], "tensor<2x6x5xf32>",
                  "starts = [1, 0, 0], limits = [3, 6, 5]")
    assert "iteration shape 60\n" in generate_program_for(text).kernels_source
