"""The script tests hand `fusec.codegen.ptx.run_without_simulator`: it
loads WORK/kernels.py and writes WORK/<kernel>.ptx for every kernel named
in WORK/signatures.json, compiled for sm_90 with one signature for all."""

from __future__ import annotations


def ptx_driver(signature: str) -> str:
    """The driver script; `signature` is a Python expression over numba's
    `types` (`"(types.float32[::1], types.float32[::1])"`)."""
    return rf"""
import importlib.util, json, sys
from numba import cuda, types
work = sys.argv[1]
spec = importlib.util.spec_from_file_location("kernels", work + "/kernels.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for name in json.load(open(work + "/signatures.json")):
    sig = {signature}
    ptx, _ = cuda.compile_ptx(getattr(module, name).py_func, sig, cc=(9, 0))
    open(f"{{work}}/{{name}}.ptx", "w").write(ptx)
"""
