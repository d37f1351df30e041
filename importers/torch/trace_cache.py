"""Traced graphs kept across processes: a warm `torch.compile(backend="fusec")`
call skips `aot_autograd`, the partitioner and the translation to `nn`.

The first process that compiles a Dynamo graph keeps what the backend made
of it: the glue graph (the FX code PyTorch runs between fusec's partitions,
with its tensor constants) and each partition's `nn` text. A later process
handed the same graph rebuilds the callable from that entry, and each
partition's text goes to `fusec.compile`, which finds the compiled program
in its own cache (`compiler/program_cache.py`) or compiles it.

```python
key, why = trace_key(gm, example_inputs, options)   # None and the reason: not kept
hit = TraceStore.user().load(key, options)          # (callable, GraphReport) or None
```

Only what `aot_autograd` would run as a plain call is kept: an inference
graph (grad off, or no input that requires grad) whose traced metadata
shows no input mutated (batch norm in training mode updates its running
statistics: such a graph is traced every time), no output aliasing an input
or another output, no effect tokens, and as many graph inputs as Dynamo
passes. For those, aot_autograd's runtime wrappers do nothing but call the
compiled graph, so the rebuilt callable is the same program.

- The key is a SHA-256 over the Dynamo graph's code, the content of its
  tensor attributes, each input's type, shape, strides, dtype, device and
  `requires_grad`, the grad mode, the default dtype, the backend's options,
  the torch version, and fusec's version and source digest. A graph that
  calls anything but torch's own functions and operators, holds submodules,
  takes symbolic sizes or runs under autocast is not kept (its code would
  not say everything the trace depends on).
- An entry is `traces/KEY[:2]/KEY.json` in the per-user cache folder
  (`$FUSEC_CACHE_DIR`), signed with the user's key (the glue code is
  executed when loaded): one that is damaged or not signed by this user is a
  miss with one warning line, traced again and replaced. Writing is atomic.
  At most `MAX_ENTRIES` entries are kept (least recently used go first).
- `FUSEC_TRACE_CACHE=0`, `options={"cache": False}` and `remarks` (which
  come from a compile) turn it off.

Every lookup is reported to the functions `add_listener` took: ("hit",
key), ("miss", key), ("stored", key) or ("bypass", reason).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import math
import operator
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import fx

from fusec.analysis.diagnostics import FusecError, escape_controls, warn
from fusec.analysis.env_switch import switched_off
from fusec.importers.torch.report import Fallback, GraphReport, PartitionInfo
from fusec.runtime.out_signature import signature_matches

TRACE_CACHE_ENV = "FUSEC_TRACE_CACHE"
ENTRY_FORMAT = "fusec-trace"
ENTRY_VERSION = 1
MAX_ENTRIES = 256
MAX_CONSTANT_BYTES = 16 * 1024 * 1024
"""Glue constants past this are not kept (an entry holds code, not weights)."""
_DOMAIN = b"fusec-trace-signature-v1\n"
_OWN_NAMESPACES = frozenset({"aten", "prims"})
_OWN_MODULES = ("torch", "operator", "_operator", "builtins", "math")

Listener = Callable[[str, str], None]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Call `listener(event, detail)` on every lookup and store (tests count hits)."""
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    """Stop calling `listener`."""
    with contextlib.suppress(ValueError):
        _listeners.remove(listener)


def report_event(event: str, detail: str) -> None:
    """Tell the listeners (`add_listener`) of one lookup or store."""
    for listener in list(_listeners):
        listener(event, detail)


# --- the key ------------------------------------------------------------------------------


def trace_key(gm: fx.GraphModule, example_inputs: Sequence[Any],
              options: dict[str, Any]) -> tuple[str | None, str]:
    """The entry key of Dynamo's graph `gm` for these inputs and options, or
    None and the reason it cannot be kept."""
    why = _unkeyable(gm, example_inputs)
    if why:
        return None, why
    from fusec.codegen.kernel_cache import toolchain_versions
    from fusec.compiler.program_cache import source_digest

    payload = {
        "format": ENTRY_FORMAT, "version": ENTRY_VERSION,
        "code": gm.code,
        "attributes": _attribute_digests(gm),
        "inputs": [_input_meta(t) for t in example_inputs],
        "grad": torch.is_grad_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "options": options,
        "torch": torch.__version__,
        **toolchain_versions(),
        "fusec_source": source_digest(),
    }
    encoded = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest(), ""


