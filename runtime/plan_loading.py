"""plan.json read back: the `Program` (kernel launches, values, views,
constants) and memory plans an OUT directory describes, for `fusec run OUT`
and `fusec.load_out` (after `runtime/out_dir.py` checked the file against
`runtime/plan_schema.py`). `compiler/compile.py` writes the same fields.

```python
program, memory = program_from_plan(plan, kernels_source, constants)
```
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.memory_plan import MemoryPlan
from fusec.analysis.program import (
    ArgSpec,
    FunctionProgram,
    KernelLaunch,
    Program,
    TensorSpec,
    View,
)
from fusec.runtime.plan_schema import PLAN_FORMAT, PLAN_VERSION


def program_from_plan(
    plan: dict[str, Any], kernels_source: str, constants: dict[str, np.ndarray]
) -> tuple[Program, dict[str, MemoryPlan]]:
    """Rebuild the `Program` and memory plans plan.json describes; a malformed
    plan is a `FusecError`."""
    if plan.get("format") != PLAN_FORMAT or plan.get("version") != PLAN_VERSION:
        raise FusecError(f"plan.json is not a {PLAN_FORMAT} version {PLAN_VERSION} plan")
    functions: dict[str, FunctionProgram] = {}
    memory: dict[str, MemoryPlan] = {}
    try:
        for name, f in plan["functions"].items():
            functions[name] = _function_from_json(str(name), f, constants)
            memory[name] = MemoryPlan.from_json(f["memory"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise FusecError(
            f"plan.json is malformed ({type(err).__name__}: {err}); compile the model again"
        ) from None
    return Program(kernels_source=kernels_source, functions=functions), memory


def _function_from_json(name: str, f: dict[str, Any],
                        constants: dict[str, np.ndarray]) -> FunctionProgram:
    values = {str(v): TensorSpec(tuple(int(d) for d in s["shape"]), str(s["dtype"]))
              for v, s in f["values"].items()}
    for spec in values.values():
        np.dtype(spec.dtype)  # an unknown dtype name is a malformed plan
    consts: dict[str, np.ndarray] = {}
    for value, key in f["constants"].items():
        if key not in constants:
            raise FusecError(f"constants.npz has no array '{key}' (constant {value} of @{name})")
        consts[str(value)] = constants[key]
    return FunctionProgram(
        name=name,
        inputs=[str(i["value"]) for i in f["inputs"]],
        input_names=[str(i["name"]) for i in f["inputs"]],
        outputs=[str(o["value"]) for o in f["outputs"]],
        values=values,
        launches=[_launch_from_json(entry) for entry in f["launches"]],
        views=[View(str(w["value"]), str(w["source"])) for w in f["views"]],
        constants=consts,
    )


def _triple(v: Any) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in v)
    return (a, b, c)


def _launch_from_json(e: dict[str, Any]) -> KernelLaunch:
    return KernelLaunch(
        kernel=str(e["kernel"]), grid=_triple(e["grid"]), block=_triple(e["block"]),
        shared_bytes=int(e["shared_bytes"]),
        args=[ArgSpec(str(a["value"]), tuple(int(d) for d in a["view_shape"]),
                      bool(a["writes"])) for a in e["args"]],
        ops=[str(o) for o in e["ops"]], group=str(e.get("group", "")),
        est_registers=int(e.get("est_registers", 0)),
        est_time_us=float(e.get("est_time_us", 0.0)), hbm_bytes=int(e.get("hbm_bytes", 0)),
        plan=e.get("plan"), library=_library_from_json(e),
    )


def _library_from_json(e: dict[str, Any]) -> dict[str, Any] | None:
    """The library-call fields of a launch entry (None for a kernel launch)."""
    if "library" not in e:
        return None
    from fusec.codegen.library_attention import SDPA_KEYS, is_sdpa
    from fusec.codegen.library_conv import CONV_KEYS, is_conv
    from fusec.codegen.library_gemm import LIBRARY_KEYS

    keys = CONV_KEYS if is_conv(e) else SDPA_KEYS if is_sdpa(e) else LIBRARY_KEYS
    return {k: e[k] for k in keys if k in e}
