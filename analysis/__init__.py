"""The analysis layer: facts and models the passes decide with, below them.

Diagnostics, op kinds, hardware targets, the cost model, fusion legality
and policy, the memory plan, remarks and the attention pattern. Nothing here
imports code generation, the passes or the runtime (import-linter checks it).
"""
