"""The built-in writers of the registry in `codegen/writers.py`: the "numba"
backend's emitter of each built-in group kind, and the "library" backend's
GEMM call (cuBLAS), convolution and fused attention (cuDNN). `writers.py`
registers them on its first use."""

from __future__ import annotations

from fusec.codegen import attention, contraction, layout, pointwise, reduction, window
from fusec.codegen.library_attention import LibraryAttentionWriter
from fusec.codegen.library_conv import LibraryConvWriter
from fusec.codegen.library_gemm import LibraryGemmWriter
from fusec.codegen.writers import NumbaWriter, Writer, ignoring_target, register_writer

BUILTIN_WRITERS: tuple[Writer, ...] = (
    NumbaWriter("pointwise", pointwise.emit),
    NumbaWriter("layout", ignoring_target(layout.emit)),
    NumbaWriter("reduction", ignoring_target(reduction.emit)),
    NumbaWriter("contraction", ignoring_target(contraction.emit)),
    NumbaWriter("window", ignoring_target(window.emit)),
    NumbaWriter("attention", attention.emit),
    LibraryGemmWriter(),
    LibraryConvWriter(),
    LibraryAttentionWriter(),
)
"""One writer per built-in (backend, kind), in registration order."""


def register_builtin_writers() -> None:
    """Add every built-in writer to the registry; calling it again changes
    nothing."""
    for writer in BUILTIN_WRITERS:
        register_writer(writer)
