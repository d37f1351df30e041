"""The cost model prices f16/bf16 erf, tanh and gelu (both forms) at the
cheaper forms code generation gives them (`analysis/half_math_cost.py`):
their float32 flops times the table's ratio of PTX instructions; the table
names the forms kernels.py calls, and (slow, PTX compiled by numba) matches
the instructions measured now."""

from __future__ import annotations

import re

import pytest
from xdsl.ir import Operation

from fusec.analysis.cost_model import ELEMENTWISE_FLOPS, op_flops
from fusec.analysis.half_math_cost import HALF_FORM_INSTRUCTIONS, half_form, half_form_scale
from fusec.codegen.kernel_source import scalar_expr
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects import nn
from tests.test_fast_erf import _kernel_ptx, _ptx_instructions
from tests.test_fast_tanh import _program

FORMS = {"erf": "nn.erf %m", "gelu": 'nn.gelu %m {approximate = "none"}',
         "gelu_tanh": 'nn.gelu %m {approximate = "tanh"}', "tanh": "nn.tanh %m"}


def _op(form: str, dtype: str) -> Operation:
    module = parse_module(make_context(), _program(FORMS[form], dtype), "t.mlir")
    return next(op for op in module.walk()
                if isinstance(op, nn.ErfOp | nn.TanhOp | nn.GeluOp))


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_result_priced_at_the_half_form(form: str, dtype: str) -> None:
    op, full = _op(form, dtype), _op(form, "f32")
    counts = HALF_FORM_INSTRUCTIONS[form]
    assert half_form(op) == form and half_form(full) is None
    assert op_flops(full) == 4 * 64 * ELEMENTWISE_FLOPS[type(full)]
    assert op_flops(op) == pytest.approx(op_flops(full) * counts.half / counts.libdevice)
    assert op_flops(op) < op_flops(full)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_table_names_the_forms_kernels_call(form: str) -> None:
    assert scalar_expr(_op(form, "f16"), ["x"], "float32") == f"half_{form}(x)"
    assert "half_" not in scalar_expr(_op(form, "f32"), ["x"], "float32")


def test_other_half_ops_keep_their_cost() -> None:
    module = parse_module(make_context(), _program("nn.exp %m", "f16"), "t.mlir")
    exp = next(op for op in module.walk() if isinstance(op, nn.ExpOp))
    assert half_form(exp) is None and half_form_scale(exp) == 1.0


def _per_element(form: str, dtype: str) -> float:
    """PTX instructions per element of `form` in a `dtype` mul + op kernel,
    against the same kernel with a negation (8 or 4 elements a thread)."""
    source, ptx = _kernel_ptx(_program(FORMS[form], dtype, 64, 255))
    _, with_neg = _kernel_ptx(_program("nn.neg %m", dtype, 64, 255))
    calls = len(re.findall(r"= half_\w+\(|ieee_(?:tanh|erf)\(", source))
    return (_ptx_instructions(ptx) - _ptx_instructions(with_neg)) / calls


@pytest.mark.slow  # compiles kernels to PTX in a subprocess
@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_table_matches_the_ptx(form: str) -> None:
    counts = HALF_FORM_INSTRUCTIONS[form]
    half, libdevice = _per_element(form, "f16"), _per_element(form, "f32")
    assert half == pytest.approx(counts.half, abs=1.0), half
    # the f32 forms measured in other kernels (codegen/fast_*.py): within 2
    assert libdevice == pytest.approx(counts.libdevice, abs=2.0), libdevice