def _unkeyable(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> str:
    """Why `gm`'s trace cannot be keyed by its code and inputs ("" when it can)."""
    if not isinstance(gm, fx.GraphModule):
        return f"the graph is a {type(gm).__name__}"
    if any(True for _ in gm.children()):
        return "the graph holds submodules"
    for node in gm.graph.nodes:
        if node.op == "call_module":
            return "the graph calls a module"
        if node.op == "call_function" and not _torch_own(node.target):
            return f"the graph calls {getattr(node.target, '__name__', node.target)!r}"
        if node.op == "get_attr" and not isinstance(_attribute(gm, node.target), torch.Tensor):
            return f"the graph reads attribute {node.target!r}"
    for t in example_inputs:
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            return f"an input is a {type(t).__name__}"
        if any(isinstance(d, torch.SymInt) for d in (*t.shape, *t.stride())):
            return "an input has symbolic sizes"
    if torch.is_grad_enabled() and any(t.requires_grad for t in example_inputs):
        return "autograd needs a backward graph"
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return "autocast is on"
    return ""


def _torch_own(target: object) -> bool:
    """Whether a call target is one of torch's own: an ATen or prims op, or a
    function of torch, operator, builtins or math (not user code, which could
    change behind an unchanged graph)."""
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return target.namespace in _OWN_NAMESPACES
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] in _OWN_MODULES


def _attribute(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


def _attribute_digests(gm: fx.GraphModule) -> dict[str, str]:
    """A digest of each tensor attribute the graph reads (its values are part of the trace)."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            t = _attribute(gm, node.target).detach().cpu().contiguous()
            data = t.view(torch.uint8) if t.numel() else t
            found[str(node.target)] = hashlib.sha256(data.numpy().tobytes()).hexdigest() + \
                f" {tuple(t.shape)} {t.dtype}"
    return found


def _input_meta(t: torch.Tensor) -> list[Any]:
    return [type(t).__name__, list(t.shape), list(t.stride()), t.storage_offset(),
            str(t.dtype), str(t.device), t.requires_grad]


# --- what can be kept ------------------------------------------------------------------


def plain_call(fused: fx.GraphModule, example_inputs: Sequence[Any]) -> str:
    """Why aot_autograd's wrappers around the traced graph `fused` are more
    than a call ("" when they are only a call), from its traced metadata."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None:
        return "no traced metadata"
    if any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        return "the graph mutates an input (a buffer updated in place)"
    if meta.num_outputs_aliased or meta.num_intermediate_bases:
        return "an output aliases an input or another output"
    if meta.tokens or getattr(meta, "num_graphsafe_rng_states", 0):
        return "the graph has effect tokens or RNG state"
    if any(type(m).__name__ != "PlainTensorMeta" for m in meta.subclass_inp_meta
           if not isinstance(m, int)):
        return "an input is a tensor subclass"
    placeholders = sum(n.op == "placeholder" for n in fused.graph.nodes)
    if placeholders != len(example_inputs):
        return "the traced graph takes other inputs than Dynamo passes"
    return ""


# --- the entry: the glue graph as code ---------------------------------------------------


def _glue_globals() -> dict[str, Any]:
    """The names FX's generated code uses, resolved in this process."""
    import torch.fx._pytree as fx_pytree
    import torch.utils._pytree as pytree

    return {"inf": math.inf, "nan": math.nan, "NoneType": type(None), "torch": torch,
            "device": torch.device, "fx_pytree": fx_pytree, "pytree": pytree,
            "getitem": operator.getitem}


def export_module(gm: fx.GraphModule, fusec_parts: dict[str, Any]) -> dict[str, Any] | str:
    """The glue graph `gm` as an entry's JSON (code, constants, submodules),
    or the reason it cannot be kept. `fusec_parts`: the submodules that are
    fusec partitions, by name, as (text, returns_tuple)."""
    code = gm.graph.python_code(root_module="self")
    known = _glue_globals()
    for name, value in code.globals.items():
        if name not in known or not (known[name] is value or known[name] == value
                                     or (isinstance(value, float) and math.isnan(value))):
            return f"the glue code uses {name!r}"
    for node in gm.graph.nodes:
        if node.op == "call_function" and not _torch_own(node.target):
            return f"the glue code calls {getattr(node.target, '__name__', node.target)!r}"
    children: dict[str, Any] = {}
    for name, child in gm.named_children():
        if name in fusec_parts:
            text, returns_tuple = fusec_parts[name]
            children[name] = {"fusec": text, "returns_tuple": returns_tuple}
        elif isinstance(child, fx.GraphModule):
            inner = export_module(child, {})
            if isinstance(inner, str):
                return inner
            children[name] = {"glue": inner}
        else:
            return f"the glue graph holds a {type(child).__name__}"
    constants = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr" and str(node.target) not in children:
            value = _attribute(gm, node.target)
            if not isinstance(value, torch.Tensor):
                return f"the glue graph reads attribute {node.target!r}"
            constants[str(node.target)] = value.detach()
    if sum(t.numel() * t.element_size() for t in constants.values()) > MAX_CONSTANT_BYTES:
        return "the glue constants are too large"
    return {"code": code.src, "children": children,
            "constants": {name: _tensor_json(t) for name, t in constants.items()}}


def _tensor_json(t: torch.Tensor) -> dict[str, Any]:
    """A tensor as JSON: its bytes (base64), dtype, shape, strides and device."""
    data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "stride": list(t.stride()), "device": str(t.device),
            "data": base64.b64encode(data).decode("ascii")}


