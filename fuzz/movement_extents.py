"""Extents for the data-movement corpus (`fuzz/data_movement.py`): odd,
prime, power-of-two and multiple-of-8 axis sizes whose product reaches a
number of elements.

Two random sources make a program: its structure (family, permutation, ops,
element type) and its extents. `Extents` draws only the latter, so that the
`small` program (a few hundred elements, for the simulator) and the `full`
one (tens of MiB per tensor, for the GPU) of a seed are the same program at
two sizes.

```python
ext = Extents(np.random.default_rng(0), small=False)
ext.shape(4, min_elements=1 << 23)   # (89, 227, 11, 56): 8.6M elements
```
"""

from __future__ import annotations

import math

import numpy as np

# How an axis's size is rounded, and how often each kind is drawn.
KINDS = ("prime", "odd", "pow2", "mult8")
KIND_WEIGHTS = (0.3, 0.25, 0.25, 0.2)
# Elements of a small program's main tensor: enough to span a few warps in
# the simulator, few enough that its Python threads finish in a second.
SMALL_ELEMENTS = (48, 240)


def next_prime(n: int) -> int:
    """The smallest prime >= n."""
    n = max(2, n)
    while any(n % p == 0 for p in range(2, math.isqrt(n) + 1)):
        n += 1
    return n


def rounded(value: float, kind: str) -> int:
    """`value` as a size of `kind` (at least 2): the next prime, an odd
    number, the nearest power of two or the nearest multiple of 8 (odd
    below 12)."""
    v = max(2, round(value))
    if kind == "prime":
        return next_prime(v)
    if kind == "odd":
        return v | 1
    if kind == "pow2":
        return 1 << max(1, round(math.log2(v)))
    return 8 * round(v / 8) if v >= 12 else v | 1  # below 12, odd instead


class Extents:
    """Axis sizes drawn from their own random source (module docstring)."""

    def __init__(self, rng: np.random.Generator, small: bool) -> None:
        self.rng = rng
        self.small = small

    def int(self, lo: int, hi: int) -> int:
        """A random integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def pick(self, small: list[int], full: list[int]) -> int:
        """One of `small` or of `full`, by the size drawn."""
        items = small if self.small else full
        return items[int(self.rng.integers(len(items)))]

    def shape(self, rank: int, min_elements: int, fixed: dict[int, int] | None = None,
              least: int | tuple[int, ...] = 2) -> tuple[int, ...]:
        """`rank` sizes whose product is at least `min_elements` and at most
        about three times that (full), or a few hundred (small), with the
        axes of `fixed` given; every other axis at least `least` (one bound,
        or one per axis), of a random kind (`KINDS`)."""
        fixed = fixed or {}
        lows = least if isinstance(least, tuple) else (least,) * rank
        free = [i for i in range(rank) if i not in fixed]
        known = math.prod(fixed.values())
        if self.small:
            target = self.int(*SMALL_ELEMENTS) / known
            kinds = ["small"] * rank
        else:
            target = min_elements * self.rng.uniform(1.05, 1.5) / known
            kinds = [KINDS[int(self.rng.choice(len(KINDS), p=KIND_WEIGHTS))]
                     for _ in range(rank)]
        # A balanced split of log(target) over the free axes.
        shares = self.rng.dirichlet([8.0] * len(free)) if free else np.zeros(0)
        dims = [fixed.get(i, 1) for i in range(rank)]
        for i, s in zip(free, shares, strict=True):
            dims[i] = self._size(math.exp(s * math.log(max(target, 1.0))), kinds[i], lows[i])
        if free and not self.small:
            self._fit(dims, free, kinds, lows, min_elements, 3 * min_elements)
        return tuple(dims)

    def _fit(self, dims: list[int], free: list[int], kinds: list[str], lows: tuple[int, ...],
             lo: int, hi: int) -> None:
        """Resize free axes of `dims` (in place) until their product lies in
        [lo, hi]: the largest shrinks, the smallest grows, each kept of its
        kind where that still fits."""
        for _ in range(2 * len(dims)):
            total = math.prod(dims)
            if lo <= total <= hi:
                return
            grow = total < lo
            i = min(free, key=lambda a: dims[a]) if grow else max(free, key=lambda a: dims[a])
            want = dims[i] * (lo if grow else math.sqrt(lo * hi)) / total
            dims[i] = max(lows[i], rounded(want, kinds[i]))
        i = min(free, key=lambda a: dims[a])
        while math.prod(dims) < lo:  # rounding left it short: the smallest axis grows
            dims[i] += 1

    def _size(self, value: float, kind: str, least: int) -> int:
        if kind == "small":  # 2..13: odd and prime sizes come often
            return max(least, min(13, round(value) + self.int(-1, 1)))
        return max(least, rounded(value, kind))
