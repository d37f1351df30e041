"""lit configuration of fusec's filecheck tests (run through pytest too)."""

import os

import lit.formats

config.name = "fusec"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir", ".test"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py", "Inputs"]  # noqa: F821
config.environment["PATH"] = os.environ["PATH"]  # noqa: F821
for var in ("PYTHONPATH", "HOME", "NUMBA_ENABLE_CUDASIM", "NUMBA_CACHE_DIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
config.substitutions.append(("%inputs", os.path.join(os.path.dirname(__file__), "Inputs")))  # noqa: F821
# %repo: the repository root, so tests can run files kept elsewhere (docs/examples).
_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
config.substitutions.append(("%repo", _repo))  # noqa: F821
