"""The kernel prelude's `fast_exp` and `bf16_to_f32` are intrinsics that write
their LLVM IR directly (codegen/kernel_source.py): numba copies the IR of an
`inline=True` device function into every call's basic block and types and
rewrites it there, which made a bf16 GEMM with a gelu epilogue take 7.4 s to
build (3.8 s as intrinsics, the same cubin). Their PTX must be the PTX of the
device functions they replace, written out below.

The PTX comes from numba + NVVM in one subprocess without the simulator (no
GPU needed)."""

from __future__ import annotations

import json

from test_mma_row import _instructions

from fusec.codegen.kernel_source import kernel_prelude
from fusec.codegen.ptx import kernel_workdir, run_without_simulator

# The device functions the intrinsics replace, as the prelude had them.
REPLACED = """
@cuda.jit(device=True, inline=True)
def old_fast_exp(x):
    return libdevice.exp2f(float32(x) * float32(1.4426950408889634))


@cuda.jit(device=True, inline=True)
def old_bf16_to_f32(bits):
    return libdevice.int_as_float(int32(uint32(bits) << uint32(16)))
"""

# Each kernel twice: through the prelude's helper (`new_`) and through the
# replaced device function (`old_`); f32 `x`, bf16 bits `h`, f32 result `y`.
KERNELS = {
    # exp of f32 values, and of an f64 one (the helper rounds it to f32 first)
    "exp": """
    i = cuda.grid(1)
    if i < y.size:
        y[i] = {p}fast_exp(x[i]) + {p}fast_exp(x[i] * 0.5)
""",
    # bf16 bits widened: from uint16 elements and from a uint32 word's halves
    "bf16": """
    i = cuda.grid(1)
    if i + 1 < y.size:
        w = uint32(h[i]) | (uint32(h[i + 1]) << uint32(16))
        y[i] = {p}bf16_to_f32(h[i]) * {p}bf16_to_f32(uint16(w >> uint32(16))) + x[i]
""",
    # a GEMM-like run of widened products: many calls in one basic block
    "bf16_row": """
    i = cuda.grid(1)
    if i + 8 < y.size:
        acc = float32(0.0)
""" + "".join(f"        acc += {{p}}bf16_to_f32(h[i + {k}]) * {{p}}fast_exp(x[i + {k}])\n"
              for k in range(8)) + """        y[i] = acc
""",
}

_DRIVER = r"""
import importlib.util, json, sys
from numba import cuda, types
work = sys.argv[1]
spec = importlib.util.spec_from_file_location("kernels", work + "/kernels.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for name in json.load(open(work + "/signatures.json")):
    sig = (types.float32[::1], types.uint16[::1], types.float32[::1])
    ptx, _ = cuda.compile_ptx(getattr(module, name).py_func, sig, cc=(9, 0))
    open(f"{work}/{name}.ptx", "w").write(ptx)
"""


def _source() -> str:
    kernels = []
    for name, body in KERNELS.items():
        for prefix in ("new", "old"):
            text = body.format(p="" if prefix == "new" else "old_")
            kernels.append(f"@cuda.jit\ndef {prefix}_{name}(x, h, y):{text}")
    text = "\n\n".join(kernels)
    return kernel_prelude([text]) + "\n\n" + REPLACED + "\n\n" + text


def test_intrinsics_are_the_device_functions_they_replace() -> None:
    names = [f"{p}_{k}" for k in KERNELS for p in ("new", "old")]
    with kernel_workdir(_source(), {n: [] for n in names}, "fusec-prelude-") as work:
        run_without_simulator(_DRIVER, work, "(prelude intrinsics)")
        ptx = {n: (work / f"{n}.ptx").read_text() for n in names}
    for name in KERNELS:
        new, old = ptx[f"new_{name}"], ptx[f"old_{name}"]
        assert ("ex2.approx" in new) == ("fast_exp" in KERNELS[name])
        assert _instructions(new) == _instructions(old), name


def test_the_helpers_are_one_call_each_to_numba() -> None:
    """On the GPU (not in the simulator) the helpers are intrinsics: numba
    types one call, not a copy of a device function's IR per call."""
    driver = r"""
import json, sys, types
from pathlib import Path
work = Path(sys.argv[1])
module = types.ModuleType("prelude")
exec((work / "kernels.py").read_text(), module.__dict__)
print(json.dumps({n: type(getattr(module, n)).__name__ for n in ("fast_exp", "bf16_to_f32")}))
"""
    with kernel_workdir(kernel_prelude([""]), {}, "fusec-prelude-") as work:
        out = run_without_simulator(driver, work, "(prelude intrinsics)")
    kinds = json.loads(out.strip().splitlines()[-1])
    assert kinds == {"fast_exp": "_Intrinsic", "bf16_to_f32": "_Intrinsic"}
