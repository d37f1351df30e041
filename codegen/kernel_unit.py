"""One kernel as a self-contained unit of source: what is compiled, and what
the kernel cache's key (`codegen/kernel_cache.py`) is taken over.

A kernels.py holds one `@cuda.jit` function per group after a shared
prelude. Kernels of repeated layers differ only in their names and header
comments (a 12-layer GPT-2: 96 kernels, 8 bodies), so a unit is the kernel's
text with every comment line and blank line dropped, its decorator reduced
to `@cuda.jit` (the `max_registers` it declared is kept beside it: a linker
option, not part of the PTX) and its name replaced by `fusec_` and a digest of
that text (`unit_symbol`), after the prelude of just the helpers it calls
(`kernel_prelude`). Equal units compile
to equal code, whatever program, partition or process they come from; the
register probe (`codegen/kernel_probe.py`) makes the same unit from the
kernel it generates, so its build is the runtime's.

```python
units = units_of_source(kernels_py, ["f_g0_add", "f_g1_add"])
units["f_g0_add"] == units["f_g1_add"]   # True when only their names differ
units["f_g0_add"].name                  # "fusec_3f0c9a2d41b7": the same for both
```

A kernels.py that this fusec did not write (its prelude is not the one
`kernel_prelude` gives now) is not cut up: each of its kernels is a unit of
the whole file under its own name, as before units existed.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fusec.codegen.kernel_source import kernel_prelude

UNIT_NAME = "fusec_kernel"
"""The kernel's name while its unit is cut out; the unit's own name is
`unit_symbol` of that text."""
SYMBOL_DIGITS = 12
_DEF = re.compile(r"^def ([A-Za-z_][A-Za-z0-9_]*)\(", re.MULTILINE)
_CAP = re.compile(r"max_registers\s*=\s*(\d+)")
_DEVICE = re.compile(r"^@cuda\.jit\(.*\bdevice\s*=\s*True")


@dataclass(frozen=True)
class KernelUnit:
    """A module text defining the kernel `name` (`unit_symbol` of its text
    for a cut-out kernel), and the `max_registers` it is declared with (0: none)."""

    source: str
    name: str = UNIT_NAME
    max_registers: int = 0


def unit_of_kernel(text: str, name: str) -> KernelUnit:
    """The unit of one kernel's text (its header comments, decorator and
    `def name(...)` body, as an emitter writes it)."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(f"def {name}(")), None)
    if at is None:
        raise ValueError(f"the kernel text does not define {name!r}")
    first = at
    while first > 0 and lines[first - 1].startswith("@"):
        first -= 1
    cap = _CAP.search("\n".join(lines[first:at]))
    body = [line.rstrip() for line in lines[at:]
            if line.strip() and not line.lstrip().startswith("#")]
    helpers = [line.rstrip() for line in lines[:first]
               if line.strip() and not line.lstrip().startswith("#")]
    kernel = hoist_literal_casts("\n".join([*helpers, "@cuda.jit", *body]))
    # the kernel and the device functions named after it (`<name>_s0`, ...)
    kernel = re.sub(rf"\b{re.escape(name)}(?=\b|_s\d+\b)", UNIT_NAME, kernel)
    prelude = kernel_prelude([kernel]).rstrip("\n")
    source = f"{prelude}\n\n\n{kernel}\n"
    symbol = unit_symbol(source)
    source = re.sub(rf"\b{UNIT_NAME}(?=\b|_s\d+\b)", symbol, source)
    return KernelUnit(source, symbol, int(cap.group(1)) if cap else 0)


_LITERAL_CAST = re.compile(r"(?<![\w.])(?:numba\.)?(uint64|uint32)\((\d+)\)")


def hoist_literal_casts(text: str) -> str:
    """`text` with each function's casts of integer literals to unsigned
    types (`numba.uint64(2304)`, `uint32(16)`: the unsigned index math of
    the writers) bound once to a local at the top of its body. numba types
    every call on its own (about 1 ms each); the attention kernels write
    hundreds of these, and GPT-2's f32 one builds 12% faster with them
    hoisted. The PTX is the same: the locals are constants."""
    lines = text.split("\n")
    out: list[str] = []
    starts = [i for i, line in enumerate(lines) if line.startswith("def ")] + [len(lines)]
    out.extend(lines[:starts[0]])
    for at, end in itertools.pairwise(starts):
        block = lines[at:end]
        if not block[0].rstrip().endswith(":") or len(block) < 2:
            out.extend(block)
            continue
        names: dict[str, str] = {}

        def local(m: re.Match[str], names: dict[str, str] = names) -> str:
            kind, value = m.group(1), m.group(2)
            name = f"_{kind[0]}{kind[4:]}_{value}"
            names[name] = f"numba.{kind}({value})"
            return name

        body = [_LITERAL_CAST.sub(local, line) for line in block[1:]]
        indent = next((line[:len(line) - len(line.lstrip())] for line in body
                       if line.strip()), "    ")
        out += [block[0], *(f"{indent}{n} = {v}" for n, v in sorted(names.items())), *body]
    return "\n".join(out)


def unit_symbol(source: str) -> str:
    """The kernel's name in a unit: `fusec_` and a digest of the unit's text
    with the kernel named `UNIT_NAME`. Equal units keep one name (and one
    build); different kernels get different names, so a profiler (Nsight
    Systems, `torch.profiler`) tells them apart. `fusec run --profile` and
    bench/model_kernels.py give the launches behind each name."""
    return f"fusec_{hashlib.sha256(source.encode()).hexdigest()[:SYMBOL_DIGITS]}"


def kernel_texts(source: str) -> tuple[str, dict[str, str]]:
    """kernels.py cut into its prelude and each kernel's text (from its
    header comments to the end of its body), by kernel name. The device
    functions a kernel's writer put just before it (a split launch's
    segments, `codegen/split_launch.py`) are part of that kernel's text."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _DEF.match(line)]
    if not starts:
        return source, {}
    bounds = []  # (first line, def line, whether a device function)
    for at in starts:
        first = at
        while first > 0 and lines[first - 1].startswith(("@", "#")):
            first -= 1
        device = any(_DEVICE.search(line) for line in lines[first:at])
        bounds.append((first, at, device))
    kernels = [(first, at) for first, at, device in bounds if not device]
    if not kernels:
        return source, {}
    # each kernel's text starts at the first device function after the kernel before it
    begins, previous = [], -1
    for first, _ in kernels:
        begins.append(min((f for f, at, device in bounds
                           if device and previous < at < first), default=first))
        previous = first
    prelude = "".join(lines[:begins[0]])
    texts: dict[str, str] = {}
    for k, ((_, at), begin) in enumerate(zip(kernels, begins, strict=True)):
        end = begins[k + 1] if k + 1 < len(kernels) else len(lines)
        # the body ends at the next line that starts a top-level statement
        stop = next((j for j in range(at + 1, end)
                     if lines[j][:1] not in ("", " ", "\t", "\n", "#", ")")), end)
        match = _DEF.match(lines[at])
        assert match is not None
        texts[match.group(1)] = "".join(lines[begin:stop])
    return prelude, texts


def units_of_source(source: str, names: Iterable[str]) -> dict[str, KernelUnit]:
    """The unit of each kernel `names` of kernels.py `source`."""
    wanted = list(names)
    prelude, texts = kernel_texts(source)
    region = source[len(prelude):]
    written_here = (texts and all(n in texts for n in wanted)
                    and prelude == kernel_prelude([region]).rstrip("\n") + "\n\n\n")
    if not written_here:
        return {n: KernelUnit(source, n, _declared_cap(texts.get(n, ""))) for n in wanted}
    return {n: unit_of_kernel(texts[n], n) for n in wanted}


def _declared_cap(text: str) -> int:
    head = text.split("\ndef ", 1)[0]
    cap = _CAP.search(head)
    return int(cap.group(1)) if cap else 0
