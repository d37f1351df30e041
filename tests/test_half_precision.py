"""f16 and bf16 through every op in the simulator, against the reference.

Kernels load the storage type (bf16 as uint16 bits), compute in f32 and
round to storage only at group outputs; the reference interpreter runs the
program in float64 on the same (rounded) inputs. Outputs must agree within
the element type's tolerance of `dialects/element_types.py`, relative to
max |reference| (as `fusec run --check` compares). Shapes are tiny: the
simulator is slow.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from sweep import sampled

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.analysis.targets import H200
from fusec.codegen.kernel_source import KERNEL_PRELUDE
from fusec.codegen.ptx import _DRIVER as PTX_DRIVER  # pyright: ignore[reportPrivateUsage]
from fusec.codegen.ptx import compile_program_ptx, kernel_workdir, run_without_simulator
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import bf16_bits, element, round_to_bf16
from fusec.dialects.nn_base import element_type_name
from fusec.reference.interpreter import (
    find_function,
    random_inputs,
    round_to_element_type,
    run_module,
)
from fusec.runtime.executor import run_program
from tests.codegen_harness import compile_text

HALVES = ["f16", "bf16"]
FUSED = ("decompose,form-fusion-groups{target=h200},group-each-op,register-budget,"
         "tile-and-promote")
UNARY = ["nn.neg", "nn.abs", "nn.exp", "nn.log", "nn.sqrt", "nn.rsqrt", "nn.reciprocal",
         "nn.tanh", "nn.erf", "nn.sigmoid", "nn.relu", "nn.silu", "nn.gelu",
         "nn.clamp {min = -0.5, max = 0.5}"]
BINARY = ["nn.add", "nn.sub", "nn.mul", "nn.div", "nn.max", "nn.min", "nn.pow"]


def check(text: str, dtype: str, launches: int | None = None,
          pipeline: str = "decompose,group-each-op", device: str = "sim") -> Program:
    """Compile `text`, run `@f` in the simulator on inputs rounded to their
    types, compare every output with the float64 reference at `dtype`'s
    tolerance."""
    program = compile_text(text, pipeline)
    if launches is not None:
        assert len(program.functions["f"].launches) == launches, program.kernels_source
    module = parse_module(make_context(), text, "test.mlir")
    func = find_function(module, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, 1), func.function_type.inputs.data, strict=True)]
    expected = run_module(module, inputs, "f")
    got = run_program(program, "f", inputs, device=device)
    for e, g, t in zip(expected, got, func.function_type.outputs.data, strict=True):
        row = element(element_type_name(t.element_type))
        assert g.dtype == np.dtype(row.host_dtype), (g.dtype, t)
        if row.name == "bf16":  # bf16 values: rounding them again changes nothing
            np.testing.assert_array_equal(round_to_element_type(g, t), g)
        # An output computed from half values carries their error, whatever its type.
        tolerance = max(row.tolerance, element(dtype).tolerance)
        scale = max(float(np.max(np.abs(e))), 1.0)
        err = float(np.max(np.abs(g.astype(np.float64) - e)))
        assert err <= tolerance * scale, (err, scale, program.kernels_source)
    return program


def _unary(op: str, dtype: str) -> str:
    name, _, attrs = op.partition(" ")
    t = f"tensor<3x8x{dtype}>"
    return (f"func.func @f(%x: {t}) -> {t} {{\n  %y = {name} %x {attrs} : {t}\n"
            f"  func.return %y : {t}\n}}\n")


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", sampled(UNARY, 2))
def test_unary(op: str, dtype: str) -> None:
    text = _unary(op, dtype)
    if op in ("nn.log", "nn.sqrt", "nn.rsqrt"):  # positive inputs: an abs first
        text = text.replace(f"  %y = {op} %x", f"  %p = nn.abs %x : tensor<3x8x{dtype}>\n"
                            f"  %y = {op} %p")
    check(text, dtype)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", BINARY)
def test_binary(op: str, dtype: str) -> None:
    t, r = f"tensor<3x8x{dtype}>", f"tensor<8x{dtype}>"
    body = f"  %y = {op} %a, %b : ({t}, {r}) -> {t}\n"
    if op == "nn.pow":  # a positive base
        body = f"  %p = nn.abs %a : {t}\n" + body.replace("%a, %b", "%p, %b")
    check(f"func.func @f(%a: {t}, %b: {r}) -> {t} {{\n{body}  func.return %y : {t}\n}}\n",
          dtype)


@pytest.mark.parametrize("dtype", HALVES)
def test_cmp_select_and_cast_between_float_types(dtype: str) -> None:
    t, b = f"tensor<4x8x{dtype}>", "tensor<4x8xi1>"
    check(f"""func.func @f(%a: {t}, %b: {t}) -> ({t}, tensor<4x8xf32>, tensor<4x8xf16>) {{
  %c = nn.cmp %a, %b {{predicate = "lt"}} : ({t}, {t}) -> {b}
  %s = nn.select %c, %a, %b : ({b}, {t}, {t}) -> {t}
  %w = nn.cast %s : ({t}) -> tensor<4x8xf32>
  %h = nn.cast %w : (tensor<4x8xf32>) -> tensor<4x8xf16>
  %g = nn.cast %h : (tensor<4x8xf16>) -> tensor<4x8xbf16>
  %n = nn.cast %g : (tensor<4x8xbf16>) -> {t}
  %y = nn.add %n, %a : ({t}, {t}) -> {t}
  func.return %y, %w, %h : {t}, tensor<4x8xf32>, tensor<4x8xf16>
}}
""", dtype, pipeline=FUSED)


@pytest.mark.parametrize("dtype", HALVES)
def test_reduction_accumulates_in_f32(dtype: str) -> None:
    t, r = f"tensor<4x300x{dtype}>", f"tensor<4x{dtype}>"
    # 300 terms of order one: accumulated in half, the sum would be off by
    # far more than the tolerance (f16 spacing at 300 is 0.25, bf16's is 2).
    program = check(f"""func.func @f(%x: {t}) -> {r} {{
  %a = nn.abs %x : {t}
  %s = nn.reduce_sum %a {{axes = [1]}} : ({t}) -> {r}
  func.return %s : {r}
}}
""", dtype, launches=1, pipeline=FUSED)
    assert re.search(r"cuda.shared.array\([^)]*\), float32\)", program.kernels_source)


@pytest.mark.parametrize("dtype", HALVES)
def test_softmax(dtype: str) -> None:
    t = f"tensor<3x40x{dtype}>"
    check(f"""func.func @f(%x: {t}) -> {t} {{
  %y = nn.softmax %x {{axis = 1}} : {t}
  func.return %y : {t}
}}
""", dtype, launches=1, pipeline=FUSED)


@pytest.mark.parametrize("dtype", HALVES)
def test_layer_norm(dtype: str) -> None:
    t, p = f"tensor<3x40x{dtype}>", f"tensor<40x{dtype}>"
    check(f"""func.func @f(%x: {t}, %g: {p}, %b: {p}) -> {t} {{
  %y = nn.layer_norm %x, %g, %b {{axis = -1, epsilon = 1.0e-05}} : ({t}, {p}, {p}) -> {t}
  func.return %y : {t}
}}
""", dtype, pipeline=FUSED)


@pytest.mark.parametrize("dtype", HALVES)
def test_matmul_fused_simt_with_bias(dtype: str) -> None:
    a, b, o = (f"tensor<{s}x{dtype}>" for s in ("9x40", "40x12", "9x12"))
    program = check(f"""func.func @f(%a: {a}, %b: {b}, %c: tensor<12x{dtype}>) -> {o} {{
  %m = nn.matmul %a, %b : ({a}, {b}) -> {o}
  %y = nn.add %m, %c : ({o}, tensor<12x{dtype}>) -> {o}
  func.return %y : {o}
}}
""", dtype, launches=1, pipeline=FUSED)
    # f32 accumulators and f32 operand tiles; half only in global memory.
    assert "c0_0 = float32(0.0)" in program.kernels_source
    assert re.search(r"As = cuda.shared.array\([^)]*\), float32\)", program.kernels_source)


@pytest.mark.parametrize("dtype", HALVES)
def test_conv2d(dtype: str) -> None:
    x, w, o = (f"tensor<{s}x{dtype}>" for s in ("1x3x6x5", "4x3x3x3", "1x4x6x5"))
    check(f"""func.func @f(%x: {x}, %w: {w}) -> {o} {{
  %c = nn.conv2d %x, %w {{pads = [1, 1, 1, 1]}} : ({x}, {w}) -> {o}
  %r = nn.relu %c : {o}
  func.return %r : {o}
}}
""", dtype, launches=1, pipeline=FUSED)


BF16_EXP = """func.func @f(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %y = nn.exp %x : tensor<2x8xbf16>
  func.return %y : tensor<2x8xbf16>
}
"""


def test_bf16_inputs_as_float32_bits_or_torch() -> None:
    """A bf16 input is float32 values (rounded on the way in), uint16 bits,
    or a torch.bfloat16 tensor; NumPy callers get float32 values back,
    torch callers torch.bfloat16."""
    torch = pytest.importorskip("torch")
    program = compile_text(BF16_EXP, "group-each-op")
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    want = round_to_bf16(np.exp(round_to_bf16(x)))
    from_f32 = run_program(program, "f", [x], device="sim")[0]
    from_bits = run_program(program, "f", [bf16_bits(x)], device="sim")[0]
    from_torch = run_program(program, "f", [torch.from_numpy(x).to(torch.bfloat16)],
                             device="sim")[0]
    assert from_torch.dtype == torch.bfloat16
    np.testing.assert_allclose(from_f32, want, rtol=2.0**-7)
    np.testing.assert_array_equal(from_bits, from_f32)
    np.testing.assert_array_equal(from_torch.float().numpy(), from_f32)


def test_bf16_input_of_another_dtype_is_a_clear_error() -> None:
    program = compile_text(BF16_EXP, "group-each-op")
    with pytest.raises(FusecError, match="input 'x' of @f: expected bf16"):
        run_program(program, "f", [np.zeros((2, 8), np.float64)], device="sim")


def test_bf16_float32_device_array_is_refused_not_read_as_bits() -> None:
    """A float32 device array (numba, CuPy) for a bf16 parameter: nothing
    on the device rounds it, and its bytes are no bf16 bits."""
    from numba import cuda

    program = compile_text(BF16_EXP, "group-each-op")
    x = cuda.to_device(np.ones((2, 8), np.float32))
    with pytest.raises(FusecError, match="input 'x' of @f is a float32 array on the GPU"):
        run_program(program, "f", [x], device="sim")


def test_torch_float32_for_bf16_is_rounded_by_torch() -> None:
    torch = pytest.importorskip("torch")
    from fusec.runtime.bf16_io import torch_rounded

    x = torch.randn(2, 8, requires_grad=True)
    r = torch_rounded(x)
    assert r.dtype == torch.bfloat16 and not r.requires_grad
    np.testing.assert_array_equal(r.float().numpy(), round_to_bf16(x.detach().numpy()))
    b = x.detach().to(torch.bfloat16)
    assert torch_rounded(b) is b


@pytest.mark.slow  # ptxas / a large compile: the slow set (README)
def test_bf16_kernels_compile_for_sm90() -> None:
    """The prelude's bf16 helpers type-check and lower in numba.cuda (the
    simulator runs them as Python): 16-bit loads and stores in the GEMM,
    8-byte words of four halves in the rows of 300, a shift widens."""
    d = "bf16"
    t, r = f"tensor<4x300x{d}>", f"tensor<4x{d}>"
    a, b, o = (f"tensor<{s}x{d}>" for s in ("9x40", "40x12", "9x12"))
    program = compile_text(f"""func.func @f(%x: {t}, %a: {a}, %b: {b}) -> ({r}, {t}, {o}) {{
  %e = nn.exp %x : {t}
  %s = nn.reduce_sum %e {{axes = [1]}} : ({t}) -> {r}
  %m = nn.matmul %a, %b : ({a}, {b}) -> {o}
  func.return %s, %e, %m : {r}, {t}, {o}
}}""", FUSED)
    info = compile_program_ptx(program)
    assert len(info) == 2
    for name, kernel in info.items():
        ptx = str(kernel["ptx"])
        assert "st.global.u16" in ptx and "shl.b32" in ptx, name  # the sums: one per row
        load = "ld.global.u64" if "reduce" in name else "ld.global.u16"
        assert load in ptx, name


VECTOR_PROBE = KERNEL_PRELUDE + """
from numba import uint64