def _tensor_from_json(j: dict[str, Any]) -> torch.Tensor:
    dtype = getattr(torch, str(j["dtype"]))
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a dtype: {j['dtype']!r}")
    data = bytearray(base64.b64decode(j["data"]))
    flat = torch.frombuffer(data, dtype=torch.uint8).view(dtype) if data else \
        torch.empty(0, dtype=dtype)
    shape = [int(d) for d in j["shape"]]
    t = torch.empty_strided(shape, [int(s) for s in j["stride"]], dtype=dtype,
                            device=str(j["device"]))
    return t.copy_(flat.reshape(shape))


class _Glue(torch.nn.Module):
    """A glue graph rebuilt from its code: `forward` is FX's generated code."""

    def __init__(self, src: str, constants: dict[str, torch.Tensor],
                 children: dict[str, torch.nn.Module]) -> None:
        super().__init__()
        namespace = dict(_glue_globals())
        exec(compile(src, "<fusec glue graph>", "exec"), namespace)
        self._forward = namespace["forward"]
        for name, value in constants.items():
            holder: Any = self
            *path, last = name.split(".")
            for part in path:
                if not hasattr(holder, part):
                    setattr(holder, part, torch.nn.Module())
                holder = getattr(holder, part)
            setattr(holder, last, value)
        for name, child in children.items():
            setattr(self, name, child)

    def forward(self, *args: Any) -> Any:
        """The glue graph's code on `args`."""
        return self._forward(self, *args)


# --- the store ----------------------------------------------------------------------------


