"""The NumPy reference interpreter: the oracle every fused kernel is checked against.

It runs any verified `nn` program, before or after any pass: a `fusion.group`
is run by binding its operands to the body's block arguments and taking the
`fusion.yield` operands as its results, so grouping never changes the answer.

```python
module = parse_module(make_context(), '''
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}''', "f.mlir")
(y,) = run_module(module, {"x": np.arange(4.0)})        # float64: the oracle
(y32,) = run_module(module, [np.ones(4)], dtype=np.float32)
```

Floating-point values are computed in `dtype` (float64 by default) whatever
their declared element type; integer and i1 values keep their own types. The
one exception is an explicit `nn.cast` to a float type, which rounds through
that type (f16, bf16, f32) because the program asks for that precision loss.
What each op computes lives in `reference_ops.py`.

`round_stored=True` (of `run_module`, `run_function`, `run_block`,
`run_typed`) models the precision a GPU program really has: every float value
that lives in memory (a function's arguments, the result of an op outside
any `fusion.group`, and of each group; `run_block` takes its inputs as given)
is rounded to its declared element type (f32, f16, bf16: to nearest, ties to
even, beyond the largest finite value to inf), while the values inside a
group stay in the compute type, as a fused kernel keeps them in registers.
Unfused, every value is stored: on a program before the passes this is the
type-rounded reference, every op's result rounded to its type.
`check-precision` compares the two; `fusec run --check` and the fuzzer
compare kernels with it (`run_typed`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.traits import SymbolTable

from fusec.dialects import nn
from fusec.dialects.element_types import bf16_values
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    INT_TYPES,
    element_type_name,
    numpy_dtype,
    type_str,
)
from fusec.dialects.shapes import fmt
from fusec.reference.ops import OP_FUNCTIONS, round_to_bf16

# Integer arguments that feed no nn.gather are drawn from [0, DEFAULT_INDEX_BOUND).
DEFAULT_INDEX_BOUND = 4

# Operands whose domain is positive (log, roots, pow base, variance) or that
# divide: random floats there come from [0.5, 2) instead of N(0, 1), so that
# the outputs stay finite and well conditioned.
_POSITIVE_OPERANDS: frozenset[tuple[type[Operation], int]] = frozenset({
    (nn.LogOp, 0),
    (nn.SqrtOp, 0),
    (nn.RsqrtOp, 0),
    (nn.ReciprocalOp, 0),
    (nn.DivOp, 1),
    (nn.PowOp, 0),
    (nn.BatchNormOp, 4),
})


# --- public API ---------------------------------------------------------------------


def run_module(
    module: ModuleOp,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
    function: str | None = None,
    dtype: type = np.float64,
    round_stored: bool = False,
) -> list[np.ndarray]:
    """Run one function of `module` and return its outputs.

    `function=None` picks the first public function. `inputs` is a sequence
    in argument order, or a mapping from argument names (the SSA names of the
    function's arguments, `x` for `%x`; `arg<i>` for an unnamed one).
    """
    func = find_function(module, function)
    if isinstance(inputs, Mapping):
        inputs = _ordered_inputs(func, inputs)
    return run_function(func, inputs, dtype, round_stored)


def run_function(
    func: FuncOp, inputs: Sequence[np.ndarray], dtype: type = np.float64,
    round_stored: bool = False,
) -> list[np.ndarray]:
    """Run `func` on `inputs` (in argument order) and return its outputs.

    Raises `ValueError` naming the argument when an input has the wrong count,
    shape or kind of element.
    """
    compute = _float_dtype(dtype)
    arrays = _check_inputs(func, inputs, compute)
    interpreter = _Interpreter(compute, round_stored)
    # Overflow to inf or NaN is the program's result, as it would be on a GPU.
    with np.errstate(all="ignore"):
        outputs = interpreter.run_function(func, arrays)
    return [np.array(v) for v in outputs]


@dataclass(frozen=True)
class TypedRun:
    """A function's outputs and the values that left their type's range:
    `overflowed` names each value (`%y (f32)`) whose float result, finite in
    the compute dtype, is inf once rounded to its declared element type."""

    outputs: list[np.ndarray]
    overflowed: tuple[str, ...]


def run_typed(func: FuncOp, inputs: Sequence[np.ndarray], round_stored: bool = False,
              dtype: type = np.float64) -> TypedRun:
    """`run_function` that also reports the values beyond their type's range.

    With `round_stored=True` on a program before the passes, this is the
    type-rounded reference: every argument and every op's result rounded to
    its declared element type, as a GPU stores them."""
    compute = _float_dtype(dtype)
    arrays = _check_inputs(func, inputs, compute)
    interpreter = _Interpreter(compute, round_stored, watch_range=True)
    with np.errstate(all="ignore"):
        outputs = interpreter.run_function(func, arrays)
    return TypedRun([np.array(v) for v in outputs], tuple(dict.fromkeys(interpreter.overflowed)))


def run_block(
    block: Block,
    inputs: Sequence[np.ndarray],
    dtype: type = np.float32,
    round_stored: bool = False,
) -> list[np.ndarray]:
    """Run `block` (a function or `fusion.group` body) with its arguments
    bound to `inputs`; return the operands of its terminator. Floats are
    computed in `dtype`; `round_stored`: see the module docstring (the ops of
    `block` itself count as stored, so a group body runs as if unfused)."""
    compute = _float_dtype(dtype)
    arrays = [np.asarray(v).astype(_value_dtype(a.type, compute))
              for a, v in zip(block.args, inputs, strict=True)]
    with np.errstate(all="ignore"):
        outputs = _Interpreter(compute, round_stored).run_block(block, arrays)
    return [np.array(v) for v in outputs]


def round_to_element_type(array: np.ndarray, t: Attribute) -> np.ndarray:
    """`array` rounded through the float element type of tensor type `t`
    (f16, bf16, f32), kept in `array`'s dtype; other types are unchanged."""
    assert isinstance(t, TensorType)
    name = element_type_name(t.element_type)
    if array.dtype.kind != "f" or name not in ("f16", "bf16", "f32"):
        return array
    narrow = round_to_bf16(array) if name == "bf16" else array.astype(numpy_dtype(t.element_type))
    return narrow.astype(array.dtype)


def random_block_inputs(block: Block, seed: int = 0) -> list[np.ndarray]:
    """Random values for the arguments of `block`, drawn as `random_inputs` draws
    a function's (positive where an op needs it, indices in range)."""
    rng = np.random.default_rng(seed)
    return [_random_argument(arg, rng) for arg in block.args]


def random_inputs(func: FuncOp, seed: int = 0) -> list[np.ndarray]:
    """Fresh random inputs of `func`'s argument types, reproducible by `seed`.

    Floats come from N(0, 1) in their declared type (bf16 as float32), except
    operands with a positive domain (log, sqrt, rsqrt, pow base, divisors,
    batch-norm variance), drawn from [0.5, 2). i1 masks are random booleans.
    Integers feeding `nn.gather` as indices lie in range for the table's
    axis; other integers lie in [0, DEFAULT_INDEX_BOUND).
    """
    rng = np.random.default_rng(seed)
    return [_random_argument(arg, rng) for arg in func.body.block.args]


def index_bounds(func: FuncOp) -> list[int | None]:
    """Per argument of `func`, the exclusive bound `random_inputs` draws an
    integer argument below (the smallest table axis among the `nn.gather`s
    it indexes, else DEFAULT_INDEX_BOUND); None for float and i1 arguments."""
    bounds: list[int | None] = []
    for arg in func.body.block.args:
        t = arg.type
        assert isinstance(t, TensorType)
        bounds.append(_index_bound(arg) if element_type_name(t.element_type) in INT_TYPES
                      else None)
    return bounds


def find_function(module: ModuleOp, name: str | None = None) -> FuncOp:
    """The function called `name`, or the first public one when `name` is None."""
    funcs = [op for op in module.ops if isinstance(op, FuncOp)]
    if name is not None:
        for func in funcs:
            if func.sym_name.data == name:
                return func
        known = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
        raise ValueError(f"the module has no function @{name} (functions: {known})")
    public = [f for f in funcs if f.sym_visibility in (None, "public") and not f.is_declaration]
    if not public:
        raise ValueError("the module has no public function to run")
    return public[0]


def argument_names(func: FuncOp) -> list[str]:
    """The names inputs are keyed by: `x` for `%x`, `arg<i>` when unnamed."""
    return [a.name_hint or f"arg{i}" for i, a in enumerate(func.body.block.args)]


# --- checking inputs --------------------------------------------------------------------


def _float_dtype(dtype: type) -> np.dtype:
    compute = np.dtype(dtype)
    if compute.kind != "f":
        raise ValueError(f"dtype must be a floating-point type, got {compute}")
    return compute


def _ordered_inputs(func: FuncOp, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    names = argument_names(func)
    missing = [n for n in names if n not in inputs]
    unknown = [k for k in inputs if k not in names]
    where = f"@{func.sym_name.data} takes " + ", ".join(names)
    if unknown:
        raise ValueError(f"unknown input name(s) {', '.join(map(repr, unknown))}; {where}")
    if missing:
        raise ValueError(f"missing input(s) {', '.join('%' + n for n in missing)}; {where}")
    return [inputs[n] for n in names]


def _check_inputs(
    func: FuncOp, inputs: Sequence[np.ndarray], compute: np.dtype
) -> list[np.ndarray]:
    names = argument_names(func)
    fname = f"@{func.sym_name.data}"
    if len(inputs) != len(names):
        raise ValueError(
            f"{fname} takes {len(names)} input(s) ({', '.join('%' + n for n in names)}), "
            f"got {len(inputs)}"
        )
    types = func.function_type.inputs.data
    return [
        _check_input(f"input %{n} of {fname}", t, v, compute)
        for n, t, v in zip(names, types, inputs, strict=True)
    ]


def _check_input(what: str, t: Attribute, value: object, compute: np.dtype) -> np.ndarray:
    assert isinstance(t, TensorType)
    array = np.asarray(value)
    shape = tuple(t.get_shape())
    if array.shape != shape:
        raise ValueError(
            f"{what} has shape {fmt(array.shape)}, expected {fmt(shape)} ({type_str(t)})"
        )
    element = element_type_name(t.element_type)
    allowed = "fiub" if element in FLOAT_TYPES else "iub"
    if array.dtype.name == "bfloat16" and element in FLOAT_TYPES:
        array = array.astype(np.float32)  # ml_dtypes' bfloat16 (ONNX's arrays): exact
    elif element == "bf16" and array.dtype == np.uint16:
        array = bf16_values(array)  # bit patterns, as the runtime takes them (not integers)
    if array.dtype.kind not in allowed:
        raise ValueError(f"{what} has {array.dtype} elements, expected {element} ({type_str(t)})")
    if element == "i1":
        return array != 0
    return array.astype(_value_dtype(t, compute))


def _value_dtype(t: Attribute, compute: np.dtype) -> np.dtype:
    """Floats are held in the compute dtype, everything else in its own type."""
    assert isinstance(t, TensorType)
    if element_type_name(t.element_type) in FLOAT_TYPES:
        return compute
    return np.dtype(numpy_dtype(t.element_type))


# --- interpretation ------------------------------------------------------------------------


class _Interpreter:
    """Walks blocks op by op, holding every value as a NumPy array."""

    def __init__(self, compute: np.dtype, round_stored: bool = False,
                 watch_range: bool = False) -> None:
        self.compute = compute
        self.round_stored = round_stored  # values in memory rounded to their own type
        self.watch_range = watch_range  # record values that overflow their type
        self.overflowed: list[str] = []

    def run_function(self, func: FuncOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        block = func.body.block
        if self.round_stored:  # arguments live in memory, in their own type
            inputs = [self._typed(a, a.type, v) for a, v in zip(block.args, inputs, strict=True)]
        return self.run_block(block, inputs)

    def run_block(self, block: Block, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run `block` with its arguments bound to `inputs`; return what its
        terminator (func.return or fusion.yield) hands out."""
        env: dict[SSAValue, np.ndarray] = dict(zip(block.args, inputs, strict=True))
        for op in block.ops:
            operands = [env[v] for v in op.operands]
            if isinstance(op, ReturnOp | YieldOp):
                return operands
            for result, value in zip(op.results, self.run_op(op, operands), strict=True):
                env[result] = self._conform(op, result, value)
        raise ValueError("the block has no func.return or fusion.yield terminator")

    def run_op(self, op: Operation, operands: list[np.ndarray]) -> list[np.ndarray]:
        """The results of one op (not a terminator)."""
        if isinstance(op, GroupOp):  # inside, values stay in registers: unrounded
            return _Interpreter(self.compute).run_block(op.block, operands)
        if isinstance(op, CallOp):
            callee = SymbolTable.lookup_symbol(op, op.callee)
            if not isinstance(callee, FuncOp):
                raise ValueError(f"'func.call' to unknown function {op.callee}")
            return self.run_function(callee, operands)
        fn = OP_FUNCTIONS.get(type(op))
        if fn is None:
            raise NotImplementedError(f"the reference interpreter cannot run '{op.name}'")
        return [fn(op, *operands)]

    def _conform(self, op: Operation, result: SSAValue, value: np.ndarray) -> np.ndarray:
        """Cast an op's raw result to its declared type, and check its shape,
        so a mistake in an op function cannot pass silently."""
        t = result.type
        assert isinstance(t, TensorType)
        array = np.asarray(value).astype(_value_dtype(t, self.compute), copy=False)
        if self.round_stored or self.watch_range:
            array = self._typed(result, t, array)
        if array.shape != tuple(t.get_shape()):
            raise AssertionError(
                f"reference for '{op.name}' produced shape {fmt(array.shape)} for a result "
                f"of type {type_str(t)}"
            )
        return array

    def _typed(self, value: SSAValue, t: Attribute, array: np.ndarray) -> np.ndarray:
        """`array` rounded to its element type when `round_stored`; a value
        that overflows the type is recorded when `watch_range`."""
        rounded = round_to_element_type(array, t)
        if self.watch_range and rounded is not array and np.any(
                np.isinf(rounded) & np.isfinite(array)):
            assert isinstance(t, TensorType)
            owner = value.owner
            name = f"%{value.name_hint}" if value.name_hint else \
                f"a result of '{owner.name}'" if isinstance(owner, Operation) else "an argument"
            self.overflowed.append(f"{name} ({element_type_name(t.element_type)})")
        return rounded if self.round_stored else array


# --- random inputs --------------------------------------------------------------------------


def _random_argument(arg: BlockArgument, rng: np.random.Generator) -> np.ndarray:
    t = arg.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    element = element_type_name(t.element_type)
    if element == "i1":
        return np.asarray(rng.random(shape) < 0.5)
    if element in INT_TYPES:
        high = _index_bound(arg)
        return np.asarray(rng.integers(0, high, shape), dtype=numpy_dtype(t.element_type))
    dtype = np.float32 if element == "bf16" else numpy_dtype(t.element_type)
    uses = list(_final_uses(arg))
    if any((type(op), i) in _POSITIVE_OPERANDS for op, i in uses):
        return np.asarray(rng.uniform(0.5, 2.0, shape), dtype=dtype)
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


def _index_bound(arg: BlockArgument) -> int:
    """The smallest table size among the gathers `arg` indexes."""
    bounds = [
        op.operand_shape(0)[op.axis]
        for op, i in _final_uses(arg)
        if isinstance(op, nn.GatherOp) and i == 1
    ]
    return max(1, min(bounds)) if bounds else DEFAULT_INDEX_BOUND


def _final_uses(value: SSAValue) -> Iterator[tuple[Operation, int]]:
    """The ops reading `value` and the operand position, looking through
    fusion groups to the ops inside them."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, GroupOp):
            yield from _final_uses(user.block.args[use.index])
        else:
            yield user, use.index
