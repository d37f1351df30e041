"""The cost model's time and traffic of a library launch (a cuBLAS GEMM, a
cuDNN convolution or attention), recorded on it as on a kernel's launch
(`KernelLaunch.est_time_us`, `hbm_bytes`), so that report.md and
`fusec run --profile` count library calls in a program's totals: the
bytes of its arguments, once each, at the rate the choice priced the call
(`cost_model.library_gemm_rate`, `library_conv_rate`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from fusec.analysis.cost_model import library_conv_rate
from fusec.analysis.program import KernelLaunch, TensorSpec
from fusec.analysis.targets import Target
from fusec.codegen.library_attention import is_sdpa
from fusec.codegen.library_conv import is_conv
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.shapes import numel
from fusec.scheduling.attention_library import library_time
from fusec.scheduling.attention_schedule import AttentionShape
from fusec.scheduling.gemm_choice import cupy_tf32


def priced(launch: KernelLaunch, values: Mapping[str, TensorSpec],
           target: Target) -> KernelLaunch:
    """`launch` (a library call) with its estimated time and bytes."""
    spec = launch.library
    assert spec is not None
    if is_sdpa(spec):
        return _attention(launch, spec, values, target)
    moved = sum(numel(tuple(a.view_shape)) * np.dtype(values[a.value].dtype).itemsize
                for a in launch.args)
    result = launch.args[2]
    element = of_device_dtype(values[result.value].dtype).name
    if is_conv(spec):
        w = launch.args[1].view_shape
        flops = 2.0 * numel(tuple(result.view_shape)) * numel(tuple(w[1:]))
        rate = library_conv_rate(target, element, bool(spec.get("tf32")),
                                 int(w[0]) // int(spec["groups"]))
    else:
        flops = 2.0 * numel(tuple(spec["batch"])) * spec["m"] * spec["n"] * spec["k"]
        rate = target.library_gemm_rate(element, cupy_tf32())
    seconds = max(moved / target.memory_bandwidth, flops / rate) + target.launch_overhead
    return dataclasses.replace(launch, hbm_bytes=moved, est_time_us=seconds * 1e6)


def _attention(launch: KernelLaunch, spec: dict[str, Any], values: Mapping[str, TensorSpec],
               target: Target) -> KernelLaunch:
    """cuDNN's attention at the time `fuse-attention` chose it by
    (`attention_library.library_time`); its bytes are its four tensors, not
    the whole values holding them (a packed QKV)."""
    q, k, v = (spec[w]["dims"] for w in ("q", "k", "v"))
    dtype = of_device_dtype(values[launch.args[-1].value].dtype)
    shape = AttentionShape(q[0] * q[1], q[2], k[2], q[3], v[3], item=dtype.width,
                           element=dtype.name)
    moved = sum(numel(tuple(spec[w]["dims"])) for w in ("q", "k", "v", "o")) * dtype.width
    seconds = library_time(shape, target, bool(spec["causal"]))
    return dataclasses.replace(launch, hbm_bytes=moved, est_time_us=seconds * 1e6)
