"""Special input values: the `special` mode's inputs, and the lighter edge
values every mode puts into a share of its programs (`--edge-rate`).

`edges="yes"`: one or two elements of about half the float inputs become 0,
-0, -1, inf, -inf or NaN. `edges="special"`: most float inputs get a few
elements (up to a third of them) from `special_values` of their type: inf,
NaN, values near the largest finite one (whose sums and squares overflow),
the smallest normal, denormals and -0.
"""

from __future__ import annotations

import numpy as np

from fusec.dialects.element_types import bf16_values

EDGE_VALUES = (0.0, -0.0, -1.0, np.inf, -np.inf, np.nan)
EDGE_KINDS = ("no", "yes", "special")

_COMMON = (np.inf, -np.inf, np.nan, -0.0, 0.0)
# Largest finite bf16 and its smallest denormal (bit patterns 0x7F7F, 0x0001):
# bf16 inputs are float32 arrays rounded to bf16 on upload, so float32's
# special values hold bf16's extremes too.
_BF16_EXTREMES = tuple(float(v) for v in bf16_values(np.array([0x7F7F, 0x0001])))


def special_values(dtype: str) -> tuple[float, ...]:
    """The special values of host dtype `dtype` (float16, float32, float64):
    inf, NaN, zeros, the largest finite value and values near it (their sums
    and squares overflow), a value whose square overflows, the smallest
    normal and denormals, from NumPy's facts of the type; () for other dtypes."""
    if np.dtype(dtype).kind != "f":
        return ()
    info = np.finfo(np.dtype(dtype))
    big, normal, sub = float(info.max), float(info.smallest_normal), float(info.smallest_subnormal)
    square_overflows = float(np.sqrt(big)) * 1.5
    values = (*_COMMON, big, -big, 0.88 * big, -0.5 * big, square_overflows, -square_overflows,
              normal, -normal, sub, -64 * sub)
    if np.dtype(dtype) == np.float32:
        values = (*values, _BF16_EXTREMES[0], -_BF16_EXTREMES[0], _BF16_EXTREMES[1])
    return values


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
        values = special_values(a.dtype.name)
        if values and a.size and rng.random() < 0.8:
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
