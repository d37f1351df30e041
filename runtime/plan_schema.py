"""The schema of plan.json, checked before `fusec run OUT` / `fusec.load_out`
trusts a single field of it.

A damaged or edited plan must fail with one clear error naming the file and
the JSON path of the bad field (`functions.f.launches[0].grid[2]`), never
with an internal error from deep inside the runtime or an out-of-bounds
launch. Checked: every field the runtime reads has its type and range; every
value id a function mentions is one of its `values`; a launch's grid and
block are within the launch limits of the target the plan names (its
profile in analysis/targets.py; the default profile for `auto`); each
argument's `view_shape` has as many elements as its value; views form no
cycle and alias values of equal size; each pooled buffer is big enough for
the values placed in it; the files the plan names are plain names inside
OUT; the digests and the signature
(`out_hmac_sha256`, `runtime/out_signature.py`) are 64 hex digits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.library_epilogue import ACTIVATIONS
from fusec.analysis.targets import DEFAULT_TARGET, TARGETS, Target
from fusec.codegen.library_attention import SDPA_PREFIX
from fusec.codegen.library_conv import CONV_PREFIX
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import SUPPORTED_TYPES
from fusec.dialects.nn_structured import CONV_LAYOUTS

PLAN_DTYPES = frozenset(element(t).device_dtype for t in SUPPORTED_TYPES)
"""The device dtypes a plan may name: those the code generator emits (uint16 is bf16)."""

MAX_DIM = 2**31 - 1  # kernels index with 32-bit ints past this
_SHA256 = re.compile(r"[0-9a-f]{64}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What plan.json says it is (written by the compile job, checked here on load).
PLAN_FORMAT = "fusec-plan"
PLAN_VERSION = 1


class _Checker:
    """Type and range checks that name `file` and the JSON path on failure."""

    def __init__(self, file: str, target: Target) -> None:
        self.file = file
        self.target = target  # whose launch limits the grids and blocks must keep

    def fail(self, path: str, what: str) -> NoReturn:
        raise FusecError(f"'{self.file}' is invalid at {path}: {what}; "
                         "compile the model again")

    def obj(self, x: Any, path: str) -> dict[str, Any]:
        if not isinstance(x, dict):
            self.fail(path, f"expected an object, got {_kind(x)}")
        return x  # pyright: ignore[reportUnknownVariableType]

    def seq(self, x: Any, path: str, length: int | None = None) -> list[Any]:
        if not isinstance(x, list):
            self.fail(path, f"expected a list, got {_kind(x)}")
        if length is not None and len(x) != length:  # pyright: ignore[reportUnknownArgumentType]
            self.fail(path, f"expected {length} entries, got {len(x)}")  # pyright: ignore
        return x  # pyright: ignore[reportUnknownVariableType]

    def field(self, d: dict[str, Any], key: str, path: str) -> Any:
        if key not in d:
            self.fail(path, f"missing field '{key}'")
        return d[key]

    def int_(self, x: Any, path: str, lo: int = 0, hi: int | None = None) -> int:
        if not isinstance(x, int) or isinstance(x, bool):
            self.fail(path, f"expected an integer, got {_kind(x)}")
        if x < lo or (hi is not None and x > hi):
            bound = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            self.fail(path, f"expected an integer {bound}, got {x}")
        return x

    def num(self, x: Any, path: str) -> float:
        if not isinstance(x, int | float) or isinstance(x, bool) or not math.isfinite(x):
            self.fail(path, f"expected a finite number, got {_kind(x)}")
        return float(x)

    def str_(self, x: Any, path: str) -> str:
        if not isinstance(x, str):
            self.fail(path, f"expected a string, got {_kind(x)}")
        return x

    def bool_(self, x: Any, path: str) -> bool:
        if not isinstance(x, bool):
            self.fail(path, f"expected true or false, got {_kind(x)}")
        return x

    def shape(self, x: Any, path: str) -> tuple[int, ...]:
        return tuple(self.int_(d, f"{path}[{i}]", 0, MAX_DIM)
                     for i, d in enumerate(self.seq(x, path)))

    def value(self, x: Any, path: str, values: dict[str, tuple[tuple[int, ...], str]]) -> str:
        name = self.str_(x, path)
        if name not in values:
            self.fail(path, f"unknown value {name!r} (not in 'values')")
        return name


def _kind(x: Any) -> str:
    """A short description of a JSON value for messages."""
    if isinstance(x, bool | int | float):
        return repr(x)
    if isinstance(x, str):
        return repr(x) if len(x) <= 40 else "a string"
    return {dict: "an object", list: "a list", type(None): "null"}.get(type(x), type(x).__name__)


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{key!r}]"


def check_plan(plan: Any, file: str, file_name_ok: Callable[[str], bool]) -> None:
    """Raise a `FusecError` naming `file` and the path of the first bad field
    of `plan` (plan.json, parsed); `file_name_ok` says whether a file name the
    plan gives (kernels, constants) may be opened."""

    c = _Checker(file, _launch_target(plan))
    top = c.obj(plan, "$")
    if top.get("format") != PLAN_FORMAT or top.get("version") != PLAN_VERSION:
        c.fail("$.format", f"not a {PLAN_FORMAT} version {PLAN_VERSION} plan")
    for key in ("kernels", "constants_file"):
        name = c.str_(c.field(top, key, "$"), f"$.{key}")
        if not file_name_ok(name):
            c.fail(f"$.{key}", f"{name!r} is not a file name inside the output directory")
    digest = c.str_(c.field(top, "kernels_sha256", "$"), "$.kernels_sha256")
    if not _SHA256.fullmatch(digest):
        c.fail("$.kernels_sha256", "expected 64 lowercase hex digits")
    _check_signature_fields(c, top)
    for name, f in c.obj(c.field(top, "functions", "$"), "$.functions").items():
        _check_function(c, f, _key("$.functions", name))


def _launch_target(plan: Any) -> Target:
    """The profile of the target `plan` was compiled for (`auto`, or a name
    that is none, the default profile: every profile launches the same)."""
    name = plan.get("target") if isinstance(plan, dict) else None
    return TARGETS.get(name.lower(), TARGETS[DEFAULT_TARGET]) if isinstance(name, str) \
        else TARGETS[DEFAULT_TARGET]


def _check_signature_fields(c: _Checker, top: dict[str, Any]) -> None:
    """`out_hmac_sha256` (absent in an OUT no fusec signed: refused later as
    unsigned) and `kernels_store` (the files of OUT/kernels and their sha256)."""
    if "out_hmac_sha256" in top:
        signature = c.str_(top["out_hmac_sha256"], "$.out_hmac_sha256")
        if not _SHA256.fullmatch(signature):
            c.fail("$.out_hmac_sha256", "expected 64 lowercase hex digits")
    if "kernels_store" in top:
        for name, digest in c.obj(top["kernels_store"], "$.kernels_store").items():
            where = _key("$.kernels_store", name)
            if not _SHA256.fullmatch(c.str_(digest, where)):
                c.fail(where, "expected 64 lowercase hex digits")


def _check_function(c: _Checker, f: Any, path: str) -> None:
    f = c.obj(f, path)
    values: dict[str, tuple[tuple[int, ...], str]] = {}
    for v, spec in c.obj(c.field(f, "values", path), f"{path}.values").items():
        p = _key(f"{path}.values", v)
        spec = c.obj(spec, p)
        dtype = c.str_(c.field(spec, "dtype", p), f"{p}.dtype")
        if dtype not in PLAN_DTYPES:
            c.fail(f"{p}.dtype", f"unknown element type {dtype!r}")
        values[v] = (c.shape(c.field(spec, "shape", p), f"{p}.shape"), dtype)
    for key in ("inputs", "outputs"):
        for i, entry in enumerate(c.seq(c.field(f, key, path), f"{path}.{key}")):
            p = f"{path}.{key}[{i}]"
            entry = c.obj(entry, p)
            c.str_(c.field(entry, "name", p), f"{p}.name")
            v = c.value(c.field(entry, "value", p), f"{p}.value", values)
            shape = c.shape(c.field(entry, "shape", p), f"{p}.shape")
            if (shape, c.field(entry, "dtype", p)) != values[v]:
                c.fail(p, f"shape and dtype differ from value {v}'s in 'values'")
    for i, launch in enumerate(c.seq(c.field(f, "launches", path), f"{path}.launches")):
        _check_launch(c, launch, f"{path}.launches[{i}]", values)
    _check_views(c, c.seq(c.field(f, "views", path), f"{path}.views"), f"{path}.views", values)
    for v, key in c.obj(c.field(f, "constants", path), f"{path}.constants").items():
        c.value(v, f"{path}.constants", values)
        c.str_(key, _key(f"{path}.constants", v))
    _check_memory(c, c.obj(c.field(f, "memory", path), f"{path}.memory"), f"{path}.memory",
                  values)


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _check_launch(c: _Checker, e: Any, path: str,
                  values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    e = c.obj(e, path)
    kernel = c.str_(c.field(e, "kernel", path), f"{path}.kernel")
    if "library" not in e and not _IDENTIFIER.fullmatch(kernel):
        c.fail(f"{path}.kernel", f"{kernel!r} is not a kernel name")
    grid = c.seq(c.field(e, "grid", path), f"{path}.grid", 3)
    block = c.seq(c.field(e, "block", path), f"{path}.block", 3)
    low = 0 if "library" in e else 1  # a library call launches no kernel: 0 x 0 x 0
    t = c.target
    max_grid = (t.max_grid_x, t.max_grid_yz, t.max_grid_yz)
    for i in range(3):
        c.int_(grid[i], f"{path}.grid[{i}]", low, max_grid[i])
        c.int_(block[i], f"{path}.block[{i}]", low, t.max_block_dims[i])
    if math.prod(block) > t.max_threads_per_block:
        c.fail(f"{path}.block", f"{math.prod(block)} threads per block "
               f"(at most {t.max_threads_per_block})")
    c.int_(c.field(e, "shared_bytes", path), f"{path}.shared_bytes")
    for i, op in enumerate(c.seq(c.field(e, "ops", path), f"{path}.ops")):
        c.str_(op, f"{path}.ops[{i}]")
    for key, check in (("group", c.str_), ("est_registers", c.int_), ("hbm_bytes", c.int_),
                       ("est_time_us", c.num), ("registers", c.int_),
                       ("spill_bytes", c.int_), ("register_source", c.str_),
                       ("measured_us", c.num), ("tuned_candidates", c.int_),
                       ("model_measured_us", c.num), ("tuning_choice", c.str_)):
        if key in e:
            check(e[key], f"{path}.{key}")
    for i, a in enumerate(c.seq(c.field(e, "args", path), f"{path}.args")):
        p = f"{path}.args[{i}]"
        a = c.obj(a, p)
        v = c.value(c.field(a, "value", p), f"{p}.value", values)
        view = c.shape(c.field(a, "view_shape", p), f"{p}.view_shape")
        if _elements(view) != _elements(values[v][0]):
            c.fail(f"{p}.view_shape", f"{list(view)} does not hold the "
                   f"{_elements(values[v][0])} elements of value {v}")
        c.bool_(c.field(a, "writes", p), f"{p}.writes")
    if "plan" in e:
        _check_group_plan(c, e["plan"], f"{path}.plan")
    if "library" in e:
        _check_library(c, e, path, values)


def _check_group_plan(c: _Checker, p: Any, path: str) -> None:
    """A launch's `plan`: kind, backend, the schedule's fields (integers and
    strings) or null, and for a split run as one launch its `parts`."""
    p = c.obj(p, path)
    c.str_(c.field(p, "kind", path), f"{path}.kind")
    c.str_(c.field(p, "backend", path), f"{path}.backend")
    schedule = c.field(p, "schedule", path)
    if schedule is not None:
        for key, value in c.obj(schedule, f"{path}.schedule").items():
            where = f"{path}.schedule.{key}"
            if not isinstance(value, str):
                c.int_(value, where, -(2**63))
    if "parts" in p:
        for i, part in enumerate(c.seq(p["parts"], f"{path}.parts")):
            _check_group_plan(c, part, f"{path}.parts[{i}]")


def _check_library(c: _Checker, e: dict[str, Any], path: str,
                   values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    if c.str_(e["library"], f"{path}.library").startswith(CONV_PREFIX):
        _check_conv(c, e, path, values)
        return
    if e["library"].startswith(SDPA_PREFIX):
        _check_sdpa(c, e, path, values)
        return
    for key in ("a", "b", "c"):
        c.value(c.field(e, key, path), f"{path}.{key}", values)
    for key in ("transpose_a", "transpose_b"):
        c.bool_(c.field(e, key, path), f"{path}.{key}")
    c.shape(c.field(e, "batch", path), f"{path}.batch")
    for key in ("m", "n", "k"):
        c.int_(c.field(e, key, path), f"{path}.{key}", 0, MAX_DIM)
    for key in ("bias", "residual"):  # a cuBLASLt epilogue's reads (optional)
        if key in e:
            c.value(e[key], f"{path}.{key}", values)
    if "activation" in e and c.str_(e["activation"], f"{path}.activation") not in ACTIVATIONS:
        c.fail(f"{path}.activation", f"expected one of {', '.join(ACTIVATIONS)}")


def _check_sdpa(c: _Checker, e: dict[str, Any], path: str,
                values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """cuDNN's attention: Q, K, V, O and a bias if any placed inside their
    values (every element a launch can address lies in its buffer), a finite
    scale."""
    for key in ("q", "k", "v", "o", *(("bias",) if "bias" in e else ())):
        where = f"{path}.{key}"
        t = c.obj(c.field(e, key, path), where)
        v = c.value(c.field(t, "value", where), f"{where}.value", values)
        offset = c.int_(c.field(t, "offset", where), f"{where}.offset", 0, 2**31 - 1)
        placed = []
        for field in ("dims", "strides"):
            vals = c.field(t, field, where)
            if not isinstance(vals, list) or len(vals) != 4:
                c.fail(f"{where}.{field}", "expected a list of 4 integers")
            placed.append([c.int_(x, f"{where}.{field}[{i}]", 1 if field == "dims" else 0,
                                  2**31 - 1) for i, x in enumerate(vals)])
        dims, strides = placed
        last = offset + sum((n - 1) * s for n, s in zip(dims, strides, strict=True))
        if last >= _elements(values[v][0]):
            c.fail(where, f"reaches element {last} of value {v}, which holds "
                   f"{_elements(values[v][0])}")
    scale = c.field(e, "scale", path)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or \
            not math.isfinite(scale):
        c.fail(f"{path}.scale", "expected a finite number")
    c.bool_(c.field(e, "causal", path), f"{path}.causal")


def _check_conv(c: _Checker, e: dict[str, Any], path: str,
                values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """A cuDNN convolution: NCHW `x`, OIHW `w`, NCHW `y` (or, with `layout`
    "nhwc", NHWC `x` and `y` and an OHWI `w`), its attributes."""
    for key in ("x", "w", "y"):
        v = c.value(c.field(e, key, path), f"{path}.{key}", values)
        if len(values[v][0]) != 4:
            c.fail(f"{path}.{key}", f"value {v} is not 4-D")
    for key, count, low in (("strides", 2, 1), ("pads", 4, 0), ("dilations", 2, 1)):
        vals = c.field(e, key, path)
        if not isinstance(vals, list) or len(vals) != count:
            c.fail(f"{path}.{key}", f"expected a list of {count} integers")
        for i, v in enumerate(vals):
            c.int_(v, f"{path}.{key}[{i}]", low, MAX_DIM)
    if e["pads"][0] != e["pads"][2] or e["pads"][1] != e["pads"][3]:
        c.fail(f"{path}.pads", "a library convolution pads symmetrically")
    c.int_(c.field(e, "groups", path), f"{path}.groups", 1, MAX_DIM)
    c.bool_(c.field(e, "tf32", path), f"{path}.tf32")
    if e.get("layout", "nchw") not in CONV_LAYOUTS:
        c.fail(f"{path}.layout", f"expected one of {', '.join(CONV_LAYOUTS)}")


def _nbytes(spec: tuple[tuple[int, ...], str]) -> int:
    return _elements(spec[0]) * np.dtype(spec[1]).itemsize


def _check_views(c: _Checker, views: list[Any], path: str,
                 values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    source: dict[str, str] = {}
    for i, w in enumerate(views):
        p = f"{path}[{i}]"
        w = c.obj(w, p)
        v = c.value(c.field(w, "value", p), f"{p}.value", values)
        s = c.value(c.field(w, "source", p), f"{p}.source", values)
        if _nbytes(values[v]) != _nbytes(values[s]):
            c.fail(p, f"view {v} and its source {s} differ in size")
        source[v] = s
    for start in source:
        seen = {start}
        cur = start
        while cur in source:
            cur = source[cur]
            if cur in seen:
                c.fail(path, f"the views of {start} form a cycle")
            seen.add(cur)


def _check_memory(c: _Checker, m: dict[str, Any], path: str,
                  values: dict[str, tuple[tuple[int, ...], str]]) -> None:
    sizes: list[int] = []
    for i, b in enumerate(c.seq(c.field(m, "buffers", path), f"{path}.buffers")):
        p = f"{path}.buffers[{i}]"
        b = c.obj(b, p)
        c.int_(c.field(b, "id", p), f"{p}.id", i, i)
        sizes.append(c.int_(c.field(b, "bytes", p), f"{p}.bytes"))
    for v, buf in c.obj(c.field(m, "assignment", path), f"{path}.assignment").items():
        p = _key(f"{path}.assignment", v)
        c.value(v, p, values)
        buf = c.int_(buf, p, 0, len(sizes) - 1) if sizes else c.fail(p, "there are no buffers")
        if sizes[buf] < _nbytes(values[v]):
            c.fail(p, f"buffer {buf} has {sizes[buf]} bytes, value {v} needs {_nbytes(values[v])}")
    for v, r in c.obj(m.get("live", {}), f"{path}.live").items():
        p = _key(f"{path}.live", v)
        c.value(v, p, values)
        for j, x in enumerate(c.seq(r, p, 2)):
            c.int_(x, f"{p}[{j}]")
