"""Verification of a whole module, with source locations on every error.

Runs each op's own verifier (the dialects' rules) and adds what xDSL does not
check: every function signature is static and supported, and every use of a
value is dominated by its definition, so use-before-definition and cycles are
errors rather than silent miscompiles.

```mlir
%a = nn.exp %b : tensor<4xf32>   // error: 'nn.exp' op uses %b before it is defined
%b = nn.exp %a : tensor<4xf32>
```
"""

from __future__ import annotations

import weakref

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import CallOp, FuncOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.traits import HasParent
from xdsl.utils.exceptions import VerifyException

from fusec.analysis.diagnostics import FusecError, loc_of, op_error
from fusec.dialects.nn_base import check_static_tensor

# What each op looked like when it last verified. The pipeline verifies after
# every pass, and re-running xDSL's verifiers on the thousands of ops a pass
# left untouched dominated compile time; an op verifies the same way while its
# types, attributes, properties and place are unchanged.
_verified: weakref.WeakKeyDictionary[Operation, tuple[object, ...]] = (
    weakref.WeakKeyDictionary())


def verify_module(module: ModuleOp) -> None:
    """Raise a located `FusecError` for the first rule the module breaks."""
    for op in module.walk():
        if op is module:
            continue
        if isinstance(op, FuncOp):
            _verify_signature(op)
        signature = _signature(op)
        if signature is not None and _verified.get(op) == signature:
            continue
        _verify_op(op)
        if signature is not None:
            _verified[op] = signature
    for block in _blocks(module):
        _verify_dominance(block)
    _verify_unique_functions(module)


def _verify_unique_functions(module: ModuleOp) -> None:
    """Function names are the entry points' names (in plan.json, in calls):
    two functions with one name would silently shadow each other."""
    seen: dict[str, FuncOp] = {}
    for op in module.ops:
        if not isinstance(op, FuncOp):
            continue
        name = op.sym_name.data
        if name in seen:
            first = loc_of(seen[name])
            where = f" (first defined at {first})" if first else ""
            raise op_error(op, f"'func.func' op redefines @{name}{where}")
        seen[name] = op


def _verify_signature(func: FuncOp) -> None:
    name = func.sym_name.data
    types = [*func.function_type.inputs.data, *func.function_type.outputs.data]
    for i, t in enumerate(types):
        n_in = len(func.function_type.inputs.data)
        what = f"argument #{i}" if i < n_in else f"result #{i - n_in}"
        try:
            check_static_tensor(t, f"{what} of @{name}")
        except VerifyException as err:
            raise op_error(func, str(err)) from None


def _signature(op: Operation) -> tuple[object, ...] | None:
    """What an op's verifiers read; None for an op with regions (a function or
    group), whose body is not part of it, so it is always verified."""
    if op.regions:
        return None
    # Where the op sits matters only to the terminator rule (for the last op)
    # and to a parent trait: moving an op into a group changes nothing else.
    block = op.parent
    last = block is not None and block.last_op is op
    placed = block is not None and (last or op.get_trait(HasParent) is not None)
    return (type(block.parent_op()) if placed and block is not None else None, last,
            tuple(v.type for v in op.operands), tuple(r.type for r in op.results),
            tuple(op.attributes.items()), tuple(op.properties.items()))


def _verify_op(op: Operation) -> None:
    # `verify` runs the op's own `verify_` too, so a valid op is checked
    # once; only on failure is `verify_` run alone, to prefer its message.
    try:
        op.verify(verify_nested_ops=False)
    except VerifyException as structural:
        try:
            op.verify_()
        except VerifyException as err:
            raise op_error(op, _with_op_name(op, str(err))) from None
        # Structural checks (terminators, parents); xDSL prints the module
        # after its message, which we leave out.
        first = str(structural).strip().split("\n")[0]
        raise op_error(op, _with_op_name(op, first)) from None


def _with_op_name(op: Operation, message: str) -> str:
    message = message.strip()
    if message.startswith(f"'{op.name}'"):
        return message
    if message[:2].istitle():
        # xDSL's generic checks start with a capital ("Expected 2 operands").
        message = message[0].lower() + message[1:]
    return f"'{op.name}' op {message}"


def _blocks(op: Operation) -> list[Block]:
    return [b for o in op.walk() for r in o.regions for b in r.blocks]


def _verify_dominance(block: Block) -> None:
    """Each operand must be defined earlier in its block or in an enclosing one."""
    position = {id(op): i for i, op in enumerate(block.ops)}
    for user in block.ops:
        for value in user.operands:
            _check_use(value, user, block, position)


def _check_use(value: SSAValue, user: Operation, block: Block, position: dict[int, int]) -> None:
    if isinstance(value, BlockArgument):
        if not _encloses(value.block, user):
            raise op_error(user, f"'{user.name}' op uses {_name(value, user)}, an argument of "
                           "a block that does not enclose it")
        return
    assert isinstance(value, OpResult)
    definer = value.op
    if definer.parent_block() is not block:
        if definer.parent_block() is None or not _encloses(definer.parent_block(), user):
            raise op_error(user, f"'{user.name}' op uses {_name(value, user)}, which is not "
                           "visible here")
        return
    if position[id(definer)] < position[id(user)]:
        return
    if definer is user or _depends_on(definer, user):
        raise op_error(user, f"'{user.name}' op uses {_name(value, user)}, which depends on "
                       "this op's own result: the operands form a cycle")
    raise op_error(user, f"'{user.name}' op uses {_name(value, user)} before it is defined")


def _encloses(block: Block | None, op: Operation) -> bool:
    cur: Operation | None = op
    while cur is not None:
        if cur.parent_block() is block:
            return True
        cur = cur.parent_op()
    return False


def _depends_on(op: Operation, target: Operation) -> bool:
    """Whether `op` (transitively) reads a result of `target` in the same block."""
    seen: set[int] = set()
    stack = [op]
    while stack:
        cur = stack.pop()
        for v in cur.operands:
            if isinstance(v, OpResult) and id(v.op) not in seen:
                if v.op is target:
                    return True
                seen.add(id(v.op))
                stack.append(v.op)
    return False


def _name(value: SSAValue, user: Operation) -> str:
    """`%x` for named values; numbered ones (`%0`) keep no name after
    parsing, so say which operand it is."""
    if value.name_hint:
        return f"%{value.name_hint}"
    index = next(i for i, v in enumerate(user.operands) if v is value)
    return f"operand #{index}"


def reject_calls(module: ModuleOp) -> None:
    """The compile job generates kernels for one function at a time: a
    `func.call` is a located error before any pass runs (the reference
    interpreter does run calls)."""
    for op in module.walk():
        if isinstance(op, CallOp):
            caller = op.parent_op()
            while caller is not None and not isinstance(caller, FuncOp):
                caller = caller.parent_op()
            into = f" into @{caller.sym_name.data}" if caller is not None else ""
            raise op_error(op, f"func.call is not supported; inline the callee "
                           f"@{op.callee.string_value()}{into}")


def require_functions(module: ModuleOp) -> None:
    """A program must hold at least one func.func, and nothing else at top level."""
    funcs = 0
    for op in module.ops:
        if isinstance(op, FuncOp):
            funcs += 1
        else:
            raise op_error(op, f"expected only func.func at the top level, found '{op.name}'")
    if not funcs:
        raise FusecError("the module holds no func.func: nothing to compile")
