"""`torch.compile(model, backend="fusec")`: fusec as a TorchDynamo backend.

```python
import torch
y = torch.compile(model, backend="fusec")(x)
y = torch.compile(model, backend="fusec", options={"remarks": True, "target": "h100"})(x)

import fusec
backend = fusec.torch.Backend(fusion=False)      # an object that keeps its reports
y = torch.compile(model, backend=backend)(x)
backend.reports[-1].partitions                    # what ran where
```

Dynamo hands over each captured FX graph; `aot_autograd` (with PyTorch's core
ATen decompositions) turns it into a functional graph of a small op set.
That graph is split (`partition.py`): the parts fusec translates are each
compiled with `fusec.compile` into one function and run on fusec's runtime
(PyTorch tensors in and out, zero-copy on the GPU); the other nodes run in
PyTorch between them, each named in a `fallback:` remark.

Parameters and buffers are *inputs* of the compiled functions, as Dynamo
passes them: the `.mlir` holds no weights, an in-place weight update is seen
by the next call, and nothing is recompiled for it. Shapes are static per
compiled graph; guards and recompiles are PyTorch's, and a graph Dynamo
traced with dynamic shapes is compiled per set of concrete shapes
(`_PerShape`). Only the forward (or
inference) graph is compiled by fusec; a backward graph, when autograd needs
one, runs in PyTorch.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch._functorch.aot_autograd import make_boxed_func

from fusec.analysis.diagnostics import FusecError, escape_controls, warn
from fusec.analysis.remarks import remarks_to_stderr
from fusec.importers.torch import trace_cache
from fusec.importers.torch.context import Unsupported, target_name
from fusec.importers.torch.decompositions import attention_as_math, decompositions
from fusec.importers.torch.partition import SupportScan, is_glue, partition, scan_support
from fusec.importers.torch.report import (
    CONSTANTS_ONLY,
    GLUE_OUTSIDE,
    LEFT_OUTSIDE,
    Fallback,
    GraphReport,
    PartitionInfo,
)
from fusec.importers.torch.trace_cache import (
    TraceStore,
    export_module,
    plain_call,
    rebuild,
    report_json,
    trace_key,
)
from fusec.importers.torch.translate import node_at, translate_graph

log = logging.getLogger("fusec.torch")
"""Remarks (`fallback: ...`, one line per partition, the graph's summary) at INFO level."""

BACKEND_OPTIONS = frozenset({"remarks"})
"""Options of the backend itself; every other option is a keyword of `fusec.compile`."""

REPORTS_KEPT = 64
_reports: collections.deque[GraphReport] = collections.deque(maxlen=REPORTS_KEPT)


def reports() -> list[GraphReport]:
    """The reports of the last graphs compiled with `backend="fusec"` (newest last)."""
    return list(_reports)


class Backend:
    """A `torch.compile` backend with fixed options, keeping a report per graph."""

    def __init__(self, **options: Any) -> None:
        self.options = check_options(options)
        self.reports: list[GraphReport] = []

    def __call__(self, gm: fx.GraphModule, example_inputs: Sequence[Any],
                 **kwargs: Any) -> Callable[..., Any]:
        from torch._dynamo.backends.common import aot_autograd

        options = {**self.options, **check_options(kwargs.get("options") or {})}
        keep = _trace_entry(gm, example_inputs, options)
        if keep is not None:
            cached = self._cached(*keep, options)
            if cached is not None:
                return cached
        compile_forward = _ForwardCompiler(options, self.reports, keep)
        # the kernel builders warm up while aot_autograd traces (a graph whose
        # programs the cache holds leaves them idle: they cost one process each)
        from fusec.compiler.python_api import start_kernel_builders

        start_kernel_builders(str(options.get("device", "auto")))
        attention_as_math(gm)
        return aot_autograd(fw_compiler=compile_forward, bw_compiler=_eager,
                            decompositions=decompositions())(gm, example_inputs)

    def _cached(self, store: TraceStore, key: str,
                options: dict[str, Any]) -> Callable[..., Any] | None:
        """The graph rebuilt from the trace cache's entry (each partition's
        program from fusec.compile, which has its own cache), or None."""
        body = store.read(key)
        if body is None:
            trace_cache.report_event("miss", key)
            return None
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        compiler = _ForwardCompiler(options, self.reports, None)
        try:
            with unset_fake_temporarily():  # real constants, even inside Dynamo's fake mode
                call, report = rebuild(body, compiler.compile_text)
        except FusecError:
            raise
        except Exception as err:  # an entry this torch cannot rebuild: trace again
            warn(escape_controls(f"ignoring the traced graph '{store.entry(key)}' "
                                 f"({type(err).__name__}: {err}); tracing again"))
            return None
        compiler._announce(report)
        self.reports.append(report)
        trace_cache.report_event("hit", key)
        return call


def _trace_entry(gm: fx.GraphModule, example_inputs: Sequence[Any],
                 options: dict[str, Any]) -> tuple[TraceStore, str] | None:
    """The trace cache and the key of `gm`, or None where it is off or the
    graph cannot be kept (said to the cache's listeners)."""
    if options.get("remarks") or options.get("cache") is False:
        return None  # remarks come from a compile; cache=False asks for one
    store = TraceStore.user()
    if store is None:
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # the graph's constants are read
        key, why = trace_key(gm, example_inputs, {**options, "conv_tf32": _cudnn_tf32()})
    if key is None:
        trace_cache.report_event("bypass", why)
        return None
    return store, key


def _fallbacks(report: GraphReport, nodes: dict[str, fx.Node],
               reasons: dict[str, str]) -> dict[str, Fallback]:
    """Each node PyTorch runs: its op and why."""
    found: dict[str, Fallback] = {}
    for part in report.partitions:
        if part.launches is not None:
            continue
        for name in part.nodes:
            node = nodes.get(name)
            op = target_name(node) if node is not None else name
            if name in reasons:
                why = reasons[name]
            elif part.name != "torch":
                why = CONSTANTS_ONLY
            else:
                why = GLUE_OUTSIDE if name in report.glue else LEFT_OUTSIDE
            found[name] = Fallback(op, why)
    return found


def fusec_backend(gm: fx.GraphModule, example_inputs: Sequence[Any],
                  options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The backend registered as "fusec" (entry point `torch_dynamo_backends`);
    its reports go to `reports()`."""
    backend = Backend(**(options or {}))
    compiled = backend(gm, example_inputs)
    return _Recorded(compiled, backend.reports)


class _Recorded:
    """The compiled callable; moves the backend's reports (filled when
    aot_autograd compiles, possibly on the first call) to `reports()`."""

    def __init__(self, compiled: Callable[..., Any], pending: list[GraphReport]) -> None:
        self.compiled = compiled
        self.pending = pending
        self._boxed_call = getattr(compiled, "_boxed_call", False)
        _flush(pending)

    def __call__(self, *args: Any) -> Any:
        out = self.compiled(*args)
        if self.pending:
            _flush(self.pending)
        return out


def _flush(pending: list[GraphReport]) -> None:
    _reports.extend(pending)
    pending.clear()


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """Refuse an option that is neither the backend's nor `fusec.compile`'s."""
    from fusec.compiler.python_api import compile as fusec_compile

    known = BACKEND_OPTIONS | set(inspect.signature(fusec_compile).parameters) - {"source"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise FusecError(f"unknown fusec backend option '{unknown[0]}' "
                         f"(known: {', '.join(sorted(known))})")
    return dict(options)


def _cudnn_tf32() -> bool:
    """PyTorch's own rule for f32 convolutions (`torch.backends.cudnn.allow_tf32`,
    on by default): fusec's library convolutions follow it unless the
    backend's options say `conv_tf32`."""
    import torch

    return bool(torch.backends.cudnn.allow_tf32)


