"""The `lower-to-numba` pass: generate every kernel and record the plan on the IR.

Runs code generation (`codegen.generate.generate_program`) on a grouped module
and annotates each `fusion.group` with its kernel's name and launch shape, so
`fusec MODEL -p decompose,group-each-op,lower-to-numba` shows what would run.
The `Program` itself (kernels.py text, launches) is what the compile job
writes to OUT; this pass only makes the decisions visible and checks that
every group can be generated.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusec.analysis.targets import resolve_target, unknown_target
from fusec.codegen.generate import generate_program


@dataclass(frozen=True)
class LowerToNumbaPass(ModulePass):
    """Generate numba.cuda kernels for every fusion.group and annotate the launch plan.

    ```mlir
    // before (after group-each-op)
    %y = fusion.group (%x) {name = "g0", kind = "pointwise"}
        : (tensor<4x8xf32>) -> tensor<4x8xf32> {...}
    // after `fusec -p lower-to-numba`
    %y = fusion.group (%x) {name = "g0", kind = "pointwise", kernel = "f_g0_exp",
        grid = [8, 1, 1], block = [256, 1, 1], shared_bytes = 0} : ... {...}
    ```

    Every op outside a group other than `nn.constant` and `nn.reshape` is an
    error (run `group-each-op` first), as is a group no emitter can generate.
    A group without a `schedule` (no `tile-and-promote` before) is scheduled
    for `target` first.
    """

    name = "lower-to-numba"

    target: str = "h200"

    def __post_init__(self) -> None:
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        generate_program(op, resolve_target(self.target)[0])
