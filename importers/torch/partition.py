"""Split an FX graph into parts fusec runs and nodes PyTorch runs.

Support is decided by trying: every node is translated once into a scratch
function (the inputs typed from the traced values), and the nodes whose
translation succeeds are supported. PyTorch's `CapabilityBasedPartitioner`
then groups supported nodes into the largest partitions that create no cycle,
and fuses each into a submodule (`fused_0`, `fused_1`, ...) that the backend
replaces with a compiled fusec function. Each unsupported node gets a remark
saying why (one line; wrapped here):

```
fallback: node 'cumsum' (aten.cumsum.default) at model.py:14 runs in PyTorch:
  fusec has no translation for aten.cumsum.default
```
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from fusec.analysis.diagnostics import FusecError
from fusec.importers.onnx.emit import Emitter, Val
from fusec.importers.torch.context import GraphState, Value, node_label, numpy_dtype
from fusec.importers.torch.translate import placeholder_val, translate_node

PARTITION_PREFIX = "fused_"

aten = torch.ops.aten

GLUE_TARGETS: frozenset[object] = frozenset({
    operator.getitem,
    aten.view.default, aten._unsafe_view.default, aten.alias.default, aten.detach.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.expand.default,
    aten.slice.Tensor, aten.select.int, aten.as_strided.default,
})
"""The nodes that are glue when PyTorch runs them: picking an output of a
multi-output op (`getitem`) and PyTorch's views, which move no data (a view
of a tensor is its storage with other strides). Every other node PyTorch
runs is compute that fusec does not do."""


def is_glue(node: fx.Node) -> bool:
    """Whether `node` is glue (`GLUE_TARGETS`)."""
    return node.op == "call_function" and node.target in GLUE_TARGETS


@dataclass
class SupportScan:
    """Which call nodes fusec translates, and why each other one is not."""

    supported: set[fx.Node] = field(default_factory=set)
    reasons: dict[fx.Node, str] = field(default_factory=dict)

    def remarks(self) -> list[str]:
        """One `fallback: ...` line per node PyTorch runs, in graph order."""
        return [f"fallback: node {node_label(n)} runs in PyTorch: {why}"
                for n, why in self.reasons.items()]


def scan_support(gm: fx.GraphModule, refused: Mapping[str, str] | None = None) -> SupportScan:
    """Try every node of `gm` once; translation failures are reasons, never
    errors. `refused`: nodes (by name) left to PyTorch whatever their
    translation, with the reason (what compiling their ops found wrong)."""
    scan = SupportScan()
    state = GraphState(Emitter())
    refused = refused or {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            state.values[node] = _stand_in(state.em, node)
        elif node.op == "call_function" and node.name in refused:
            scan.reasons[node] = _reason(node, refused[node.name])
            state.values[node] = _stand_in(state.em, node)
        elif node.op in ("call_function", "get_attr"):
            try:
                state.values[node] = translate_node(node, state, gm)
                if node.op == "get_attr":
                    # A partition receives a tensor constant as an input, not a
                    # known value: nothing is folded from it here either.
                    state.values[node] = _stand_in(state.em, node)
                if node.op == "call_function":
                    scan.supported.add(node)
            except FusecError as err:
                scan.reasons[node] = _reason(node, err.message)
                state.values[node] = _stand_in(state.em, node)
            except (KeyError, ValueError, TypeError, IndexError, AssertionError) as err:
                # A translator that trips over an unusual argument: PyTorch runs the node.
                scan.reasons[node] = f"cannot translate it ({type(err).__name__}: {err})"
                state.values[node] = _stand_in(state.em, node)
        elif node.op in ("call_module", "call_method"):
            scan.reasons[node] = f"{node.op} nodes are not translated"
    return scan


def _reason(node: fx.Node, message: str) -> str:
    """The error message without its `node '...' (...):` prefix."""
    prefix = f"node {node_label(node)}: "
    return message.removeprefix(prefix)


def _stand_in(em: Emitter, node: fx.Node) -> Value:
    """Typed placeholder values for a node's results, so that its users can
    still be tried (their inputs come from PyTorch at run time)."""
    meta = node.meta.get("val")
    if isinstance(meta, list | tuple):
        return tuple(_tensor_val(em, node.name, m) for m in meta)
    if node.op == "placeholder":
        try:
            return placeholder_val(em, node)
        except FusecError:
            return None  # type: ignore[return-value]
    return _tensor_val(em, node.name, meta)  # type: ignore[return-value]


def _tensor_val(em: Emitter, name: str, meta: object) -> Val | None:
    if not isinstance(meta, torch.Tensor) or numpy_dtype(meta.dtype) is None:
        return None
    try:
        shape = tuple(int(d) for d in meta.shape)
    except (TypeError, RuntimeError):
        return None
    return Val(em.fresh(name), shape, numpy_dtype(meta.dtype))  # type: ignore[arg-type]


class _ScannedSupport(OperatorSupportBase):
    """The partitioner's question answered from a `SupportScan`."""

    def __init__(self, scan: SupportScan) -> None:
        self.scan = scan

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: fx.Node
                          ) -> bool:
        return node in self.scan.supported


def partition(gm: fx.GraphModule, scan: SupportScan) -> tuple[fx.GraphModule, list[str]]:
    """Fuse the supported nodes of `gm` into `fused_N` submodules (in place);
    returns the module and the submodule names."""
    partitioner = CapabilityBasedPartitioner(gm, _ScannedSupport(scan),
                                             allows_single_node_partition=True)
    parts = [p for p in partitioner.propose_partitions() if _computes(p.nodes)]
    fused = partitioner.fuse_partitions(parts, prefix=PARTITION_PREFIX)
    names = [n.target for n in fused.graph.nodes
             if n.op == "call_module" and str(n.target).startswith(PARTITION_PREFIX)]
    return fused, [str(n) for n in names]


def _computes(nodes: Mapping[fx.Node, object]) -> bool:
    """Whether a partition does more than pick tuple elements."""
    return any(n.target is not operator.getitem for n in nodes)
