"""The runtime's promise that every array a kernel gets starts on a 16-byte
boundary (`runtime/array_alignment.py`), and the kernels that rely on it
(`codegen/wide_access.py`): one version of each body, no alignment test.
Run in numba's simulator, whose 16-byte helpers fault on a misaligned
address as the GPU does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numba import cuda

from fusec.analysis.diagnostics import FusecError
from fusec.codegen.wide_access import ARRAY_ALIGNMENT, alignment_tests
from fusec.dialects.element_types import bf16_bits, round_to_bf16
from fusec.runtime.array_alignment import aligned_address, aligned_array
from fusec.runtime.executor import Executor, run_program
from tests.codegen_harness import compile_text, one_element_in

FUSED = "decompose,form-fusion-groups"

HALF_BROADCAST = """func.func @f(%a: tensor<4x8xbf16>, %b: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %s = nn.mul %a, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %y = nn.add %s, %a : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %z = nn.tanh %y : tensor<4x8xbf16>
  func.return %y, %z : tensor<4x8xbf16>, tensor<4x8xbf16>
}"""

LAYER_NORM = """func.func @f(%x: tensor<3x64xf32>) -> tensor<3x64xf32> {
  %m = nn.reduce_mean %x {axes = [1], keepdims = true} : (tensor<3x64xf32>) -> tensor<3x1xf32>
  %d = nn.sub %x, %m : (tensor<3x64xf32>, tensor<3x1xf32>) -> tensor<3x64xf32>
  %q = nn.mul %d, %d : (tensor<3x64xf32>, tensor<3x64xf32>) -> tensor<3x64xf32>
  %v = nn.reduce_mean %q {axes = [1], keepdims = true} : (tensor<3x64xf32>) -> tensor<3x1xf32>
  %r = nn.rsqrt %v : tensor<3x1xf32>
  %y = nn.mul %d, %r : (tensor<3x64xf32>, tensor<3x1xf32>) -> tensor<3x64xf32>
  func.return %y : tensor<3x64xf32>
}"""


def test_only_wider_words_than_the_promise_are_tested() -> None:
    assert ARRAY_ALIGNMENT == 16
    assert alignment_tests([("in0", 16), ("out0", 8), ("in1", 4)]) == []
    assert alignment_tests([("in0", 32), ("in0", 32), ("in1", 16)]) == ["is_aligned(in0, 32)"]
    assert aligned_address(0x7F0000001000) and not aligned_address(0x7F0000001004)


def test_an_aligned_array_is_used_in_place_and_a_misaligned_one_copied() -> None:
    x = np.arange(12, dtype=np.float32)
    aligned = cuda.to_device(x)
    assert aligned_array(cuda, aligned, 0) is aligned
    view = one_element_in(x)
    copy = aligned_array(cuda, view, 0)
    assert copy is not view and copy._ary.ctypes.data % 16 == 0
    np.testing.assert_array_equal(copy.copy_to_host(), x)


def _bf16_device(a: np.ndarray) -> Any:
    return one_element_in(bf16_bits(a))


def test_half_words_of_a_misaligned_view() -> None:
    """bf16 operands one element (2 bytes) into their buffers: the kernel's
    8-byte words would fault on them; the runtime copies them first."""
    program = compile_text(HALF_BROADCAST, FUSED)
    assert len(program.functions["f"].launches) == 1
    assert "ld_wide" in program.kernels_source
    assert "is_aligned(" not in program.kernels_source.split("\n@cuda.jit\n")[-1]
    rng = np.random.default_rng(3)
    a = round_to_bf16(rng.standard_normal((4, 8)).astype(np.float32))
    b = round_to_bf16(rng.standard_normal(8).astype(np.float32))
    y = round_to_bf16(a * b + a)
    got = run_program(program, "f", [_bf16_device(a), _bf16_device(b)])
    for g, want in zip(got, [y, round_to_bf16(np.tanh(y))], strict=True):
        bits = np.asarray(g.copy_to_host()).astype(np.uint32) << 16
        np.testing.assert_allclose(bits.view(np.float32).reshape(4, 8), want,
                                   rtol=2**-7, atol=1e-6)


def test_a_misaligned_output_array_is_refused() -> None:
    program = compile_text(LAYER_NORM, FUSED)
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    executor = Executor(program, "f", "sim")
    with pytest.raises(FusecError, match="16-byte boundary"):
        executor.launch([cuda.to_device(x)], [one_element_in(np.zeros((3, 64), np.float32))])
    (y,) = executor.launch([one_element_in(x)], [cuda.to_device(np.zeros((3, 64), np.float32))])[0]
    d = x - x.mean(axis=1, keepdims=True)
    want = d / np.sqrt((d * d).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(y.copy_to_host(), want, rtol=1e-5, atol=1e-5)
