"""fusec: a kernel-fusion compiler for tensor programs written in the `nn` dialect."""

from fusec.version import __version__ as __version__


def __getattr__(name: str) -> object:
    """`fusec.compile`, `fusec.CompiledModel`, `fusec.torch` and
    `fusec.from_torch`, imported on first use so that `import fusec` (and the
    CLI's start-up) stays fast."""
    if name == "compile":
        from fusec.compiler.python_api import compile

        return compile
    if name in ("CompiledModel", "load_out"):
        from fusec.runtime import compiled_model

        return getattr(compiled_model, name)
    if name in ("torch", "from_torch"):
        # `fusec.torch` is fusec.importers.torch (it needs PyTorch installed).
        from fusec.importers import torch as fusec_torch

        return fusec_torch if name == "torch" else fusec_torch.from_torch
    raise AttributeError(f"module 'fusec' has no attribute '{name}'")