def _eager(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    return make_boxed_func(gm.forward)


class _ForwardCompiler:
    """aot_autograd's forward compiler: partition, compile, splice in."""

    def __init__(self, options: dict[str, Any], reports: list[GraphReport],
                 keep: tuple[TraceStore, str] | None = None) -> None:
        self.options = options
        self.remarks = bool(options.get("remarks", False))
        self.compile_options = {k: v for k, v in options.items() if k not in BACKEND_OPTIONS}
        self.reports = reports
        self.keep = keep
        """Where to keep what this graph became (the trace cache and its key)."""

    def __call__(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if _symbolic(gm):
            return make_boxed_func(_PerShape(self.options, self.reports, gm))
        calls = [n for n in gm.graph.nodes if n.op == "call_function"]
        original = {n.name for n in calls}
        glue = {n.name for n in calls if is_glue(n)}
        scan, fused, report = self._compile_parts(gm, len(calls))
        # The graph's own nodes still outside a partition: the unsupported ones
        # and `getitem`s of them (the partitioner's own `getitem`s, which unpack
        # a partition's results, are not the model's). Fusing may rebuild the
        # graph: nodes are matched by name.
        left = [n.name for n in fused.graph.nodes
                if n.op == "call_function" and n.name in original]
        if left:
            report.partitions.append(PartitionInfo("torch", left, None))
        report.glue = [n for n in report.fallback_nodes if n in glue]
        report.fallbacks = _fallbacks(report, {n.name: n for n in calls},
                                      {n.name: why for n, why in scan.reasons.items()})
        report.remarks = scan.remarks() + [
            f"fallback: partition {p.name} ({len(p.nodes)} nodes) runs in PyTorch: "
            "it computes constants only" for p in report.partitions
            if p.launches is None and p.name != "torch"] + [
            f"partition {p.name}: {len(p.nodes)} nodes, {p.launches} launch(es)"
            for p in report.fusec_partitions] + [report.summary()]
        self._announce(report)
        self.reports.append(report)
        if self.keep is not None:
            self._keep(fused, example_inputs, report, *self.keep)
        fused.recompile()
        # boxed (aot_autograd hands the arguments as one list it may clear)
        return make_boxed_func(fused.forward)

    def _compile_parts(self, gm: fx.GraphModule, most: int
                       ) -> tuple[SupportScan, fx.GraphModule, GraphReport]:
        """Partition `gm` and compile its parts. A node whose ops fusec
        rejects (a located error of the compile: a rule of the `nn` verifier
        that its translation broke) is left to PyTorch with that reason and
        the graph partitioned again, from a copy kept before partitioning
        changed it; at most `most` times."""
        pristine = copy.deepcopy(gm.graph)
        refused: dict[str, str] = {}
        while True:
            work = gm if not refused else fx.GraphModule(gm, copy.deepcopy(pristine))
            report = GraphReport()
            scan = scan_support(work, refused)
            fused, names = partition(work, scan)
            try:
                for name in names:
                    report.partitions.append(self._compile_part(fused, name))
            except _RejectedNode as rejected:
                if rejected.node in refused or len(refused) >= most:
                    raise rejected.error from None
                refused[rejected.node] = (rejected.error.message if isinstance(
                    rejected.error, Unsupported) else
                    f"fusec rejected its translation: {rejected.error.message}")
                continue
            return scan, fused, report

    def _keep(self, fused: fx.GraphModule, example_inputs: Sequence[Any], report: GraphReport,
              store: TraceStore, key: str) -> None:
        """Keep the glue graph and the partitions' texts for the next process,
        where aot_autograd's wrappers would do nothing but call `fused`."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        why = plain_call(fused, example_inputs)
        with unset_fake_temporarily():  # aot_autograd compiles under a fake mode
            export = why or export_module(fused, {
                p.name: (p.text, getattr(fused, p.name).returns_tuple)
                for p in report.fusec_partitions})
        if isinstance(export, str):
            trace_cache.report_event("bypass", export)
            return
        store.store(key, {"glue": export, "report": report_json(report)})

    def compile_text(self, text: str) -> Any:
        """`fusec.compile` of one partition's `nn` text with the backend's options."""
        from fusec.compiler.python_api import compile as fusec_compile

        # Remarks come from a compile: asked for, the partition is compiled
        # even where the compiled-program cache holds it.
        options = {"cache": not self.remarks, "conv_tf32": _cudnn_tf32(),
                   **self.compile_options}
        with remarks_to_stderr() if self.remarks else contextlib.nullcontext():
            return fusec_compile(text, **options)

    def _compile_part(self, fused: fx.GraphModule, name: str) -> PartitionInfo:
        sub = getattr(fused, name)
        nodes = [n.name for n in sub.graph.nodes if n.op == "call_function"]
        try:
            translation = translate_graph(sub, name)
        except Unsupported as err:
            # translated when scanned, not inside its partition (an operand
            # the scan knew the value of and the partition receives)
            if not err.node:
                raise
            raise _RejectedNode(err.node, err) from None
        if not translation.args:
            # Only constants: PyTorch computes them once per call, no kernel needed.
            return PartitionInfo(name, nodes, None)
        try:
            model = self.compile_text(translation.text)
        except FusecError as err:
            node = node_at(translation.text, err.loc.line) if err.loc is not None else None
            if node is None:
                raise
            raise _RejectedNode(node, err) from None
        outputs = next(n for n in sub.graph.nodes if n.op == "output").args[0]
        setattr(fused, name, FusecPartition(model, isinstance(outputs, tuple | list)))
        return PartitionInfo(name, nodes, model.launches, translation.text, model)

    def _announce(self, report: GraphReport) -> None:
        for line in report.remarks:
            log.info("%s", line)
            if self.remarks:
                print(f"fusec: {line}", file=sys.stderr)


def _symbolic(gm: fx.GraphModule) -> bool:
    """Whether Dynamo traced `gm` with dynamic shapes (an input that is a
    size, or a tensor whose shape is symbolic): after a call with new shapes
    (automatic dynamic shapes), or with `dynamic=True`."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        meta = node.meta.get("val")
        if isinstance(meta, torch.SymInt | torch.SymFloat | torch.SymBool):
            return True
        if isinstance(meta, torch.Tensor) and any(
                not isinstance(d, int) for d in meta.shape):
            return True
    return False


class _PerShape:
    """A graph traced with dynamic shapes, compiled for each set of concrete
    shapes it is called with: fusec's kernels are specialised to static
    shapes. The first call with new shapes traces the graph again with
    those (`make_fx`, which also runs it once) and compiles that graph; later
    calls with the same shapes reuse it. At most `KEPT` sets of shapes are
    kept, the least recently used dropped first (with its executor's device
    buffers): a model fed ever new lengths would otherwise hold one compiled
    program per length."""

    KEPT = 8

    def __init__(self, options: dict[str, Any], reports: list[GraphReport],
                 gm: fx.GraphModule) -> None:
        self.options, self.reports, self.gm = options, reports, gm
        self.compiled: OrderedDict[tuple[object, ...], Callable[..., Any]] = OrderedDict()

    def __call__(self, *args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
                    for a in args)
        call = self.compiled.get(key)
        if call is None:
            from torch.fx.experimental.proxy_tensor import make_fx

            with torch.no_grad():
                static = make_fx(self.gm)(*args)
            static.graph.eliminate_dead_code()  # make_fx keeps unused outputs' picks
            static.recompile()
            call = _ForwardCompiler(self.options, self.reports)(static, args)
            self.compiled[key] = call
            while len(self.compiled) > self.KEPT:
                self.compiled.popitem(last=False)
        else:
            self.compiled.move_to_end(key)
        return call(list(args))  # boxed, as aot_autograd's compilers return it


class _RejectedNode(Exception):
    """The compile of a partition failed at the ops of FX node `node`."""

    def __init__(self, node: str, error: FusecError) -> None:
        super().__init__(node)
        self.node = node
        self.error = error


class FusecPartition(torch.nn.Module):
    """A compiled fusec function in place of a fused FX submodule."""

    def __init__(self, model: Any, returns_tuple: bool) -> None:
        super().__init__()
        self.model = model
        self.returns_tuple = returns_tuple

    def forward(self, *args: torch.Tensor) -> Any:
        """Run the function on PyTorch tensors; results are PyTorch tensors."""
        # Dense operands; no detach: the model reads addresses, and detaches a
        # tensor that requires grad itself where it needs to (a first call).
        # A detach per parameter was most of this wrapper's time per call.
        out = self.model(*[a.contiguous() for a in args])
        if not self.returns_tuple:
            return out
        return tuple(out) if isinstance(out, tuple) else (out,)
