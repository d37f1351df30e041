"""The fusec backend's options given to a benchmark on its command line (`--fusec-options`)."""

from __future__ import annotations

import json
from typing import Any


def parse_options(text: str) -> dict[str, Any]:
    """The JSON object `text` (empty: no options); ValueError says what is wrong."""
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError as err:
        raise ValueError(f"--fusec-options is not JSON: {err}") from None
    if not isinstance(options, dict):
        raise ValueError("--fusec-options must be a JSON object")
    return options