class TraceStore:
    """A folder of traced graphs, one signed JSON file per key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @staticmethod
    def user() -> TraceStore | None:
        """The per-user store, or None when `FUSEC_TRACE_CACHE=0`."""
        if switched_off(TRACE_CACHE_ENV):
            return None
        from fusec.codegen.kernel_cache import user_cache_root

        return TraceStore(user_cache_root() / "traces")

    def entry(self, key: str) -> Path:
        """The file of `key`'s entry."""
        return self.root / key[:2] / f"{key}.json"

    def store(self, key: str, body: dict[str, Any]) -> None:
        """Keep `body` (the glue export and the report) under `key`; a folder
        that cannot be written is said once, not an error."""
        from fusec.runtime.user_key import load_key

        path = self.entry(key)
        data = json.dumps({"format": ENTRY_FORMAT, "version": ENTRY_VERSION, "key": key,
                           **body}, sort_keys=True).encode("utf-8")
        try:
            secret = load_key(create=True)
            assert secret is not None
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, staging = tempfile.mkstemp(dir=path.parent, prefix=".staging-")
            with os.fdopen(fd, "wb") as f:
                f.write(_sign(secret, data).encode("ascii") + b"\n" + data)
            os.replace(staging, path)
        except (OSError, FusecError) as err:
            warn(escape_controls(f"cannot keep the traced graph in '{path}' ({err})"))
            return
        report_event("stored", key)
        self.evict(MAX_ENTRIES)

    def read(self, key: str) -> dict[str, Any] | None:
        """The entry's body, None when there is none; a damaged or unsigned
        one is a miss with a warning."""
        from fusec.runtime.user_key import load_key

        path = self.entry(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        signature, _, data = raw.partition(b"\n")
        try:
            secret = load_key(create=False)
            if secret is None or not signature_matches(signature.decode("ascii"),
                                                        _sign(secret, data)):
                raise ValueError("not signed with this user's key")
            body = json.loads(data)
            if body.get("format") != ENTRY_FORMAT or body.get("version") != ENTRY_VERSION \
                    or body.get("key") != key:
                raise ValueError("another format or key")
        except (ValueError, FusecError) as err:  # UnicodeDecodeError is a ValueError
            warn(escape_controls(f"ignoring the traced graph '{path}' ({err}); tracing again"))
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return body  # type: ignore[no-any-return]

    def evict(self, keep: int) -> None:
        """Remove all but the `keep` most recently used entries."""
        entries = list(self.root.glob("*/*.json"))
        if len(entries) <= keep:
            return
        entries.sort(key=_last_used, reverse=True)
        for path in entries[keep:]:
            with contextlib.suppress(OSError):
                path.unlink()


def _sign(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, _DOMAIN + data, hashlib.sha256).hexdigest()


def _last_used(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# --- rebuilding ---------------------------------------------------------------------------


def rebuild(body: dict[str, Any], compile_part: Callable[[str], Any]) -> tuple[
        Callable[..., Any], GraphReport]:
    """The callable and report an entry describes; `compile_part(text)` gives
    each partition's `fusec.CompiledModel`."""
    from fusec.importers.torch.backend import FusecPartition

    models: dict[str, Any] = {}

    def module_of(export: dict[str, Any]) -> _Glue:
        children: dict[str, torch.nn.Module] = {}
        for name, child in export["children"].items():
            if "fusec" in child:
                models[name] = compile_part(child["fusec"])
                children[name] = FusecPartition(models[name], bool(child["returns_tuple"]))
            else:
                children[name] = module_of(child["glue"])
        constants = {n: _tensor_from_json(j) for n, j in export["constants"].items()}
        return _Glue(export["code"], constants, children)

    glue = module_of(body["glue"])
    report = GraphReport(
        partitions=[PartitionInfo(p["name"], p["nodes"],
                                  models[p["name"]].launches if p["name"] in models else None,
                                  p.get("text", ""), models.get(p["name"]))
                    for p in body["report"]["partitions"]],
        remarks=list(body["report"]["remarks"]), glue=list(body["report"]["glue"]),
        fallbacks={n: Fallback(op, why) for n, (op, why) in body["report"]["fallbacks"].items()})
    return _as_call(glue), report


def report_json(report: GraphReport) -> dict[str, Any]:
    """A report as an entry keeps it (without the compiled models)."""
    return {"partitions": [{"name": p.name, "nodes": p.nodes, "text": p.text}
                           for p in report.partitions],
            "remarks": report.remarks, "glue": report.glue,
            "fallbacks": {n: [f.op, f.reason] for n, f in report.fallbacks.items()}}


def _as_call(glue: _Glue) -> Callable[..., Any]:
    """The glue graph called as aot_autograd's result is (the flat inputs as
    arguments; the outputs as a list)."""
    def call(*args: Any) -> list[Any]:
        out = glue(*args)
        return list(out) if isinstance(out, tuple | list) else [out]

    return call
