"""Chains of views as one index map (analysis/view_map.py): a reshape that
merges dimensions a transpose left apart no longer splits a chain into two
kernels. The maps agree with NumPy on random chains; each program below
runs in numba's CUDA simulator against the reference interpreter, with one
kernel, odd and prime extents and fresh random inputs.
"""

from __future__ import annotations

import itertools
import random

import codegen_harness as harness
import numpy as np
import pytest
from sweep import sampled
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Block, Operation

from fusec.analysis.program import Program
from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_map import ViewMap, common_parts, compose
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import element_type_name, int_list, tensor_shape
from fusec.dialects.shapes import numel
from fusec.reference.interpreter import find_function, random_inputs, round_to_element_type


def t(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def check(text: str, seed: int) -> Program:
    """Compiled as `fusec` compiles (the default pipeline): one kernel, and
    the numbers of the reference interpreter on fresh random inputs (rounded
    to their element types), within the output type's tolerance."""
    program = compile_model(text, fusion=True, target="h200").program
    assert len(program.functions["f"].launches) == 1, program.kernels_source
    module = parse_module(make_context(), text, "test.mlir")
    func = find_function(module, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, seed), func.function_type.inputs.data, strict=True)]
    (expected,) = harness.run_module(module, inputs, "f")
    (got,) = harness.run_program(program, "f", inputs, device="sim")
    (out,) = func.function_type.outputs.data
    tolerance = element(element_type_name(out.element_type)).tolerance  # type: ignore[attr-defined]
    err = float(np.max(np.abs(got.astype(np.float64) - expected)))
    assert err <= tolerance * max(float(np.max(np.abs(expected))), 1.0), program.kernels_source
    return program


def _chain(shape: tuple[int, ...], steps: list[tuple[str, list[int]]]) -> list[Operation]:
    """Detached ops: reshapes (`r`, new shape) and transposes (`t`, perm)."""
    value = Block(arg_types=[TensorType(Float32Type(), shape)]).args[0]
    ops: list[Operation] = []
    for kind, arg in steps:
        old = tensor_shape(value)
        new = arg if kind == "r" else [old[p] for p in arg]
        result = TensorType(value.type.element_type, new)  # type: ignore[attr-defined]
        if kind == "r":
            op = nn.ReshapeOp.create(operands=[value], result_types=[result])
        else:
            op = nn.TransposeOp.create(operands=[value], result_types=[result],
                                       attributes={"perm": int_list(arg)})
        ops.append(op)
        value = op.results[0]
    return ops


def _numpy(x: np.ndarray, steps: list[tuple[str, list[int]]]) -> np.ndarray:
    for kind, arg in steps:
        x = x.reshape(arg) if kind == "r" else x.transpose(arg)
    return x


