"""Writing straight-line scalar code for the elementwise ops of a
`fusion.group` body (`analysis/group_body.py` reads the body), for the
reduction, contraction, window and attention emitters.

Every fused kernel evaluates some elementwise ops at one point of an iteration
domain (a row element, one accumulator of a matmul tile, one conv output).
`PointEvaluator` produces that code: it walks the use-def chains backwards
from the values wanted, emits one assignment per op through `scalar_expr`,
loads group inputs with `broadcast_index`, and substitutes the values the
caller already holds in registers (a matmul accumulator, a row's maximum).

```mlir
%y = fusion.group (%x, %b) {kind = "contraction"} : (...) -> tensor<4x8xf32> {
^bb0(%xa: tensor<4x6xf32>, %wa: tensor<6x8xf32>, %ba: tensor<8xf32>):
  %m = nn.matmul %xa, %wa : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s = nn.add %m, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  fusion.yield %s : tensor<4x8xf32>
}
```

With `%m` bound to `acc`, the evaluator writes `a2 = in2[i1]` and
`v1 = (acc + a2)`. Names are generated (`a<k>`, `v<k>`), never taken from
the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import POINT_KINDS, GroupBody, compute_type, dtype_name, owner_of
from fusec.analysis.op_kinds import op_kind
from fusec.codegen import kernel_source
from fusec.codegen.kernel_source import (
    KernelParam,
    broadcast_index,
    float_literal,
    int_literal,
    scalar_expr,
)
from fusec.dialects import nn
from fusec.dialects.element_types import smallest_normal
from fusec.dialects.nn_base import splat_value, tensor_shape
from fusec.dialects.shapes import Shape, numel

_VIEWS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)
"""Layout ops a point evaluator reads in place, through their chain's
strided view (`codegen/indexed_read.py`)."""

Loader = Callable[[BlockArgument, Shape, Sequence[str]], str]


def body_params(body: GroupBody) -> list[KernelParam]:
    """The kernel parameters of a group: every input, then every output, each
    as a flat contiguous view."""
    ins = [
        KernelParam("input", k, (max(1, numel(tensor_shape(a))),))
        for k, a in enumerate(body.args)
    ]
    outs = [
        KernelParam("output", k, (max(1, numel(tensor_shape(v))),))
        for k, v in enumerate(body.outputs)
    ]
    return ins + outs


def constant_literal(op: nn.ConstantOp) -> str:
    """A splat constant as a typed literal; other constants must be group inputs."""
    first = splat_value(op.value)
    if first is None:
        raise op_error(op, "a non-splat nn.constant inside a fused kernel must be a group input")
    ctype = compute_type(op.result)
    if ctype == "boolean":
        return "True" if bool(first) else "False"
    if ctype.startswith("int"):
        return f"{ctype}({int_literal(int(first))})"
    return float_literal(float(first), ctype)


def load_expr(body: GroupBody, arg: BlockArgument, index: str) -> str:
    """`in3[idx]`, widened to the compute type when stored narrower (the
    variable holding it where the kernel read it once: `hold_scalars`)."""
    if arg in body.held:
        return body.held[arg]
    return kernel_source.widen(dtype_name(arg), f"in{body.arg_index(arg)}[{index}]")


def hold_scalars(body: GroupBody, args: Sequence[BlockArgument]) -> list[str]:
    """Lines reading each one-element input of `args` once, at the kernel's
    start, into `held<k>`; recorded in `body.held`, so that every later read
    (`load_expr`, `operand_reader.read_at`) names the variable. Read where
    it is used instead, a scalar is loaded again for every element: the
    compiler cannot tell it from the arrays the kernel stores to. The lines
    come again for a body already holding them: a memoised plan's body
    (`group_memo`) is written into every kernel made from it."""
    lines: list[str] = []
    for arg in args:
        if numel(tensor_shape(arg)) == 1:
            k = body.arg_index(arg)
            lines.append(f"held{k} = {kernel_source.widen(dtype_name(arg), f'in{k}[0]')}")
            body.held[arg] = f"held{k}"
    return lines


def store_expr(value: SSAValue, expr: str) -> str:
    """`expr` narrowed to the stored type when that is narrower."""
    return kernel_source.narrow(dtype_name(value), expr)


class PointEvaluator:
    """Straight-line code for values of a group body at one point.

    `domain` is the iteration shape, `coords` the variable names of the point's
    coordinates; every value evaluated must broadcast (right-aligned) to the
    domain. `bound` maps values already held in variables to their names.
    """

    def __init__(
        self,
        body: GroupBody,
        domain: Shape,
        coords: Sequence[str],
        bound: dict[SSAValue, str] | None = None,
        loader: Loader | None = None,
        suffix: str = "",
        hoist: Callable[[SSAValue], str | None] | None = None,
        itype: str | None = None,
        load_at: Callable[[GroupBody, BlockArgument, str], str] = load_expr,
    ) -> None:
        self.body = body
        self.domain = domain
        self.coords = list(coords)
        self.bound = dict(bound or {})
        self.loader = loader
        self.suffix = suffix  # keeps names apart when several points share a scope
        self.hoist = hoist  # computes a value elsewhere (an outer scope) and names it
        self.outer: set[str] = set()  # names `hoist` gave: constant over this scope
        self.lines: list[str] = []
        self.itype = itype  # the type of the coordinates (a concat's comparisons, a gather's row)
        # writes each load of a group input at its index (a vector access's
        # lanes: `codegen/lane_loads.py`)
        self.load_at = load_at

    def value(self, v: SSAValue) -> str:
        """The name of a variable holding `v` at the point, emitting code as needed."""
        if v in self.bound:
            return self.bound[v]
        if self.hoist is not None and (outer := self.hoist(v)) is not None:
            self.bound[v] = outer
            self.outer.add(outer)
            return outer
        name = self.body.names[v] + self.suffix
        if isinstance(v, BlockArgument):
            self.lines.append(f"{name} = {self._load(v)}")
        else:
            op = owner_of(v)
            if isinstance(op, nn.ConstantOp):
                self.bound[v] = constant_literal(op)
                return self.bound[v]
            if isinstance(op, nn.BroadcastToOp):
                # Right-aligned broadcasting composes: the operand at the
                # domain point is the broadcast value there.
                self.bound[v] = self.value(op.operands[0])
                return self.bound[v]
            if isinstance(op, (nn.ConcatOp, nn.GatherOp, *_VIEWS)):
                self.lines.append(f"{name} = {self._indexed(op, v, name)}")
                self.bound[v] = name
                return name
            if op_kind(op) not in POINT_KINDS:
                raise op_error(op, f"{op.name} cannot be evaluated inside this fused kernel")
            args = [self.value(o) for o in op.operands]
            ctype = compute_type(op.operands[0] if isinstance(op, nn.CmpOp) else op.results[0])
            if isinstance(op, nn.DivOp) and args[1] in self.outer and (
                    tiny := smallest_normal(ctype)) is not None:
                self.lines += self._by_reciprocal(name, args[0], args[1], ctype, tiny)
            else:
                self.lines.append(f"{name} = {scalar_expr(op, args, ctype)}")
        self.bound[v] = name
        return name

    def _by_reciprocal(self, name: str, a: str, b: str, ctype: str, tiny: float) -> list[str]:
        """`a / b` for a divisor `b` constant over the scope (a softmax's sum,
        a norm's scale): `a * (1 / b)`, one correctly rounded division per
        scope (the compiler computes the identical `1 / b` of every element
        once) and a multiply per element, within 1.5 ulp of `a / b` where a
        division per element costs about ten instructions. A `b` below the
        smallest normal value `tiny` (its reciprocal overflows), and a NaN,
        divide as written. The reciprocal's name is made from `name` (a
        generated identifier), never from `b`, which may be a literal
        (`float32(2.0)`) or any other expression."""
        rcp = f"rcp_{name}"
        return [f"{rcp} = {float_literal(1.0, ctype)} / {b}",
                f"{name} = ({a} * {rcp}) if abs({b}) >= {float_literal(tiny, ctype)}"
                f" else ({a} / {b})"]

    def _indexed(self, op: Operation, v: SSAValue, name: str) -> str:
        """A concat, gather or view read in place (`codegen/indexed_read.py`) at
        the point: its coordinates are the domain's, one per dimension (or
        one per dimension longer than 1, those of an uncollapsed kernel)."""
        from fusec.codegen.indexed_read import Ints, read_element  # it reads this module

        full = self.coords
        if len(full) != len(self.domain):
            long = [d for d, n in enumerate(self.domain) if n != 1]
            if len(full) != len(long):
                raise op_error(op, f"{op.name} cannot be read in place at collapsed coordinates")
            at = dict(zip(long, full, strict=True))
            full = [at.get(d, "0") for d in range(len(self.domain))]
        shape = tensor_shape(v)
        own = full[len(full) - len(shape):]
        zero = f"{self.itype}(0)" if self.itype else "0"
        cs = [zero if n == 1 else c for c, n in zip(own, shape, strict=True)]
        lines, expr = read_element(self.body, v, cs, Ints(self.itype), name, self.load_at)
        self.lines += lines
        return expr

    def _load(self, arg: BlockArgument) -> str:
        shape = tensor_shape(arg)
        if self.loader is not None:
            return self.loader(arg, shape, self.coords)
        return self.load_at(self.body, arg, broadcast_index(shape, self.domain, self.coords))

    def take_lines(self) -> list[str]:
        """The lines emitted since the last call (for code in several scopes)."""
        lines, self.lines = self.lines, []
        return lines


def broadcast_guard(shape: Shape, domain: Shape, coords: Sequence[str]) -> str:
    """The condition under which a point of `domain` owns an element of a value
    of (smaller, broadcast) `shape`: its coordinate is 0 on every dimension
    the value broadcasts along, so each element is stored exactly once."""
    offset = len(domain) - len(shape)
    terms = [f"{coords[d]} == 0" for d in range(len(domain)) if domain[d] != 1 and (
        d < offset or shape[d - offset] == 1)]
    return " and ".join(terms)


def store_lines(k: int, v: SSAValue, val: str, domain: Shape, coords: Sequence[str]) -> list[str]:
    """Store `val` (value `v` at a point of `domain`) into output `k`, once per
    element of `v` even where `v` is smaller than the domain."""
    shape = tensor_shape(v)
    line = f"out{k}[{broadcast_index(shape, domain, coords)}] = {store_expr(v, val)}"
    guard = broadcast_guard(shape, domain, coords)
    return [f"if {guard}:", f"    {line}"] if guard else [line]


def indent(lines: Sequence[str], depth: int) -> list[str]:
    """`lines` indented by `depth` levels of four spaces."""
    pad = "    " * depth
    return [pad + line if line else line for line in lines]
