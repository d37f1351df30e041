"""`runtime/kernel_loader.load_gpu_kernels` on the CPU, with the steps that
need a GPU (the device's compute capability, the build, loading code into
the driver) replaced by recorders: each distinct kernel body is loaded once,
and serves every launch of that body."""

from __future__ import annotations

from typing import Any

import pytest

from fusec.runtime import kernel_loader
from fusec.runtime.kernel_build import KernelBuilds
from fusec.runtime.kernel_cache import KernelCode

PTX = ".version 8.5\n.target sm_90\n.visible .entry fusec_kernel(\n)\n{\nret;\n}\n"


class Dispatcher:
    """What the loader asks of a numba dispatcher: its overloads."""

    def __init__(self) -> None:
        self.overloads: dict[Any, Any] = {}

    def add_overload(self, kernel: Any, argtypes: Any) -> None:
        self.overloads[argtypes] = kernel


def test_each_distinct_body_is_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    signatures = {name: [(1, "float32"), (1, "float32")]
                  for name in ("f_g0_add", "f_g1_add", "f_g2_mul")}
    keys = {"f_g0_add": "k-add", "f_g1_add": "k-add", "f_g2_mul": "k-mul"}  # two layers, one body
    code = {name: KernelCode(ptx=PTX, cubin=b"cubin " + keys[name].encode()) for name in keys}
    builds = KernelBuilds(code=code, keys=keys, distinct=2, cached=2)
    loads: list[str] = []

    def kernel_from_code(dispatcher: Dispatcher, kc: KernelCode, sig: Any) -> tuple[Any, None]:
        loads.append(kc.cubin.decode())  # type: ignore[union-attr]
        kernel = object()
        dispatcher.add_overload(kernel, "argtypes")
        return kernel, None

    monkeypatch.setattr(kernel_loader, "device_cc", lambda cuda: (9, 0))
    monkeypatch.setattr(kernel_loader, "compile_parallel", lambda *args: builds)
    monkeypatch.setattr(kernel_loader, "kernel_from_code", kernel_from_code)
    monkeypatch.setattr(kernel_loader, "array_types", lambda sig: "argtypes")
    monkeypatch.setattr(kernel_loader, "user_store", lambda: None)
    module = type("Kernels", (), {name: Dispatcher() for name in signatures})
    kernels = kernel_loader.load_gpu_kernels(None, module, "", signatures)  # type: ignore[arg-type]
    assert sorted(loads) == ["cubin k-add", "cubin k-mul"]  # one load per body, not per kernel
    assert kernels["f_g0_add"] is kernels["f_g1_add"] is not kernels["f_g2_mul"]
    # every dispatcher knows the kernel that runs it (fusec run --registers asks them)
    for name in signatures:
        assert getattr(module, name).overloads["argtypes"] is kernels[name]
    assert kernel_loader.LAST_LOAD["kept"] == 3 and kernel_loader.LAST_LOAD["jit"] == 0
