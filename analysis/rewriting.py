"""Small helpers shared by passes that rewrite IR.

The parser attaches `loc("file":line:col)` to every op (`compiler.parsing`);
a pass that replaces an op by new ones must hand that location on, or a later
error about the new ops could not point at the user's source line.

```mlir
%y = nn.softmax %x {axis = -1} : tensor<4x8xf32>       // model.mlir:3:3
// after decompose, every op below still reports model.mlir:3:3
%m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
```
"""

from __future__ import annotations

from xdsl.ir import Operation


def copy_location(src: Operation, *new: Operation) -> None:
    """Give each op of `new` the source location of `src`, the op it replaces."""
    for op in new:
        op.location = src.location
