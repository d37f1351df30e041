"""The `fusion` dialect: a `fusion.group` is one GPU kernel.

```mlir
%y = fusion.group (%x, %b) {kind = "pointwise"}
    : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>):
  %s = nn.add %xa, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %s : tensor<4x8xf32>
  fusion.yield %r : tensor<4x8xf32>
}
```

The region is isolated from above: operands enter as block arguments, and
`fusion.yield` hands the group's results out. What later passes decide about
a group (its kind, schedule, tiles, shared-memory bytes, register estimate)
is recorded in its attribute dictionary.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator
from xdsl.utils.exceptions import VerifyException

from fusec.dialects.nn_base import print_attr_dict, type_str
from fusec.dialects.schedule import SCHEDULE_ATTRS


class _IsolatedBody(IsolatedFromAbove):
    """IsolatedFromAbove that names the value crossing into a group's body
    (the generic check prints the whole offending op instead)."""

    def verify(self, op: Operation) -> None:
        for inner in op.walk():
            if inner is op:
                continue
            for value in inner.operands:
                definer = (
                    value.block.parent_op() if isinstance(value, BlockArgument)
                    else value.owner
                )
                if not isinstance(definer, Operation) or not op.is_ancestor(definer):
                    name = f"%{value.name_hint}" if value.name_hint else "a value"
                    raise VerifyException(
                        f"'fusion.group' op body uses {name} (in '{inner.name}'), which is "
                        "defined outside the group; pass it in as an operand"
                    )
        super().verify(op)


@irdl_op_definition
class GroupOp(IRDLOperation):
    """A fusion group: the ops of its body run as one kernel."""

    name = "fusion.group"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(_IsolatedBody())

    def __init__(
        self,
        inputs: list[SSAValue],
        result_types: list[Attribute],
        body: Region,
        attributes: dict[str, Attribute] | None = None,
    ) -> None:
        super().__init__(
            operands=[inputs],
            result_types=[result_types],
            regions=[body],
            attributes=attributes or {},
        )

    @property
    def block(self) -> Block:
        """The single block of the body."""
        return self.body.block

    @classmethod
    def parse(cls, parser: Parser) -> GroupOp:
        if parser.parse_optional_punctuation("(") is None:
            parser.raise_error(
                "'fusion.group' expects its operands in parentheses: fusion.group (%x, %y)"
            )
        operands: list[UnresolvedOperand] = []
        if parser.parse_optional_punctuation(")") is None:
            operands = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(")", " after the operands of 'fusion.group'")
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        resolved = parser.resolve_operands(operands, ftype.inputs.data, pos)
        body = parser.parse_region()
        return cls(list(resolved), list(ftype.outputs.data), body, attributes)

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(")")
        print_attr_dict(printer, self.attributes)
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> ")
        outs = [r.type for r in self.outputs]
        if len(outs) == 1:
            printer.print_attribute(outs[0])
        else:
            printer.print_string("(")
            printer.print_list(outs, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    def verify_(self) -> None:
        args = self.block.args
        if len(args) != len(self.inputs):
            raise VerifyException(
                f"'fusion.group' op has {len(self.inputs)} operand(s) but its body block "
                f"has {len(args)} argument(s); they must match one to one"
            )
        for i, (arg, value) in enumerate(zip(args, self.inputs, strict=True)):
            if arg.type != value.type:
                raise VerifyException(
                    f"'fusion.group' op block argument #{i} has type {type_str(arg.type)} "
                    f"but operand #{i} has type {type_str(value.type)}"
                )
        last = self.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("'fusion.group' op body must end with fusion.yield")
        yielded = [v.type for v in last.values]
        results = [r.type for r in self.outputs]
        if yielded != results:
            raise VerifyException(
                f"'fusion.group' op fusion.yield gives ({_types(yielded)}) but the "
                f"group's results are ({_types(results)})"
            )


def _types(types: list[Attribute]) -> str:
    return ", ".join(type_str(t) for t in types)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a `fusion.group` body and hands its values out as the results.

    ```mlir
    fusion.yield %a, %b : tensor<4xf32>, tensor<4xf32>
    ```
    """

    name = "fusion.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(GroupOp))

    def __init__(self, values: list[SSAValue]) -> None:
        super().__init__(operands=[values])

    @classmethod
    def parse(cls, parser: Parser) -> YieldOp:
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        types: list[Attribute] = []
        pos = parser.pos
        if operands:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        return cls(list(parser.resolve_operands(operands, types, pos)))

    def print(self, printer: Printer) -> None:
        if self.values:
            printer.print_string(" ")
            printer.print_list(self.values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in self.values], printer.print_attribute)


Fusion = Dialect("fusion", [GroupOp, YieldOp], list(SCHEDULE_ATTRS))
"""The `fusion` dialect."""