@cuda.jit
def k(a, o):
    i = cuda.grid(1)
    a8 = a.view(np.uint64)
    o8 = o.view(np.uint64)
    if i < a8.size:
        w = a8[i]
        s = bf16_to_f32(uint16(w & uint64(0xFFFF))) + bf16_to_f32(uint16(w >> uint64(48)))
        o8[i] = uint64(f32_to_bf16(s))
"""


@pytest.mark.gpu
def test_an_in_kernel_uint64_view_gives_8_byte_half_loads() -> None:
    """The probe for vectorised half loads (docs/nn-dialect.md): numba needs
    a device to compile `ndarray.view` in a kernel, so this runs on a GPU."""
    with kernel_workdir(VECTOR_PROBE, {"k": [(1, "uint16"), (1, "uint16")]}, "fusec-probe-",
                        cc=list(H200.compute_capability)) as work:
        run_without_simulator(PTX_DRIVER, work, "(uint64 view probe)")
        ptx = (work / "0.ptx").read_text(encoding="utf-8")
    assert "ld.global.u64" in ptx or "ld.global.b64" in ptx or "ld.global.v2" in ptx, ptx


def test_bf16_cuda_array_interface_with_a_void_typestr_is_read_by_its_dtype() -> None:
    """torch 2.11 describes a CUDA bfloat16 tensor as typestr `|V2`; the check
    must read the tensor's own dtype instead of refusing it as `|V2`."""
    from fusec.runtime.executor import _shape_dtype  # pyright: ignore[reportPrivateUsage]

    class VoidTyped:  # what such a tensor shows the check
        shape = (2, 3)
        dtype = "torch.bfloat16"

        @property
        def __cuda_array_interface__(self) -> dict[str, object]:
            return {"shape": (2, 3), "typestr": "|V2", "data": (0, False), "version": 3}

    assert _shape_dtype(VoidTyped()) == ((2, 3), "bfloat16")


