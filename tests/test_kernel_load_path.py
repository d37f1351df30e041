"""The GPU's kernel load path on the CPU: everything numba does between our
kept code and the CUDA driver, with only the driver's two entry points
replaced by recorders (the context that loads a module image, and the
linker that turns PTX into a cubin).

`kernel_from_code` is run on real PTX (numba's compile_ptx through NVRTC)
and, where ptxas is installed, a real cubin, in a process without numba's
simulator (whose numba.cuda has no code library). NVVM is made to fail:
kept code must never reach it (it compiles LLVM IR only; handed PTX it
answers ERROR_NO_MODULE_IN_PROGRAM, as it did on the H200 when the code sat
under another compute-capability key than numba's `(9, 0, "a")`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent('''
    import json, sys
    import numba.cuda.codegen as codegen
    from numba import cuda
    from numba.cuda import types as nt
    from numba.cuda.cudadrv.driver import ObjectCode
    from fusec.runtime import kernel_build
    from fusec.runtime.kernel_cache import KernelCode

    @cuda.jit
    def f_g0_add(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] + 1.0

    SIG = [(1, "float32"), (1, "float32")]
    ptx, _ = cuda.compile_ptx(f_g0_add.py_func, kernel_build.array_types(SIG), cc=(9, 0))
    cubin = kernel_build.assemble_cubin(ptx, (9, 0), kernel_build.find_ptxas())
    seen = {"images": [], "linked_ptx": [], "linker_arch": []}

    class Device:
        id = 0
        compute_capability = (9, 0)

    class Function:
        def __init__(self, name):
            self.name, self.module = name, Module()

    class Module:
        initialized = True

    class Context:
        device = Device()
        def create_module_image(self, image, setup=None, teardown=None):
            code = bytes(image.code)
            if code == b"not a cubin this driver takes":
                raise RuntimeError("CUDA_ERROR_INVALID_IMAGE")
            seen["images"].append(code.decode("latin-1"))
            return type("M", (), {"get_function": lambda self, name: Function(name)})()

    class Linker:
        lto = False
        info_log = ""
        def __init__(self, max_registers=None, cc=None, lto=False, **_):
            seen["linker_arch"].append(list(cc))
        def add_ptx(self, data, name="<ptx>"):
            seen["linked_ptx"].append(data.decode())
        def add_file_guess_ext(self, *a, **k):
            raise AssertionError("nothing else is linked")
        def complete(self):
            return ObjectCode.from_cubin(b"cubin linked from the PTX", name="k")

    def no_nvvm(*args, **kwargs):
        raise AssertionError("kept code was handed to NVVM")

    codegen.devices.get_context = lambda *a, **k: Context()
    codegen.driver._Linker = Linker
    codegen.nvvm.compile_ir = no_nvvm

    class Dispatcher:
        py_func = f_g0_add.py_func
        def __init__(self):
            self.overloads = []
        def add_overload(self, kernel, argtypes):
            self.overloads.append([str(t) for t in argtypes])

    out = {"has_cubin": cubin is not None}
    for case, code in (("cubin", KernelCode(ptx, cubin) if cubin else None),
                       ("ptx only", KernelCode(ptx)),
                       ("bad cubin", KernelCode(ptx, b"not a cubin this driver takes"))):
        if code is None:
            continue
        for k in seen:
            seen[k] = []
        d = Dispatcher()
        kernel, linked = kernel_build.kernel_from_code(d, code, SIG)
        out[case] = {"linked": None if linked is None else linked.decode("latin-1"),
                     "overloads": d.overloads, "entry": kernel.entry_name,
                     "ptx_entry": code.ptx.split(".entry ")[1].split("(")[0].strip(),
                     **{k: list(v) for k, v in seen.items()}}
    out["cubin_bytes"] = None if cubin is None else cubin.decode("latin-1")
    out["ptx"] = ptx
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def load_path() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


def test_kept_cubin_goes_to_the_driver_as_is(load_path: dict) -> None:
    if not load_path["has_cubin"]:
        pytest.skip("ptxas is not installed: no cubin to keep")
    case = load_path["cubin"]
    assert case["images"] == [load_path["cubin_bytes"]]  # our bytes, loaded once
    assert case["linked_ptx"] == [] and case["linked"] is None  # nothing linked again
    assert load_path["cubin_bytes"].startswith("\x7fELF")
    assert case["overloads"] == [["array(float32, 1d, C)", "array(float32, 1d, C)"]]
    assert case["entry"] == case["ptx_entry"]


def test_kept_ptx_goes_to_the_linker_and_its_cubin_comes_back(load_path: dict) -> None:
    case = load_path["ptx only"]
    assert case["linked_ptx"] == [load_path["ptx"]]
    assert case["linker_arch"] == [[9, 0, "a"]]  # numba's own key for Hopper
    assert case["images"] == ["cubin linked from the PTX"]
    assert case["linked"] == "cubin linked from the PTX"  # to be kept for the next process


def test_cubin_the_driver_refuses_falls_back_to_the_ptx(load_path: dict) -> None:
    case = load_path["bad cubin"]
    assert case["linked_ptx"] == [load_path["ptx"]]
    assert case["images"] == ["cubin linked from the PTX"]
    assert case["linked"] == "cubin linked from the PTX"
    assert "cannot load the kept cubin of kernel 'f_g0_add'" in load_path["stderr"]
