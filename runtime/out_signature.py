"""The signature that says "this user's fusec wrote this OUT".

`kernels_sha256` in plan.json proves only that kernels.py and plan.json
agree: whoever edits kernels.py can rewrite the digest beside it. So the
compile job also records `out_hmac_sha256`, an HMAC-SHA256 keyed with the
user's secret (`runtime/user_key.py`, never in OUT) over everything that
decides what runs:

- plan.json itself (all fields but the signature; it names the kernels,
  their launches and arguments, and carries `kernels_sha256` and
  `kernels_store`), in a canonical JSON form, so indentation does not count;
- the bytes of kernels.py (executed as Python) and of the constants file;
- through `kernels_store` (relative path -> sha256 of each file under
  OUT/kernels), the compiled kernels `--save-kernels` kept.

`fusec run OUT` runs an OUT whose signature checks out under the user's
key; any other is refused unless the user trusts it explicitly.

```json
{"kernels_store": {"3f/3f0c...json": "9b1d..."}, "out_hmac_sha256": "5e88..."}
```
"""

from __future__ import annotations

import hashlib
import hmac
import json
import stat
from pathlib import Path
from typing import Any

SIGNATURE_FIELD = "out_hmac_sha256"
STORE_FIELD = "kernels_store"
STORE_FOLDER = "kernels"  # OUT/kernels, the kept kernels of --save-kernels
_DOMAIN = b"fusec-out-signature-v1\n"  # what the key signs here, and nowhere else


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def out_signature(key: bytes, plan: dict[str, Any], kernels: bytes, constants: bytes) -> str:
    """The HMAC-SHA256 of an OUT: of `plan` (without its signature field),
    and of the bytes of its kernels and constants files."""
    body = {k: v for k, v in plan.items() if k != SIGNATURE_FIELD}
    payload = {"plan": body, "kernels_sha256": sha256_hex(kernels),
               "constants_sha256": sha256_hex(constants)}
    # JSON text -> objects -> one canonical text: what was written and what
    # is read back give the same bytes.
    canonical = json.dumps(json.loads(json.dumps(payload)), sort_keys=True,
                           separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, _DOMAIN + canonical.encode("ascii"), hashlib.sha256).hexdigest()


def signature_matches(expected: str, actual: str) -> bool:
    """Compare signatures in constant time."""
    return hmac.compare_digest(expected.encode("ascii"), actual.encode("ascii"))


def store_manifest(out: Path) -> dict[str, str] | None:
    """relative path -> sha256 of every file under OUT/kernels (None when
    there is no such folder); a link or special file gets a value no sha256
    has, so that it never matches what fusec wrote."""
    root = out / STORE_FOLDER
    try:
        mode = root.lstat().st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(mode):
        return {".": "not a folder"}
    manifest: dict[str, str] = {}
    _walk(root, "", manifest)
    return manifest


def _walk(folder: Path, prefix: str, manifest: dict[str, str]) -> None:
    for entry in sorted(folder.iterdir()):
        name = prefix + entry.name
        mode = entry.lstat().st_mode
        if stat.S_ISDIR(mode):
            _walk(entry, name + "/", manifest)
        elif stat.S_ISREG(mode):
            manifest[name] = sha256_hex(entry.read_bytes())
        else:
            manifest[name] = "not a regular file"


def sign_plan(plan: dict[str, Any], out: Path, key: bytes) -> dict[str, Any]:
    """`plan` with the manifest of OUT/kernels and the signature added, for
    the files already written to folder `out` (the OUT being built)."""
    signed = {k: v for k, v in plan.items() if k not in (SIGNATURE_FIELD, STORE_FIELD)}
    manifest = store_manifest(out)
    if manifest is not None:
        signed[STORE_FIELD] = manifest
    kernels = (out / str(plan["kernels"])).read_bytes()
    constants = (out / str(plan["constants_file"])).read_bytes()
    signed[SIGNATURE_FIELD] = out_signature(key, signed, kernels, constants)
    return signed
