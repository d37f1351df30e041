"""Splat constants stay one element from the parser on.

xDSL expands `dense<1.0> : tensor<8192x8192xf32>` into all 67 million
elements while parsing (a list of Python floats, then packed bytes: half a
minute and gigabytes). MLIR stores a splat as its one element, and so does
fusec: the attribute's bytes hold one element while its type keeps the
shape. `dense_to_numpy` reads such an attribute as a read-only broadcast
view, `numpy_to_dense` writes a broadcast scalar back as one, `print_dense`
prints it as `dense<1.0>`, and code generation turns it into a literal.

```mlir
%c = nn.constant dense<1.0> : tensor<8192x8192xf32>   // 4 bytes, not 268 MB
```
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.parser import Parser

from fusec.dialects import element_types

# `dense<LITERAL> : tensor<...xELEMENT>` with one scalar literal or one quoted
# hex string: a number, `true`/`false`, or `"0x..."`.
_SPLAT = re.compile(
    r"dense\s*<\s*(?P<lit>-?\s*(?:true|false|0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?"
    r"(?:[eE][+-]?[0-9]+)?)|\"0x[0-9a-fA-F]*\")\s*>\s*:\s*"
    r"tensor\s*<\s*(?P<dims>(?:[0-9]+\s*x\s*)*)(?P<element>bf16|f16|f32|f64|i1|i8|i16|i32|i64)\s*>"
)


def parse_optional_splat(parser: Parser) -> DenseIntOrFPElementsAttr | None:
    """A splat dense literal at the parser's position, stored as one element;
    None (and nothing consumed) for any other attribute.

    The literal is converted by xDSL's own parser, as `dense<LITERAL> :
    tensor<ELEMENT>`, so its checks and errors are xDSL's."""
    match = _SPLAT.match(parser.lexer.input.content, parser.pos)
    if match is None:
        return None
    literal, element = match.group("lit"), match.group("element")
    if literal.startswith('"') and len(literal) - 4 != 2 * element_types.element(element).width:
        return None  # every element's bytes, not a splat
    if "0" in re.findall(r"[0-9]+", match.group("dims")):
        return None  # no element to hold
    parser.parse_keyword("dense")
    parser.parse_punctuation("<")
    if literal.startswith('"'):
        parser.parse_str_literal()
    else:
        parser.parse_number(allow_boolean=True)
    parser.parse_punctuation(">")
    parser.parse_punctuation(":")
    t = parser.parse_type()
    assert isinstance(t, TensorType)
    one = Parser(parser.ctx, f"dense<{literal}> : tensor<{element}>").parse_attribute()
    assert isinstance(one, DenseIntOrFPElementsAttr)
    return DenseIntOrFPElementsAttr(t, one.data)
