"""fusec: a kernel-fusion compiler for tensor programs written in the `nn` dialect."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`fusec.compile` and `fusec.CompiledModel`, imported on first use so that
    `import fusec` (and the CLI's start-up) stays fast."""
    if name in ("compile", "CompiledModel", "load_out"):
        from fusec.runtime import compiled_model

        return getattr(compiled_model, name)
    raise AttributeError(f"module 'fusec' has no attribute '{name}'")