def _read(view: StridedView | ViewMap, buffer: np.ndarray) -> np.ndarray:
    """Every element of the view, by its index formula."""
    out = np.empty(view.shape, buffer.dtype)
    for idx in itertools.product(*(range(n) for n in view.shape)):
        if isinstance(view, ViewMap):
            coords = view.split([str(c) for c in idx], lambda c, k: str(int(c) // k),
                                lambda c, k: str(int(c) % k))
            fine = view.fine
            out[idx] = buffer[fine.offset + sum(int(c) * s for c, s in zip(
                coords, fine.strides, strict=True))]
        else:
            out[idx] = buffer[view.offset + sum(c * s for c, s in zip(idx, view.strides,
                                                                      strict=True))]
    return out


def _random_steps(rng: random.Random, shape: list[int]) -> list[tuple[str, list[int]]]:
    """Split each dimension in two where it factors, permute, merge neighbours."""
    split: list[int] = []
    for n in shape:
        k = next((k for k in (2, 3, 5) if n % k == 0 and n > k), None)
        split += [k, n // k] if k and rng.random() < 0.8 else [n]
    perm = list(range(len(split)))
    rng.shuffle(perm)
    permuted = [split[p] for p in perm]
    merged: list[int] = []
    for n in permuted:
        if merged and rng.random() < 0.5:
            merged[-1] *= n
        else:
            merged.append(n)
    return [("r", split), ("t", perm), ("r", merged)]


@pytest.mark.parametrize("seed", range(12))
def test_map_reads_what_numpy_reads(seed: int) -> None:
    rng = random.Random(seed)
    shape = [rng.choice([2, 3, 6, 10, 15]) for _ in range(rng.choice([2, 3]))]
    steps = _random_steps(rng, shape)
    view = compose(shape, _chain(tuple(shape), steps))
    assert view is not None
    buffer = np.random.default_rng(seed).standard_normal(numel(shape)).astype(np.float32)
    expected = _numpy(buffer.reshape(shape), steps)
    np.testing.assert_array_equal(_read(view, buffer), expected)


def test_head_merge_map() -> None:
    steps = [("t", [0, 2, 1, 3]), ("r", [2, 7, 40])]
    view = compose((2, 5, 7, 8), _chain((2, 5, 7, 8), steps))
    assert isinstance(view, ViewMap)
    assert view.parts == ((2,), (7,), (5, 8))
    assert view.fine == StridedView((2, 7, 5, 8), (280, 8, 56, 1))


def test_sizes_that_do_not_factor_have_no_map() -> None:
    # [4, 6] transposed is [6, 4]; as [8, 3] its first row crosses two rows
    steps = [("t", [1, 0]), ("r", [8, 3])]
    assert compose((4, 6), _chain((4, 6), steps)) is None
    assert common_parts((2, 3), (3, 2)) is None
    assert common_parts((8, 64), (512,)) == (8, 64)
    assert common_parts((4, 15), (12, 5)) == (4, 3, 5)


def test_head_merge_is_one_kernel() -> None:
    # [B, H, S, D] -> [B, S, H * D] then a bias: was a transpose copy and an add
    x, tt, o, b = t((3, 5, 7, 11)), t((3, 7, 5, 11)), t((3, 7, 55)), t((55,))
    program = check(f"func.func @f(%x: {x}, %b: {b}) -> {o} {{\n"
                    f"  %t = nn.transpose %x {{perm = [0, 2, 1, 3]}} : ({x}) -> {tt}\n"
                    f"  %r = nn.reshape %t : ({tt}) -> {o}\n"
                    f"  %y = nn.add %r, %b : ({o}, {b}) -> {o}\n"
                    f"  func.return %y : {o}\n}}\n", seed=3)
    assert "// uint32(11)) * uint32(77)" in program.kernels_source  # the head, divided out


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_window_partition_is_one_kernel(dtype: str) -> None:
    # [B, H, W, C] into 3x3 windows: [B * H/3 * W/3, 9, C], scaled on both sides
    x, r, tr = t((2, 6, 9, 5), dtype), t((2, 2, 3, 3, 3, 5), dtype), t((2, 2, 3, 3, 3, 5), dtype)
    o = t((12, 9, 5), dtype)
    check(f"func.func @f(%x: {x}) -> {o} {{\n"
          f"  %e = nn.exp %x : {x}\n"
          f"  %r = nn.reshape %e : ({x}) -> {r}\n"
          f"  %t = nn.transpose %r {{perm = [0, 1, 3, 2, 4, 5]}} : ({r}) -> {tr}\n"
          f"  %w = nn.reshape %t : ({tr}) -> {o}\n"
          f"  %y = nn.tanh %w : {o}\n"
          f"  func.return %y : {o}\n}}\n", seed=4)


def test_window_reverse_is_one_kernel() -> None:
    x, r, tr, o = t((12, 9, 7)), t((2, 2, 3, 3, 3, 7)), t((2, 2, 3, 3, 3, 7)), t((2, 6, 9, 7))
    check(f"func.func @f(%x: {x}) -> {o} {{\n"
          f"  %r = nn.reshape %x : ({x}) -> {r}\n"
          f"  %t = nn.transpose %r {{perm = [0, 1, 3, 2, 4, 5]}} : ({r}) -> {tr}\n"
          f"  %w = nn.reshape %t : ({tr}) -> {o}\n"
          f"  %y = nn.sigmoid %w : {o}\n"
          f"  func.return %y : {o}\n}}\n", seed=5)


def test_channel_shuffle_is_one_kernel() -> None:
    x, r, tr = t((2, 15, 7, 11)), t((2, 3, 5, 7, 11)), t((2, 5, 3, 7, 11))
    check(f"func.func @f(%x: {x}) -> {x} {{\n"
          f"  %r = nn.reshape %x : ({x}) -> {r}\n"
          f"  %t = nn.transpose %r {{perm = [0, 2, 1, 3, 4]}} : ({r}) -> {tr}\n"
          f"  %w = nn.reshape %t : ({tr}) -> {x}\n"
          f"  %y = nn.relu %w : {x}\n"
          f"  func.return %y : {x}\n}}\n", seed=6)


def pixel_shuffle(c: int, r: int, h: int, w: int, dtype: str) -> str:
    """[1, C*r*r, H, W] -> [1, C, H*r, W*r], plus a bias along the last axis."""
    x, s = t((1, c * r * r, h, w), dtype), t((1, c, r, r, h, w), dtype)
    tr, o, b = t((1, c, h, r, w, r), dtype), t((1, c, h * r, w * r), dtype), t((w * r,), dtype)
    return (f"func.func @f(%x: {x}, %b: {b}) -> {o} {{\n"
            f"  %s = nn.reshape %x : ({x}) -> {s}\n"
            f"  %t = nn.transpose %s {{perm = [0, 1, 4, 2, 5, 3]}} : ({s}) -> {tr}\n"
            f"  %o = nn.reshape %t : ({tr}) -> {o}\n"
            f"  %y = nn.add %o, %b : ({o}, {b}) -> {o}\n"
            f"  func.return %y : {o}\n}}\n")


def test_pixel_shuffle_by_two_reads_whole_sectors_without_a_tile() -> None:
    # a warp reads two runs of 16 floats: the flat schedule, no 2-wide tile
    program = check(pixel_shuffle(3, 2, 5, 7, "f32"), seed=7)
    assert "cuda.shared.array" not in program.kernels_source


@pytest.mark.parametrize(("r", "dtype"), [pytest.param(5, "f32", marks=pytest.mark.slow),
                                          (3, "bf16")])
def test_pixel_shuffle_staged_over_the_parts(r: int, dtype: str) -> None:
    # r runs of 32 / r elements would waste sectors: the tile, over the
    # parts of the map (iteration [1, C, H, r, W, r])
    program = check(pixel_shuffle(2, r, 3, 37, dtype), seed=8)
    assert "cuda.shared.array" in program.kernels_source
    assert f"iteration shape 2x3x{r}x37x{r}" in program.kernels_source


@pytest.mark.parametrize("perm", sampled(itertools.permutations(range(4)), 3))
def test_every_permutation_of_a_4d_view_chain(perm: tuple[int, ...]) -> None:
    # [3, 35, 2] split to [3, 5, 7, 2], permuted, its first two axes merged
    # (not contiguous for most permutations), then a bias along the last
    dims = (3, 5, 7, 2)
    out = [dims[p] for p in perm]
    x, s, tr = t((3, 35, 2)), t(dims), t(tuple(out))
    o, b = t((out[0] * out[1], out[2], out[3])), t((out[3],))
    check(f"func.func @f(%x: {x}, %b: {b}) -> {o} {{\n"
          f"  %s = nn.reshape %x : ({x}) -> {s}\n"
          f"  %t = nn.transpose %s {{perm = {list(perm)}}} : ({s}) -> {tr}\n"
          f"  %o = nn.reshape %t : ({tr}) -> {o}\n"
          f"  %y = nn.mul %o, %b : ({o}, {b}) -> {o}\n"
          f"  func.return %y : {o}\n}}\n", seed=sum(p * 4 ** k for k, p in enumerate(perm)))
