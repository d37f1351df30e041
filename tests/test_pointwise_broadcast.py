"""Pointwise kernels over every broadcast pattern, in f32, f16 and bf16.

Index math is unsigned and 32-bit below 2^31 elements, by constants, over
the dimensions each operand varies in (`codegen/pointwise_index.py`); half
arrays move 2 or 4 elements per access when the innermost extent allows
(`codegen/wide_access.py`), with a per-element path for views that are not
aligned. Each case runs in the simulator against the reference interpreter
with its kernel count; the PTX checks need NVRTC (no GPU).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sweep import sampled

import fusec.analysis.index_types as index_types
from fusec.analysis.collapsed_dims import collapse_dims
from fusec.analysis.diagnostics import FusecError
from fusec.codegen.ptx import compile_program_ptx
from fusec.dialects.element_types import bf16_bits, element, round_to_bf16
from tests.codegen_harness import compile_text
from tests.test_half_precision import FUSED, check

DTYPES = ["f32", "f16", "bf16"]

# (a, b, result): right-aligned broadcasting of `b` (and `a`) to the result.
PATTERNS = {
    "scalar": ("4x8", "", "4x8"),
    "per_row": ("4x8", "8", "4x8"),
    "per_column": ("4x8", "4x1", "4x8"),
    "per_channel_nchw": ("2x3x4x5", "3x1x1", "2x3x4x5"),
    "per_channel_odd_hw": ("2x3x3x3", "1x3x1x1", "2x3x3x3"),
    "middle_dims": ("2x3x4", "2x1x4", "2x3x4"),
    "size_1_dims": ("2x1x6", "3x1", "2x3x6"),
    "outer_product": ("5x1", "1x6", "5x6"),
    "inner_not_multiple_of_4": ("3x6", "6", "3x6"),
    "odd_flat": ("37", "37", "37"),
}


def kernel_text(source: str) -> str:
    """The last kernel of `source`, without the prelude."""
    return source.split("\n@cuda.jit\n")[-1]


def _t(shape: str, dtype: str) -> str:
    return f"tensor<{shape}x{dtype}>" if shape else f"tensor<{dtype}>"


def two_outputs(a: str, b: str, out: str, dtype: str) -> str:
    """`y = a * b + a` and `tanh(y)`: two results, both operands broadcast."""
    ta, tb, to = _t(a, dtype), _t(b, dtype), _t(out, dtype)
    return f"""func.func @f(%a: {ta}, %b: {tb}) -> ({to}, {to}) {{
  %s = nn.mul %a, %b : ({ta}, {tb}) -> {to}
  %y = nn.add %s, %a : ({to}, {ta}) -> {to}
  %z = nn.tanh %y : {to}
  func.return %y, %z : {to}, {to}
}}
"""


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pattern", sampled(PATTERNS, 2))
def test_broadcast_pattern(pattern: str, dtype: str) -> None:
    a, b, out = PATTERNS[pattern]
    program = check(two_outputs(a, b, out, dtype), dtype, launches=1, pipeline=FUSED)
    text = kernel_text(program.kernels_source)
    shapes = [tuple(int(d) for d in s.split("x")) if s else () for s in (a, b, out)]
    inner = collapse_dims(shapes[2], shapes)[0][-1]
    assert "base = uint32(uint32(cuda.blockIdx.x) * " in text
    if element(dtype).is_half and inner % 2 == 0:
        # one version: the runtime gives kernels 16-byte aligned arrays
        assert "ld_wide" in text and "st_wide" in text and "is_aligned(" not in text
    else:
        assert "ld_wide" not in text


def test_bf16_rounding_keeps_a_scalar_a_scalar() -> None:
    """A 0-d input stays 0-d through the bf16 helpers (it became [1])."""
    assert round_to_bf16(np.array(1.3, np.float32)).shape == ()
    assert bf16_bits(np.array(1.3, np.float32)).shape == ()


MULTI = """func.func @f(%x: tensor<4x8xT>, %b: tensor<8xT>, %c: tensor<4x1xT>)
    -> (tensor<4x8xT>, tensor<8xT>, tensor<4x1xT>, tensor<T>) {
  %y:4 = fusion.group (%x, %b, %c) {name = "g0", kind = "pointwise"}
      : (tensor<4x8xT>, tensor<8xT>, tensor<4x1xT>)
      -> (tensor<4x8xT>, tensor<8xT>, tensor<4x1xT>, tensor<T>) {
  ^bb0(%xa: tensor<4x8xT>, %ba: tensor<8xT>, %ca: tensor<4x1xT>):
    %e = nn.exp %ba : tensor<8xT>
    %r = nn.neg %ca : tensor<4x1xT>
    %m = nn.mul %xa, %e : (tensor<4x8xT>, tensor<8xT>) -> tensor<4x8xT>
    %s = nn.add %m, %r : (tensor<4x8xT>, tensor<4x1xT>) -> tensor<4x8xT>
    %k = nn.constant dense<0.25> : tensor<T>
    fusion.yield %s, %e, %r, %k : tensor<4x8xT>, tensor<8xT>, tensor<4x1xT>, tensor<T>
  }
  func.return %y#0, %y#1, %y#2, %y#3 : tensor<4x8xT>, tensor<8xT>, tensor<4x1xT>, tensor<T>
}
"""


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_output_with_different_broadcasts(dtype: str) -> None:
    """Results per row, per column and scalar beside the full one: each is
    written once, by the lanes at coordinate 0 of its broadcast dimensions."""
    program = check(MULTI.replace("T>", f"{dtype}>"), dtype, launches=1, pipeline="")
    if element(dtype).is_half:
        assert "st_wide64(out0, k0," in program.kernels_source


def test_coordinates_only_where_an_operand_varies() -> None:
    """NCHW with a per-channel operand iterates [N, C, H*W]: one division
    and one modulo per element, both by literals; the full operands read at
    the flat index."""
    program = compile_text(two_outputs("2x3x4x5", "3x1x1", "2x3x4x5", "f32"), FUSED)
    kernel = kernel_text(program.kernels_source)
    assert "c0_0 = uint32(uint32(j0 // uint32(20)) % uint32(3))" in kernel
    assert "in1[c0_0]" in kernel and "in0[w0]" in kernel
    assert kernel.count("//") == kernel.count("%") == 4  # 4 elements per thread


def test_uint64_indices_past_2_to_the_31(monkeypatch: pytest.MonkeyPatch) -> None:
    """Iteration spaces of 2^31 elements and more index in uint64 (checked
    here on a tiny one, with the limit lowered)."""
    monkeypatch.setattr(index_types, "INDEX32_LIMIT", 16)
    program = check(two_outputs("2x3x4x5", "3x1x1", "2x3x4x5", "f16"), "f16", launches=1,
                    pipeline=FUSED)
    assert "base = uint64(uint64(cuda.blockIdx.x)" in program.kernels_source


def _ptx(text: str) -> dict[str, str]:
    try:
        info = compile_program_ptx(compile_text(text, FUSED))
    except FusecError as err:
        if re.search("nvrtc|nvvm", str(err), re.IGNORECASE):
            pytest.skip(f"NVRTC/NVVM unavailable: {err}")
        raise
    return {name: str(k["ptx"]) for name, k in info.items()}


_DIV64 = re.compile(r"\b(div|rem|mul\.hi)\.[su]64\b")


def test_broadcast_kernel_ptx_has_no_64_bit_division() -> None:
    """Per-channel NCHW with H*W = 49: the per-element index math is 32-bit
    (no 64-bit divide, remainder or multiply-high; no signed wrap-around)."""
    (ptx,) = _ptx(two_outputs("2x6x7x7", "6x1x1", "2x6x7x7", "f32")).values()
    assert not _DIV64.search(ptx), _DIV64.findall(ptx)
    assert "shr.s64" not in ptx and "mul.wide.u32" in ptx


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_half_kernel_ptx_has_8_byte_accesses(dtype: str) -> None:
    (ptx,) = _ptx(two_outputs("2x6x8", "8", "2x6x8", dtype)).values()
    assert "ld.global.u64" in ptx and "st.global.u64" in ptx
    assert not _DIV64.search(ptx)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_d_results(dtype: str) -> None:
    """A 0-d iteration space (scalar inputs and results) has no innermost
    extent: one element, read and written per element."""
    t = f"tensor<{dtype}>"
    text = (f"func.func @f(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %s = nn.mul %a, %b : ({t}, {t}) -> {t}\n  %y = nn.tanh %s : {t}\n"
            f"  func.return %y : {t}\n}}\n")
    check(text, dtype, launches=1, pipeline=FUSED)
