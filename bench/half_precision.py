"""Half-precision rows of the benchmark suite (`run_gpu.py --dtype f16|bf16`).

A row's model is bench/models/NAME.mlir with every f32 tensor type rewritten
to the half type; its inputs are the same random values cast to the half
type (torch.float16 / torch.bfloat16), so fusec, torch eager and
torch.compile all run in that precision. Outputs are checked against torch
eager at the element type's tolerance (`dialects/element_types.py`).
"""

from __future__ import annotations

import re
from typing import Any

from fusec.dialects.element_types import element, of_device_dtype

DTYPES = ("f32", "f16", "bf16")
# The rows measured in half precision (BENCHMARKS.md's half rows).
HALF_ROWS = ["chain16", "softmax", "add_layernorm_gelu", "mlp", "attention", "gpt2_block"]
_F32_TENSOR = re.compile(r"(tensor<(?:[0-9]+x)*)f32>")


def retype(text: str, dtype: str) -> str:
    """`text` with every f32 tensor type made `dtype` (f16, bf16)."""
    return text if dtype == "f32" else _F32_TENSOR.sub(rf"\g<1>{dtype}>", text)


def row_name(row: str, dtype: str) -> str:
    """`softmax` for f32, `softmax_bf16` for a half row."""
    return row if dtype == "f32" else f"{row}_{dtype}"


def torch_dtype(torch: Any, device_dtype: str) -> Any:
    """The torch dtype of a value stored as NumPy dtype `device_dtype`
    (uint16 is bf16's bits: torch.bfloat16)."""
    return getattr(torch, of_device_dtype(device_dtype).torch_name)


def tolerance(dtype: str, f32_tolerance: float) -> float:
    """Agreement with torch eager: f32's bound, or the half type's tolerance."""
    return f32_tolerance if dtype == "f32" else element(dtype).tolerance


def host_array(t: Any) -> Any:
    """A torch tensor as a NumPy array the reference interpreter takes
    (bf16 as float32 values: NumPy has no bfloat16)."""
    t = t.detach().cpu()
    return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
