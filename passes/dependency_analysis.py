"""The `dependency-analysis` pass: what the analysis fusion builds on
(`analysis/dependency_graph.py`: each op's kind, program-order index and
consumers) written on the ops.

The pass writes what the analysis found as attributes a filecheck test can
read; `form-fusion-groups` removes them again (they describe the program
before grouping), so they stay in the final IR only when this pass runs last.

```mlir
// fusec -p dependency-analysis
%e = nn.exp %x {dep.index = 0, dep.kind = "elementwise", dep.consumers = 2} : tensor<4xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.passes import ModulePass

from fusec.analysis.dependency_graph import DependencyAnalysis, functions


@dataclass(frozen=True)
class DependencyAnalysisPass(ModulePass):
    """Annotate every op with its kind, program-order index and consumer count.

    ```mlir
    // before
    %e = nn.exp %x : tensor<4xf32>
    %s = nn.reduce_sum %e {axes = [0]} : (tensor<4xf32>) -> tensor<f32>
    // after `fusec -p dependency-analysis`
    %e = nn.exp %x {dep.index = 0, dep.kind = "elementwise", dep.consumers = 2} : tensor<4xf32>
    %s = nn.reduce_sum %e {axes = [0], dep.index = 1, dep.kind = "reduction",
                           dep.consumers = 1} : (tensor<4xf32>) -> tensor<f32>
    ```

    `dep.consumers` counts the distinct ops reading any result (a
    `func.return` included). `form-fusion-groups` removes these attributes.
    """

    name = "dependency-analysis"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in functions(op):
            dep = DependencyAnalysis(func)
            for inner in dep.ops:
                readers = {u for r in inner.results for u in dep.consumers(r)}
                inner.attributes["dep.index"] = IntegerAttr(dep.index[inner], IntegerType(64))
                inner.attributes["dep.kind"] = StringAttr(dep.kind[inner].value)
                inner.attributes["dep.consumers"] = IntegerAttr(len(readers), IntegerType(64))
