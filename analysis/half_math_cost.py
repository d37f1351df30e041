"""What erf, tanh and gelu cost per element where their result is half.

Where an `nn.erf`, `nn.tanh` or `nn.gelu` (either form) has an f16 or bf16
result, code generation calls the prelude's cheaper forms
(`codegen/fast_erf.py`, `codegen/fast_tanh.py`) instead of libdevice's
float32 ones: the program rounds the result to 2^-11 relative or coarser, so
the extra accuracy cannot be seen (docs/nn-dialect.md, "Half precision").
The cost model prices such an op at its float32 cost times the ratio of PTX
instructions per element of the two forms in this table (moves aside, the
assembler folds them); tests/test_half_math_cost.py measures them again and
holds the table to them.

```python
half_form_scale(gelu_f16)   # 15.0 / 28.9: the erf-form gelu, half result
half_form_scale(gelu_f32)   # 1.0
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from fusec.dialects import nn
from fusec.dialects.element_types import HALF_NAMES
from fusec.dialects.nn_base import element_type_name


@dataclass(frozen=True)
class FormInstructions:
    """PTX instructions per element of one op's two forms."""

    libdevice: float
    """libdevice's float32 form (`ieee_erf`, `ieee_tanh`)."""
    half: float
    """The half-result form (`half_erf`, `half_gelu`, ...)."""


HALF_FORM_INSTRUCTIONS: dict[str, FormInstructions] = {
    "erf": FormInstructions(libdevice=23.0, half=16.0),
    "gelu": FormInstructions(libdevice=28.9, half=15.0),  # the erf form
    "gelu_tanh": FormInstructions(libdevice=23.0, half=6.0),
    "tanh": FormInstructions(libdevice=16.0, half=13.0),
}
"""Per form, named as its prelude function without `half_`: measured in
f16 kernels of one such op (codegen/fast_erf.py and codegen/fast_tanh.py
tell where the savings come from)."""


def result_is_half(op: Operation) -> bool:
    """Whether `op`'s (first) result is of type f16 or bf16."""
    t = op.results[0].type if op.results else None
    return isinstance(t, TensorType) and element_type_name(t.element_type) in HALF_NAMES


def half_form(op: Operation) -> str | None:
    """The key of `HALF_FORM_INSTRUCTIONS` for `op` when code generation
    gives it the cheaper half form, else None."""
    if not result_is_half(op):
        return None
    if isinstance(op, nn.ErfOp):
        return "erf"
    if isinstance(op, nn.TanhOp):
        return "tanh"
    if isinstance(op, nn.GeluOp):
        return "gelu_tanh" if op.approximate == "tanh" else "gelu"
    return None


def half_form_scale(op: Operation) -> float:
    """The factor on `op`'s float32 cost: the half form's instructions over
    libdevice's where `op` gets the half form, else 1."""
    form = half_form(op)
    if form is None:
        return 1.0
    counts = HALF_FORM_INSTRUCTIONS[form]
    return counts.half / counts.libdevice
