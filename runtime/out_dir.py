"""Reading an OUT directory back, trusting nothing in it.

Every file is opened through `out_path`, which takes only a plain file name
and refuses a link that leads outside OUT, so a plan.json that was edited
cannot make fusec read other files. plan.json is parsed and checked against
its schema (`runtime/plan_schema.py`), constants.npz is loaded without
pickles and each array must have the shape and dtype the plan gives its
value. Unless the caller trusts the OUT explicitly, kernels.py must match
the sha256 digest plan.json records for it (`kernels_sha256`: nothing was
changed by accident) and the whole OUT must carry this user's signature
(`out_hmac_sha256`, `runtime/out_signature.py`: this user's fusec wrote it).
The kept kernels of OUT/kernels are used only while they are the files the
signed plan lists (`kept_kernels`).
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusec.analysis.diagnostics import FusecError

if TYPE_CHECKING:  # imported to read constants: checking an OUT's signature needs no NumPy
    import numpy as np

TRUST_HINT = ("run it anyway with 'fusec run --trust-modified-kernels' or "
              "fusec.load_out(..., trust_modified_kernels=True)")
_SHARED_HINT = ("if it comes from someone you trust, read its kernels.py and " + TRUST_HINT
                + "; or compile the model again")


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


def read_out_file(out: Path, name: str) -> bytes:
    """The bytes of file `name` of OUT (read once: what is checked is what is used)."""
    try:
        return out_path(out, name).read_bytes()
    except OSError as err:
        raise FusecError(f"cannot read '{out / name}': {err.strerror or err}") from None


def check_written_by_user(out: Path, plan: dict[str, Any], kernels: bytes,
                          constants: bytes) -> None:
    """Raise unless kernels.py matches plan.json's digest and OUT carries the
    signature this user's key gives it (`runtime/out_signature.py`)."""
    from fusec.runtime.out_signature import SIGNATURE_FIELD, out_signature, signature_matches
    from fusec.runtime.user_key import load_key

    path = out / plan["kernels"]
    if kernels_digest(kernels) != plan["kernels_sha256"]:
        raise FusecError(
            f"'{path}' does not match the sha256 digest recorded in plan.json: it was "
            f"changed after compiling; compile the model again, or {TRUST_HINT}")
    recorded = plan.get(SIGNATURE_FIELD)
    if recorded is None:
        raise FusecError(f"'{out}' carries no signature of your fusec (an older fusec or "
                         f"another tool wrote it); {_SHARED_HINT}")
    key = load_key(create=False)
    if key is None:
        from fusec.runtime.user_key import key_path

        raise FusecError(f"'{out}' was not written by your fusec: you have no key "
                         f"('{key_path()}' does not exist); {_SHARED_HINT}")
    if not signature_matches(recorded, out_signature(key, plan, kernels, constants)):
        raise FusecError(
            f"'{out}' was not written by your fusec, or was changed after compiling: its "
            "signature does not match your key (another user or machine compiled it, "
            f"or someone edited it and its digests); {_SHARED_HINT}")


def decode_kernels(out: Path, plan: dict[str, Any], kernels: bytes) -> str:
    """The text of kernels.py from its bytes."""
    try:
        return kernels.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FusecError(f"cannot read '{out / plan['kernels']}': {err}") from None


def kept_kernels(out: Path, plan: dict[str, Any]) -> Path | None:
    """OUT/kernels when it holds exactly the files plan.json lists for it
    (their sha256 digests), else None: the kernels are compiled again from
    kernels.py, with a warning when the folder was changed."""
    from fusec.runtime.out_signature import STORE_FIELD, STORE_FOLDER, store_manifest

    try:
        found = store_manifest(out)
    except OSError:
        found = {".": "unreadable"}
    if found is None:
        return None
    if found != plan.get(STORE_FIELD):
        print(f"fusec: warning: ignoring the kept kernels in '{out / STORE_FOLDER}' (they "
              "are not the files fusec wrote there); compiling the kernels from kernels.py",
              file=sys.stderr)
        return None
    return out / STORE_FOLDER


def read_constants(out: Path, plan: dict[str, Any], data: bytes | None = None
                   ) -> dict[str, np.ndarray]:
    """The arrays of the constants file (or of its bytes `data`), without
    pickles, each with the shape and dtype plan.json gives the value it holds."""
    import numpy as np

    path = out / plan["constants_file"]
    if data is None:
        data = read_out_file(out, plan["constants_file"])
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
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
