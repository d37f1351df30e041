#!/usr/bin/env bash
# The call path on a GPU, in one command (at most 9 minutes: 230 s + 290 s caps):
# every test of the call path (GPU tests included), then bench/launch_path.py
# with MobileNetV2's first call in fresh processes.
#
#   bash bench/gpu_check_call_path.sh          # from the repository root
#
# Uses $PYTHON (default: python) with $PYTHONPATH kept, and makes `import fusec`
# this checkout through a symlink. Results: bench/launch_path.py's tables on
# stdout and in $OUT (else bench/results); pytest's log in $OUT too.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python}"
RESULTS="${OUT:-$ROOT/bench/results}"
mkdir -p "$RESULTS"
LINK="$(mktemp -d /tmp/fusec-path.XXXXXX)"
ln -s "$ROOT" "$LINK/fusec"
export PYTHONPATH="$LINK${PYTHONPATH:+:$PYTHONPATH}"
export FUSEC_COMMIT="${FUSEC_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
cd "$ROOT"

echo "== environment"
"$PY" - <<'PY'
import importlib.metadata as md, shutil, fusec
print("fusec from", fusec.__file__)
for d in ("numba", "numba-cuda", "cuda-core", "cupy-cuda12x", "cupy-cuda13x", "torch", "rich"):
    try:
        print(f"{d} {md.version(d)}")
    except md.PackageNotFoundError:
        pass
from fusec.runtime.kernel_build import find_ptxas
print("ptxas:", find_ptxas() or "none (the driver links PTX; its cubin is kept)")
PY
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null

echo "== pytest: the call path"
timeout 230 "$PY" -m pytest -q -o addopts="-ra" -p no:cacheprovider \
    tests/test_gpu_call_path.py tests/test_gpu_graphs.py tests/test_call_path.py \
    tests/test_kernel_cache.py tests/test_kernel_load_path.py tests/test_graph_io.py \
    tests/test_graph_cache.py tests/test_cublas_direct.py 2>&1 | tee "$RESULTS/pytest_callpath.log"
tests=${PIPESTATUS[0]}

echo "== bench/launch_path.py --mobilenet"
timeout 290 "$PY" bench/launch_path.py --mobilenet --iters 200 --repeat 5 --out "$RESULTS" \
    2>&1 | tee "$RESULTS/launch_path.log"
bench=${PIPESTATUS[0]}

rm -rf "$LINK"
echo "== pytest exit $tests, bench exit $bench"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
