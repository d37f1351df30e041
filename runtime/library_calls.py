"""The library calls of a plan, by family: a launch whose `library` names a
cuDNN convolution (`cudnn_conv_*`, `runtime/cudnn_conv.py`), cuDNN's fused
attention (`cudnn_sdpa_*`, `runtime/cudnn_sdpa.py`) or a cuBLAS GEMM
(every other name, `runtime/library_gemm.py`). The executor and the
graph runner go through this module only, so a new family is one more
branch here, its keys in `codegen/library_conv.py`'s way, and its runner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fusec.analysis.program import KernelLaunch
from fusec.codegen.library_attention import is_sdpa
from fusec.codegen.library_conv import is_conv


def check_library(launch: KernelLaunch) -> None:
    """Fail early, naming the launch, when its library call cannot run here."""
    assert launch.library is not None
    if is_conv(launch.library):
        from fusec.runtime.cudnn_conv import check_conv

        check_conv(launch.library)
        return
    if is_sdpa(launch.library):
        from fusec.runtime.cudnn_sdpa import check_sdpa

        check_sdpa(launch.library)
        return
    from fusec.runtime.library_gemm import check_library as check_gemm

    check_gemm(launch)


def prepare_library_calls(calls: Sequence[tuple[KernelLaunch, Any, Sequence[Any]]]) -> None:
    """Choose what the library calls of bound `calls` need chosen before a
    CUDA graph captures them (a convolution's algorithm, an attention's
    graph, and their workspaces)."""
    for call in calls:  # (launch, kernel, args); a kernel's call may carry more
        launch, kernel, args = call[0], call[1], call[2] if len(call) > 2 else ()
        if kernel is None and launch.library is not None and is_conv(launch.library):
            from fusec.runtime.cudnn_conv import prepare_conv

            prepare_conv(launch.library, args)
        elif kernel is None and launch.library is not None and is_sdpa(launch.library):
            from fusec.runtime.cudnn_sdpa import prepare_sdpa

            prepare_sdpa(launch.library, args)


def gemm_calls(calls: Sequence[tuple[KernelLaunch, Any, Sequence[Any]]]
               ) -> list[tuple[KernelLaunch, Any, Sequence[Any]]]:
    """The library GEMMs among bound `calls` (what a direct cuBLAS handle runs)."""
    return [c for c in calls if c[1] is None and c[0].library is not None
            and not is_conv(c[0].library) and not is_sdpa(c[0].library)]


def run_library_call(launch: KernelLaunch, args: Sequence[Any], stream: Any,
                     blas: Any = None) -> None:
    """Run one library launch on `stream` (`blas`: the graph runner's direct
    cuBLAS handle, for GEMMs)."""
    from fusec.runtime.library_gemm import run_library_call as run_gemm
    from fusec.runtime.library_gemm import stream_pointer

    assert launch.library is not None
    if is_conv(launch.library):
        from fusec.runtime.cudnn_conv import run_conv

        run_conv(launch.library, args, stream_pointer(stream))
        return
    if is_sdpa(launch.library):
        from fusec.runtime.cudnn_sdpa import run_sdpa

        run_sdpa(launch.library, args, stream_pointer(stream))
        return
    run_gemm(launch, args, stream, blas)
