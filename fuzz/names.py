"""Function and value names of random length and characters.

Function names may hold anything (they print as `@"..."` with escapes when
they are not bare identifiers); SSA value names are restricted by MLIR's
grammar to `[A-Za-z0-9_$.-]`. Long names (over 40 characters) are drawn on
purpose: code generation derives kernel names from them.
"""

from __future__ import annotations

import re

import numpy as np

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_VALUE_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.-"
_ODD_CHARS = ' "\\\n\t-+#@%{}()<>:;,=*/' "'" "éλ中😀\u00a0"


def function_name(rng: np.random.Generator) -> str:
    """A short, long or odd function name."""
    kind = rng.random()
    if kind < 0.3:
        return "f"
    length = int(rng.integers(38, 70)) if kind < 0.6 else int(rng.integers(1, 20))
    alphabet = _VALUE_CHARS if rng.random() < 0.6 else _VALUE_CHARS + _ODD_CHARS
    chars = [str(rng.choice(list(alphabet))) for _ in range(length)]
    return "".join(chars)


def value_names(rng: np.random.Generator, count: int) -> list[str]:
    """`count` distinct SSA names (without `%`): plain, numeric or long."""
    style = rng.random()
    if style < 0.4:
        return [f"v{i}" for i in range(count)]
    if style < 0.55:
        return [str(i) for i in range(count)]
    names: list[str] = []
    while len(names) < count:
        length = int(rng.integers(1, 60 if rng.random() < 0.3 else 8))
        name = "".join(str(rng.choice(list(_VALUE_CHARS))) for _ in range(length))
        # A name of digits is a number in MLIR and must not have leading zeros.
        # and a name starting with a digit must be all digits.
        if name.isdigit():
            name = str(int(name))
        elif name[0].isdigit():
            name = "_" + name
        if name not in names:
            names.append(name)
    return names


def symbol(name: str) -> str:
    """`@name`, quoted and escaped (`\\"`, `\\\\`, `\\XX`) when it is not bare."""
    if _BARE.fullmatch(name):
        return "@" + name
    out = []
    for ch in name:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    return '@"' + "".join(out) + '"'
