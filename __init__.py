"""fusec: a kernel-fusion compiler for tensor programs written in the `nn` dialect."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`fusec.compile`, `fusec.CompiledModel`, `fusec.torch` and
    `fusec.from_torch`, imported on first use so that `import fusec` (and the
    CLI's start-up) stays fast."""
    if name in ("compile", "CompiledModel", "load_out"):
        from fusec.runtime import compiled_model

        return getattr(compiled_model, name)
    if name in ("torch", "from_torch"):
        # `fusec.torch` is fusec.importers.torch (it needs PyTorch installed).
        import importlib

        module = importlib.import_module("fusec.importers.torch")
        return module if name == "torch" else module.from_torch
    raise AttributeError(f"module 'fusec' has no attribute '{name}'")
