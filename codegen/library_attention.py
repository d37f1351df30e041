"""An attention group marked `backend = "library"` (`fuse-attention` chose
cuDNN's fused attention, `scheduling/attention_library.py`) becomes a plan
launch, not a kernel:

```json
{"kernel": "cudnn_sdpa_bf16", "library": "cudnn_sdpa_bf16", "scale": 0.125, "causal": false,
 "q": {"value": "v3", "offset": 0, "dims": [16, 12, 197, 64], "strides": [453888, 64, 2304, 1]},
 "k": {"value": "v3", "offset": 768, ...}, "v": {"value": "v3", "offset": 1536, ...},
 "o": {"value": "v4", "offset": 0, "dims": [16, 12, 197, 64], "strides": [151296, 64, 768, 1]},
 "args": [{"value": "v3", ...}, {"value": "v3", ...}, {"value": "v3", ...},
          {"value": "v4", ..., "writes": true}]}
```

Each of Q, K, V and the output O is `[batch, heads, tokens, head dim]` at an
element offset in the value named, with these strides (a head of a packed
QKV projection, an output written into `[batch, tokens, heads * dim]`:
read and written in place). A mask tensor added to the scaled scores (a
padding mask) is `"bias"`, `[batch, heads, queries, keys]` with stride 0
where it broadcasts. The arguments are the values of Q, K, V, the bias if
any, and O, in that order (one value may hold several). The runtime runs it through
cuDNN on the plan's stream (`runtime/cudnn_sdpa.py`).

`LibraryAttentionWriter` is the writer of backend "library", kind
"attention" in the registry of `codegen/writers.py`.
"""

from __future__ import annotations

from typing import Any

from fusec.analysis.program import ArgSpec, KernelLaunch
from fusec.codegen.writers import LIBRARY, WriteTask, Written
from fusec.dialects.nn_base import tensor_shape
from fusec.scheduling.attention_library import LibraryAttentionPlan

SDPA_PREFIX = "cudnn_sdpa_"
SDPA_KEYS = ("library", "q", "k", "v", "o", "scale", "causal", "bias")
"""The keys of a library attention launch ("bias" only with a mask tensor)."""
TENSORS = ("q", "k", "v", "o")
BIAS_TENSORS = ("q", "k", "v", "bias", "o")


def launch_tensors(spec: dict[str, Any]) -> tuple[str, ...]:
    """The launch's tensors, in the order of its arguments."""
    return BIAS_TENSORS if "bias" in spec else TENSORS


def is_sdpa(spec: dict[str, Any]) -> bool:
    """Whether a library launch is cuDNN's attention."""
    return str(spec.get("library", "")).startswith(SDPA_PREFIX)


def library_attention_launch(task: WriteTask) -> KernelLaunch:
    """The plan launch of a library attention group, from its plan
    (`scheduling/attention_library.plan_library_attention`)."""
    group, plan = task.group, task.plan.detail
    assert isinstance(plan, LibraryAttentionPlan)
    found = plan.attention
    values = {**plan.sources, "o": group.outputs[0]}
    ids = {w: task.value_id(v, group) for w, v in values.items()}
    placed = {"q": found.q, "k": found.k, "v": found.v, "o": found.o}
    if found.bias is not None:
        placed["bias"] = found.bias
    name = f"{SDPA_PREFIX}{found.element}"
    spec: dict[str, Any] = {"library": name, "scale": found.scale, "causal": found.causal,
                            **{w: {"value": ids[w], **placed[w].json()} for w in placed}}
    tensors = launch_tensors(spec)
    args = [ArgSpec(ids[w], tensor_shape(values[w]), w == "o") for w in tensors]
    ops = [op.name for op in group.block.ops if op.name != "fusion.yield"]
    return KernelLaunch(kernel=name, grid=(0, 0, 0), block=(0, 0, 0), shared_bytes=0,
                        args=args, ops=ops, group=task.group_name, library=spec)


class LibraryAttentionWriter:
    """The "library" backend's attention writer: the group's cuDNN launch
    (`library_attention_launch`), no kernel."""

    backend = LIBRARY
    kind = "attention"

    def write(self, task: WriteTask) -> Written:
        """The library launch of `task.group`."""
        return library_attention_launch(task)
