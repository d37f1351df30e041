"""The NumPy reference interpreter of the `nn` dialect: the meaning of every
op (`ops.py`) and the interpreter (`interpreter.py`). It sits below the passes,
which may fold or check with it, and above the dialects only."""