SCALE_SHIFT = """func.func @f(%x: tensor<2x6x5x8xT>, %s: tensor<6x1x1xT>, %r: tensor<2x6x5x8xT>)
    -> tensor<2x6x5x8xT> {
  %m = nn.mul %x, %s : (tensor<2x6x5x8xT>, tensor<6x1x1xT>) -> tensor<2x6x5x8xT>
  %a = nn.add %m, %r : (tensor<2x6x5x8xT>, tensor<2x6x5x8xT>) -> tensor<2x6x5x8xT>
  %y = nn.relu %a : tensor<2x6x5x8xT>
  func.return %y : tensor<2x6x5x8xT>
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1])
def test_wide_f16_kernel_on_the_gpu_aligned_and_not(offset: int) -> None:
    """The per-channel kernel moves its f16 arrays 8 bytes per access on the
    device; inputs that start one element into a buffer (not 8-byte aligned)
    take the per-element path and give the same numbers."""
    from numba import cuda

    text = SCALE_SHIFT.replace("T>", "f16>")
    program = compile_text(text, FUSED)
    assert len(program.functions["f"].launches) == 1
    assert "ld_wide64(" in program.kernels_source
    module = parse_module(make_context(), text, "test.mlir")
    func = find_function(module, "f")
    inputs = [round_to_element_type(x, t) for x, t in
              zip(random_inputs(func, 5), func.function_type.inputs.data, strict=True)]
    expected = run_module(module, inputs, "f")[0]
    device = []
    for x in inputs:
        flat = np.concatenate([np.zeros(offset, np.float16), x.astype(np.float16).ravel()])
        device.append(cuda.to_device(flat)[offset:].reshape(x.shape))
    got = run_program(program, "f", device, device="gpu")[0]
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    scale = max(float(np.max(np.abs(expected))), 1.0)
    err = float(np.max(np.abs(got.astype(np.float64) - expected)))
    assert err <= element("f16").tolerance * scale, err


@pytest.mark.gpu
def test_wide_bf16_kernel_on_the_gpu() -> None:
    """The same kernel in bf16 (uint16 words unpacked by shifts) on the device."""
    program = check(SCALE_SHIFT.replace("T>", "bf16>"), "bf16", launches=1, pipeline=FUSED,
                    device="gpu")
    assert "ld_wide64(" in program.kernels_source


def _ptx_instructions(ptx: str) -> int:
    """Instructions in a kernel's PTX (lines ending in ';' that are not
    declarations), moves aside: the assembler drops a `mov` between integer
    and float registers, which is all that widening a bf16 needs beside its
    shift."""
    return sum(1 for line in ptx.splitlines()
               if line.strip().endswith(";") and not line.strip().startswith((".", "//", "mov.")))


@pytest.mark.slow
def test_bf16_words_cost_what_f16_words_cost() -> None:
    """A wide bf16 kernel packs and unpacks its words 32 bits at a time and
    rounds two values per conversion, as f16 does: its PTX is no longer than
    the f16 kernel's by more than a few instructions (the integer rounding
    and 64-bit lane shifts it replaced made it half as long again, and bf16
    chain16 ran at two thirds of the copy floor)."""
    text = SCALE_SHIFT.replace("2x6x5x8", "64x6x5x8")
    counts = {}
    for d in HALVES:
        program = compile_text(text.replace("T>", f"{d}>"), FUSED)
        assert "ld_wide64(" in program.kernels_source
        (kernel,) = compile_program_ptx(program).values()
        ptx = str(kernel["ptx"])
        pair = "cvt.rn.bf16x2.f32" if d == "bf16" else "cvt.rn.f16x2.f32"
        assert pair in ptx, d
        counts[d] = _ptx_instructions(ptx)
    assert counts["bf16"] <= counts["f16"] * 1.05, counts


@pytest.mark.gpu
def test_bf16_rounding_on_the_gpu_is_round_to_nearest_even() -> None:
    """The product of two bf16 values is exact in f32 and often halfway
    between two bf16 values: the device's rounding (`cvt.rn.bf16x2.f32`,
    `cvt.rn.bf16.f32`) must give the reference's bits on every element, wide
    path and per-element path alike."""
    t = "tensor<2x6x5x8xbf16>"
    text = (f"func.func @f(%x: {t}, %y: {t}) -> {t} {{\n"
            f"  %m = nn.mul %x, %y : ({t}, {t}) -> {t}\n  func.return %m : {t}\n}}\n")
    program = compile_text(text, FUSED)
    assert "ld_wide64(" in program.kernels_source
    rng = np.random.default_rng(11)
    x, y = (round_to_bf16(rng.standard_normal((2, 6, 5, 8)).astype(np.float32))
            for _ in range(2))
    x.flat[:3] = [np.inf, np.nan, 3e38]  # inf * y, NaN, overflow to inf
    got = run_program(program, "f", [x, y], device="gpu")[0]
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    expected = round_to_bf16(x * y)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(bf16_bits(got[finite]), bf16_bits(expected[finite]))
