"""The device dtypes of tensor values: what a tensor's elements are stored
as on the GPU (`float32`, `bool`, `uint16` for bf16 bits), and the numba
types they are stored and computed in. Code generation writes with them, the
planners size tiles and vector widths with them (`scheduling/`).

```python
value_dtype(x)          # "float16" for a tensor<4x8xf16> value
numba_type("float16")   # "float16"
compute_type("float16") # "float32": half precision widens
```
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from fusec.dialects.element_types import BY_NAME, of_device_dtype
from fusec.dialects.nn_base import SUPPORTED_TYPES, element_type_name


class UnsupportedTypeError(ValueError):
    """An element type code generation has no kernel for (bf16)."""


def value_dtype(value: SSAValue) -> str:
    """The NumPy dtype name of a tensor value's device buffer (`float32`,
    `bool`, ...; `uint16` for bf16, whose elements are stored as bits)."""
    t = value.type
    assert isinstance(t, TensorType)
    name = element_type_name(t.element_type)
    if name not in SUPPORTED_TYPES:
        raise UnsupportedTypeError(
            f"element type {name} is not supported by code generation"
        )
    return BY_NAME[name].device_dtype


def numba_type(dtype: str) -> str:
    """The numba type name of a stored element of device dtype `dtype`."""
    return of_device_dtype(dtype).numba_type


def compute_type(dtype: str) -> str:
    """The numba type arithmetic on `dtype` elements runs in (halves -> f32)."""
    return of_device_dtype(dtype).compute_type
