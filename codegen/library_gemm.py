"""A contraction group marked `gemm = "library"` (`scheduling/gemm_choice.py`)
becomes a library call in the plan, not a kernel:

```json
{"kernel": "cublas_sgemm", "library": "cublas_sgemm", "a": "v0", "b": "v1", "c": "v2",
 "transpose_a": false, "transpose_b": true, "batch": [2], "m": 64, "n": 32, "k": 48,
 "args": [{"value": "v0", ...}, {"value": "v1", ...}, {"value": "v2", "writes": true}]}
```

`a` and `b` are the values the matmul reads (before a transpose folded into
the flag), `c` its result; `batch` the result's batch dimensions (operands
broadcast as in NumPy). The runtime runs it with CuPy on the plan's stream
(`runtime/library_gemm.py`).

A group that also holds the leading ops of the matmul's epilogue that
cuBLASLt computes (`analysis/library_epilogue.py`) adds, each only when
present: `"bias"` (the value of the N-element bias vector), `"residual"`
(the full-shape value added as cuBLASLt's C, beta = 1) and `"activation"`
(`"relu"` or `"gelu_tanh"`); their values follow C in `args`, bias first.
`c` is then D, the epilogue's result. The runtime runs such a launch
through cuBLASLt (`runtime/cublaslt.py`).

`LibraryGemmWriter` is the writer of backend "library", kind "contraction"
in the registry of `codegen/writers.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.diagnostics import op_error
from fusec.analysis.gemm_operand_mode import operand_mode
from fusec.analysis.library_epilogue import EpilogueFold, fold_epilogue
from fusec.analysis.program import ArgSpec, KernelLaunch
from fusec.codegen.writers import LIBRARY, WriteTask, Written
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape

EPILOGUE_KEYS = ("bias", "residual", "activation")
"""The keys of a launch whose library call computes part of the epilogue."""
LIBRARY_KEYS = ("library", "a", "b", "c", "transpose_a", "transpose_b", "batch", "m", "n", "k",
                *EPILOGUE_KEYS)


def has_epilogue(spec: dict[str, Any]) -> bool:
    """Whether a library launch carries an epilogue (a cuBLASLt call)."""
    return any(k in spec for k in EPILOGUE_KEYS)


def library_launch(group: GroupOp, value_id: Callable[[SSAValue, Operation | None], str],
                   group_name: str) -> KernelLaunch:
    """The plan launch of a library GEMM group."""
    mm = next((op for op in group.block.ops if isinstance(op, nn.MatmulOp)), None)
    last = group.block.last_op
    fold = EpilogueFold()
    if mm is not None and isinstance(last, YieldOp):
        fold = fold_epilogue(mm, [op for op in group.block.ops if op is not last],
                             group.block.args, list(last.operands))
    end = fold.ops[-1].results[0] if fold else mm.result if mm else None
    rest = [op for op in group.block.ops if not isinstance(
        op, (YieldOp, nn.MatmulOp, nn.TransposeOp, nn.ConstantOp)) and op not in fold.ops]
    if mm is None or not isinstance(last, YieldOp) or list(last.operands) != [end] or rest:
        raise op_error(group, 'a gemm = "library" group must be one nn.matmul and the '
                       "epilogue cuBLASLt computes, and yield its result")
    outer: list[tuple[str, bool]] = []
    for v in mm.operands:
        mode, loaded = operand_mode(v)
        if mode == "computed" or not isinstance(loaded, BlockArgument):
            raise op_error(group, "a library GEMM reads its operands directly or transposed")
        outer.append((value_id(group.inputs[loaded.index], group), mode == "transposed"))
    c = value_id(group.outputs[0], group)
    name = of_device_dtype(value_dtype(mm.result)).library_gemm
    if not name:
        raise op_error(group, f"no library GEMM for {value_dtype(mm.result)}")
    out = tensor_shape(mm.result)
    spec: dict[str, Any] = {
        "library": name, "a": outer[0][0], "b": outer[1][0], "c": c,
        "transpose_a": outer[0][1], "transpose_b": outer[1][1], "batch": list(out[:-2]),
        "m": out[-2], "n": out[-1], "k": tensor_shape(mm.operands[0])[-1],
    }
    shapes = [tensor_shape(group.inputs[a.index]) for a in _loaded(mm)]
    args = [ArgSpec(outer[0][0], shapes[0], False), ArgSpec(outer[1][0], shapes[1], False),
            ArgSpec(c, out, True)]
    for key, v in (("bias", fold.bias), ("residual", fold.residual)):
        if v is not None:
            assert isinstance(v, BlockArgument)
            outer_value = group.inputs[v.index]
            spec[key] = value_id(outer_value, group)
            args.append(ArgSpec(spec[key], tensor_shape(outer_value), False))
    if fold.activation is not None:
        spec["activation"] = fold.activation
    return KernelLaunch(kernel=name, grid=(0, 0, 0), block=(0, 0, 0), shared_bytes=0,
                        args=args, ops=[op.name for op in group.block.ops
                                        if not isinstance(op, YieldOp)],
                        group=group_name, library=spec)


class LibraryGemmWriter:
    """The "library" backend's contraction writer: the group's plan launch
    (`library_launch`), no kernel."""

    backend = LIBRARY
    kind = "contraction"

    def write(self, task: WriteTask) -> Written:
        """The library launch of `task.group`."""
        return library_launch(task.group, task.value_id, task.group_name)


def _loaded(mm: nn.MatmulOp) -> list[BlockArgument]:
    out: list[BlockArgument] = []
    for v in mm.operands:
        _, loaded = operand_mode(v)
        assert isinstance(loaded, BlockArgument)
        out.append(loaded)
    return out
