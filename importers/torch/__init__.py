"""PyTorch in: a `torch.compile` backend and `torch.export` import (docs/pytorch.md).

```python
import torch, fusec
y = torch.compile(model, backend="fusec")(x)          # backend.py
result = fusec.from_torch(model, (x,))               # export_import.py
print(result.text)                                   # the nn module
```

`fusec.torch` is this package. It needs the optional `torch` package
(`pip install -e ".[torch]"`); nothing else in fusec imports it.
"""

from __future__ import annotations

from fusec.importers.torch.backend import (
    Backend,
    FusecPartition,
    GraphReport,
    PartitionInfo,
    fusec_backend,
    reports,
)
from fusec.importers.torch.context import TorchImportError, Unsupported
from fusec.importers.torch.export_import import from_exported, from_torch, load_pt2
from fusec.importers.torch.op_table import supported_ops

__all__ = [
    "Backend",
    "FusecPartition",
    "GraphReport",
    "PartitionInfo",
    "TorchImportError",
    "Unsupported",
    "from_exported",
    "from_torch",
    "fusec_backend",
    "load_pt2",
    "reports",
    "supported_ops",
]
