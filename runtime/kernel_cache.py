"""The kernel cache, by its runtime name: it lives in `codegen/kernel_cache.py`
(the register probe, below the runtime, stores the kernels it compiles there
too); the runtime's callers import it from here or from there alike."""

from fusec.codegen.kernel_cache import (
    CACHE_DIR_ENV,
    CACHE_SWITCH_ENV,
    KernelCode,
    KernelStore,
    Signature,
    kernel_key,
    toolchain_versions,
    user_cache_root,
    user_store,
)

__all__ = ["CACHE_DIR_ENV", "CACHE_SWITCH_ENV", "KernelCode", "KernelStore", "Signature",
           "kernel_key", "toolchain_versions", "user_cache_root", "user_store"]
