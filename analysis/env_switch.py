"""Environment switches: `FUSEC_KERNEL_CACHE=0`, `FUSEC_PROGRAM_CACHE=off`,
`FUSEC_PROGRESS=no`, ... read one way everywhere."""

from __future__ import annotations

import os

OFF_VALUES = ("0", "off", "no", "false")


def switched_off(name: str) -> bool:
    """Whether the environment variable `name` says off (any case, spaces
    ignored); unset or anything else is on."""
    return os.environ.get(name, "").strip().lower() in OFF_VALUES
