"""Special input values: the `special` mode's inputs, and the lighter edge
values every mode puts into a share of its programs (`--edge-rate`).

`edges="yes"`: one or two elements of about half the float inputs become 0,
-0, -1, inf, -inf or NaN. `edges="special"`: most float inputs get a few
elements (up to a third of them) from `SPECIAL_VALUES` of their type: inf,
NaN, values near the largest finite one (whose sums and squares overflow),
the smallest normal, denormals and -0.
"""

from __future__ import annotations

import numpy as np

EDGE_VALUES = (0.0, -0.0, -1.0, np.inf, -np.inf, np.nan)
EDGE_KINDS = ("no", "yes", "special")

_COMMON = (np.inf, -np.inf, np.nan, -0.0, 0.0)
# By host dtype; bf16 inputs are float32 arrays, rounded to bf16 on upload, so
# float32's list holds bf16's extremes too (3.39e38 its largest, 9.2e-41 a denormal).
SPECIAL_VALUES: dict[str, tuple[float, ...]] = {
    "float32": (*_COMMON, 3e38, -3e38, 3.4028235e38, -3.3895314e38, 1.7e38, 1e20, -1e19,
                          1.1754944e-38, -1e-40, 1e-45, 9.2e-41),
    "float16": (*_COMMON, 65504.0, -65504.0, 6e4, 300.0, -256.0, 6.1035e-05, -6e-08,
                          3e-06),
    "float64": (*_COMMON, 1.7e308, -1e300, 2.2250738585072014e-308, 5e-324),
}


def with_edge_values(inputs: list[np.ndarray], seed: int, kind: str = "yes") -> list[np.ndarray]:
    """Copies of `inputs` with edge (`kind="yes"`) or special (`"special"`)
    values in some elements of float inputs; `"no"` copies them unchanged."""
    if kind == "special":
        return _with_special_values(inputs, seed)
    rng = np.random.default_rng([seed, 0xED6E])
    out = []
    for a in inputs:
        a = np.array(a)
        if kind == "yes" and a.dtype.kind == "f" and a.size and rng.random() < 0.5:
            for _ in range(int(rng.integers(1, 3))):
                a.flat[int(rng.integers(a.size))] = EDGE_VALUES[int(rng.integers(6))]
        out.append(a)
    return out


def _with_special_values(inputs: list[np.ndarray], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, 0x5BEC])
    out = []
    for a in inputs:
        a = np.array(a)
        values = SPECIAL_VALUES.get(a.dtype.name)
        if values is not None and a.size and rng.random() < 0.8:
            count = int(rng.integers(1, max(1, a.size // 3) + 1))
            at = rng.choice(a.size, count, replace=False)
            with np.errstate(over="ignore"):
                a.flat[at] = np.asarray(values)[rng.integers(len(values), size=count)]
        out.append(a)
    return out


def edge_kind(edges: bool | str) -> str:
    """`edges` as one of `EDGE_KINDS` (True is "yes", False "no")."""
    if isinstance(edges, bool):
        return "yes" if edges else "no"
    if edges not in EDGE_KINDS:
        raise ValueError(f"edges must be one of {', '.join(EDGE_KINDS)}, not {edges!r}")
    return edges
