"""The flops of each launch of a compiled function, read from the IR after
the pipeline (`OUT/model.mlir`, or the module a compile keeps in memory):
for `fusec run --profile` (`compiler/run_profile.py`).

The plan records each launch's bytes (`hbm_bytes`) and the group it runs
(`group`, the group's `name` attribute), not its flops. Those are counted
here as code generation counts them when it prices a launch: the sum of
`analysis.cost_model.op_flops` over the ops of the group (a matmul
`2·M·N·K`, a reduction one per input element, an elementwise op its
`ELEMENTWISE_FLOPS` per result element).

```python
flops = launch_flops(module, program.functions["f"])   # one entry per launch
```
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp

from fusec.analysis.cost_model import op_flops
from fusec.analysis.program import FunctionProgram
from fusec.dialects.fusion import GroupOp, YieldOp


def group_flops(module: ModuleOp, function: str) -> dict[str, float]:
    """Flops of every named group of `@function` in `module`, by name."""
    out: dict[str, float] = {}
    for func in module.ops:
        if not isinstance(func, FuncOp) or func.sym_name.data != function:
            continue
        for op in func.walk():
            name = op.attributes.get("name") if isinstance(op, GroupOp) else None
            if isinstance(op, GroupOp) and isinstance(name, StringAttr):
                out[name.data] = sum(op_flops(inner) for inner in op.block.ops
                                     if not isinstance(inner, YieldOp))
    return out


def launch_flops(module: ModuleOp | None, fp: FunctionProgram) -> list[float | None]:
    """Flops of each launch of `fp`. A group that runs as several launches
    (a split reduction's passes) counts its flops once, on its first launch
    (which reads the whole input); None where `module` (None: not at hand)
    has no group of the launch's name."""
    groups = group_flops(module, fp.name) if module is not None else {}
    seen: set[str] = set()
    out: list[float | None] = []
    for launch in fp.launches:
        if launch.group not in groups:
            out.append(None)
        elif launch.group in seen:
            out.append(0.0)
        else:
            seen.add(launch.group)
            out.append(groups[launch.group])
    return out
