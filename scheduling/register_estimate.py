"""A group kernel's estimated registers per thread and the parts they come
from: what the register model (`scheduling/register_model.py`), the kinds'
budget choices (`scheduling/kinds/`) and `register-budget` pass around.

```python
RegisterEstimate(31, (("base", 13), ("addressing", 6), ("in flight", 4), ("unroll", 8)))
```
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegisterEstimate:
    """Estimated registers per thread and the parts they come from."""

    registers: int
    parts: tuple[tuple[str, int], ...]

    def summary(self) -> str:
        """`~31 registers (base 13, addressing 6, in flight 4, unroll 8)`."""
        inner = ", ".join(f"{k} {v}" for k, v in self.parts if v)
        return f"~{self.registers} registers ({inner})"
