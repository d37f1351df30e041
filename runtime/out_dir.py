"""Reading an OUT directory back, trusting nothing in it.

Every file is opened through `out_path`, which takes only a plain file name
and refuses a link that leads outside OUT, so a plan.json that was edited
cannot make fusec read other files. plan.json is parsed and checked against
its schema (`runtime/plan_schema.py`), constants.npz is loaded without
pickles and each array must have the shape and dtype the plan gives its
value, and kernels.py must match the sha256 digest plan.json records for it
(`kernels_sha256`) unless the caller trusts modified kernels explicitly.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError

TRUST_HINT = ("run it anyway with 'fusec run --trust-modified-kernels' or "
              "fusec.load_out(..., trust_modified_kernels=True)")


def kernels_digest(source: str | bytes) -> str:
    """The sha256 of kernels.py as written (UTF-8), as plan.json records it."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    return hashlib.sha256(data).hexdigest()


def plain_file_name(name: str) -> bool:
    """A name directly inside OUT: no separator, no `..`, not absolute."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name \
        and "\0" not in name


def out_path(out: Path, name: str) -> Path:
    """The real path of file `name` of OUT; an error when the name is not a
    plain file name, the file is missing, or a link leads outside OUT."""
    if not plain_file_name(name):
        raise FusecError(f"'{out}': {name!r} is not a file name inside the output directory")
    path = out / name
    try:
        real = path.resolve(strict=True)
        inside = real.parent == out.resolve(strict=True)
    except FileNotFoundError:
        raise FusecError(f"'{path}' is missing; compile the model again") from None
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop
        raise FusecError(f"cannot read '{path}': {getattr(err, 'strerror', None) or err}") \
            from None
    if not inside:
        raise FusecError(f"'{path}' is a link that leads outside '{out}'; refusing to read it")
    if not real.is_file():
        raise FusecError(f"'{path}' is not a file; compile the model again")
    return real


def read_plan(out: Path) -> dict[str, Any]:
    """plan.json of OUT, parsed and checked against its schema."""
    from fusec.runtime.plan_schema import check_plan

    path = out / "plan.json"
    try:
        data = json.loads(out_path(out, "plan.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FusecError(f"'{path}' is corrupt ({err}); compile the model again") from None
    except RecursionError:
        raise FusecError(f"'{path}' is corrupt (nested too deeply); compile the model again") \
            from None
    if not isinstance(data, dict):
        raise FusecError(f"'{path}' is corrupt (not a JSON object); compile the model again")
    check_plan(data, str(path), plain_file_name)
    return data  # pyright: ignore[reportUnknownVariableType]


def read_kernels(out: Path, plan: dict[str, Any], trust_modified: bool) -> str:
    """The text of kernels.py, which must match plan.json's digest unless
    `trust_modified`."""
    path = out / plan["kernels"]
    try:
        data = out_path(out, plan["kernels"]).read_bytes()
        source = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise FusecError(f"cannot read '{path}': {getattr(err, 'strerror', None) or err}") \
            from None
    if not trust_modified and kernels_digest(data) != plan["kernels_sha256"]:
        raise FusecError(
            f"'{path}' does not match the sha256 digest recorded in plan.json: it was "
            f"changed after compiling; compile the model again, or {TRUST_HINT}")
    return source


def read_constants(out: Path, plan: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of the constants file, without pickles, each with the shape
    and dtype plan.json gives the value it holds."""
    path = out / plan["constants_file"]
    try:
        with np.load(out_path(out, plan["constants_file"]), allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise FusecError(f"'{path}' is corrupt ({err}); compile the model again") from None
    for fname, f in plan["functions"].items():
        for value, key in f["constants"].items():
            if key not in arrays:
                continue  # program_from_plan names the missing key
            shape, dtype = tuple(f["values"][value]["shape"]), f["values"][value]["dtype"]
            got = arrays[key]
            if got.shape != shape or got.dtype != np.dtype(dtype):
                raise FusecError(
                    f"'{path}': array '{key}' (constant {value} of @{fname}) is {got.dtype} "
                    f"{list(got.shape)}, but plan.json says {dtype} {list(shape)}; "
                    "compile the model again")
    return arrays
