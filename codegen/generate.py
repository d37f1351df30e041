"""From a grouped module to a `Program`: kernels, launches, constants, views.

Input: a module whose function bodies hold, at top level, only
`fusion.group`, `nn.constant`, `nn.reshape` and `func.return` (what
`group-each-op` and the fusion passes leave):

```mlir
func.func @f(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %c = nn.constant dense<2.0> : tensor<f32>              // a constant of the program
  %y = fusion.group (%x, %c) {name = "g0", kind = "pointwise"} ... { ... }   // a kernel
  %r = nn.reshape %y : (tensor<4x8xf32>) -> tensor<32xf32>  // a view of %y's buffer
  func.return %r : tensor<32xf32>
}
```

Each group is written by the writer of its (backend, kind) in the registry
of `codegen/writers.py` (a numba kernel, or a library call) and a kernel's
group is annotated with what was decided (`kernel`, `grid`, `block`,
`shared_bytes`), so the printed IR shows the plan.
"""

from __future__ import annotations

import ast
import functools
import re
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from fusec.analysis.cost_model import op_flops
from fusec.analysis.device_dtypes import UnsupportedTypeError, value_dtype
from fusec.analysis.diagnostics import FusecError, op_error
from fusec.analysis.group_kind import MAX_REGISTERS_ATTR
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.program import (
    ArgSpec,
    FunctionProgram,
    KernelLaunch,
    Program,
    TensorSpec,
    View,
)
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import DEFAULT_TARGET, Target, get_target
from fusec.codegen import split_launch
from fusec.codegen.kernel_source import (
    PARTIALS_SUFFIX,
    KernelParam,
    KernelSource,
    NameTable,
    capped,
    kernel_prelude,
)
from fusec.codegen.launch_grid import fit_grid, launch_register_cap
from fusec.codegen.library_price import priced
from fusec.codegen.splat_inputs import inline_splat_inputs, is_splat
from fusec.codegen.writers import WriteTask, writer_for
from fusec.dialects import nn
from fusec.dialects.element_types import bf16_bits, of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import dense_to_numpy, int_list, tensor_shape
from fusec.reference.interpreter import index_bounds
from fusec.scheduling.group_plan import group_plan
from fusec.scheduling.split_plan import split_launches
from fusec.scheduling.transposed_plan import TransposedPlan

MAX_CONSTANT_BYTES = 1 << 30
"""The most bytes a splat constant may take when written out element by
element (constants.npz and device memory): one that no kernel can read as a
literal (`codegen/splat_inputs.py`) and that would take more is an error
naming the op, not a 16 GiB allocation. Constants stored element by element
in the model are held already and are written as they are; past this size
`--remarks` notes them. `generate_program(..., max_constant_bytes=N)`
changes it."""

# How much of a function's name starts its kernels' names (`f_g0_exp`): names
# are cut at 40 characters, and the rest is for the group and the op.
KERNEL_NAME_FUNC_CHARS = 20

# Which op names a kernel: the first op of the highest-ranked kind in its group.
_MAIN_OP_RANK: dict[OpKind, int] = {
    OpKind.CONTRACTION: 0,
    OpKind.WINDOW: 1,
    OpKind.REDUCTION: 2,
    OpKind.LAYOUT: 3,
}
_OTHER_RANK = 4


def main_op(group: GroupOp) -> Operation | None:
    """The op a kernel is named after (matmul over its epilogue, ...); None
    for a group that only hands its inputs on."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    return min(ops, key=lambda op: _MAIN_OP_RANK.get(op_kind(op), _OTHER_RANK), default=None)


def group_attr(group: GroupOp, key: str, default: str) -> str:
    """A string attribute of a group (`name`, `kind`)."""
    attr = group.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else default


def annotate(group: GroupOp, kernel: KernelSource) -> None:
    """Record the generated kernel and its launch shape on the group."""
    group.attributes["kernel"] = StringAttr(kernel.name)
    group.attributes["grid"] = int_list(kernel.grid)
    group.attributes["block"] = int_list(kernel.block)
    group.attributes["shared_bytes"] = IntegerAttr(kernel.shared_bytes, IntegerType(64))


@dataclass
class _FunctionBuilder:
    """Walks one function body and fills its `FunctionProgram`."""

    func: FuncOp
    names: NameTable
    kernels: list[KernelSource]
    target: Target  # prices each launch (`KernelLaunch.est_time_us`)
    max_constant_bytes: int = MAX_CONSTANT_BYTES
    ids: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    program: FunctionProgram | None = None
    # `codegen/split_launch.py`: each set's first group, and the groups that
    # run in their first group's launch.
    split_sets: dict[GroupOp, list[GroupOp]] = field(
        default_factory=dict[GroupOp, list[GroupOp]])
    absorbed: set[GroupOp] = field(default_factory=set[GroupOp])

    def value_id(self, value: SSAValue, user: Operation | None = None) -> str:
        """The id of `value`, assigned on first sight (`v0`, `v1`, ...); an
        unsupported element type is reported at `user` (else its definer)."""
        if value not in self.ids:
            try:
                spec = TensorSpec(tensor_shape(value), value_dtype(value))
            except UnsupportedTypeError as err:
                owner = value.owner if isinstance(value.owner, Operation) else self.func
                raise op_error(user or owner, str(err)) from None
            vid = f"v{len(self.ids)}"
            self.ids[value] = vid
            assert self.program is not None
            self.program.values[vid] = spec
        return self.ids[value]

    def build(self) -> FunctionProgram:
        name = self.func.sym_name.data
        self.program = FunctionProgram(
            name=name, inputs=[], input_names=[], outputs=[], values={}, launches=[]
        )
        block = self.func.body.block
        self.program.inputs = [self.value_id(a) for a in block.args]
        self.program.input_names = [a.name_hint or f"arg{i}" for i, a in enumerate(block.args)]
        self.program.index_bounds = {
            vid: bound for vid, bound in zip(self.program.inputs, index_bounds(self.func),
                                             strict=True) if bound is not None}
        for group in [g for g in block.ops if isinstance(g, GroupOp)]:
            inline_splat_inputs(group)  # a pipeline without group-each-op may leave them
        for members in split_launches(list(block.ops)):
            self.split_sets[members[0]] = members
            self.absorbed.update(members[1:])
        for op in list(block.ops):
            self.visit(op)
        return self.program

    def visit(self, op: Operation) -> None:
        assert self.program is not None
        if isinstance(op, nn.ConstantOp):
            if op.result.uses:  # splats the kernels read as literals have none
                self.constant(op)
        elif isinstance(op, nn.ReshapeOp):
            source = self.value_id(op.x)
            self.program.views.append(View(self.value_id(op.result), source))
        elif isinstance(op, GroupOp):
            if op in self.split_sets:  # the slices of one value: one launch
                self.program.launches.append(self.split_launch(self.split_sets[op]))
                return
            if op in self.absorbed:  # launched with the first group of its set
                return
            if all(0 in tensor_shape(r) for r in op.outputs):
                # Nothing to compute: the runtime allocates empty outputs.
                for r in op.outputs:
                    self.value_id(r, op)
                return
            self.program.launches.extend(self.launch(op))
        elif isinstance(op, ReturnOp):
            self.program.outputs = [self.value_id(v) for v in op.arguments]
        else:
            raise op_error(
                op, f"'{op.name}' is outside any fusion.group; run 'group-each-op' before "
                "code generation"
            )

    def constant(self, op: nn.ConstantOp) -> None:
        """Hold `op`'s elements as a constant of the program (constants.npz):
        a splat left outside every group (a layout op's operand, a returned
        value) is written out whole, within `max_constant_bytes`."""
        assert self.program is not None
        vid = self.value_id(op.result)
        spec = self.program.values[vid]
        if is_splat(op) and spec.nbytes > self.max_constant_bytes:
            raise op_error(op, f"this splat constant would be written out whole ({spec.nbytes} "
                           f"bytes, more than the {self.max_constant_bytes}-byte limit on "
                           "constants): only elementwise ops and matmul and window operands "
                           "read a splat as one value")
        if spec.nbytes > self.max_constant_bytes:
            RemarkCollector().announce(
                "note", f"constant {op.result.name_hint or vid} of @{self.func.sym_name.data} "
                f"takes {spec.nbytes} bytes in constants.npz and device memory")
        # np.asarray, not np.ascontiguousarray: that makes a 0-d array 1-d
        array = np.asarray(dense_to_numpy(op.value), order="C")
        if of_device_dtype(spec.dtype).name == "bf16":
            # A bf16 value lives on the device as its bit patterns: the
            # constant is held (and saved to constants.npz) as plan.json's
            # dtype says, not as the float32 values the reference holds.
            array = bf16_bits(array)
        self.program.constants[vid] = array

    @staticmethod
    def param_value(group: GroupOp, param: KernelParam) -> SSAValue:
        """The group operand or result a kernel parameter binds."""
        return group.inputs[param.index] if param.role == "input" else group.outputs[param.index]

    def workspace_ids(self, kernel: KernelSource) -> list[str]:
        """A value per workspace of `kernel`, held like a constant (zeros,
        uploaded once, never pooled): see `kernel_source.Workspace`."""
        assert self.program is not None
        ids: list[str] = []
        for ws in kernel.workspaces:
            # Their own prefix: `v<n>` numbers the model's values as they are met.
            vid = f"w{sum(v.startswith('w') for v in self.program.values)}"
            self.program.values[vid] = TensorSpec(ws.shape, ws.dtype)
            self.program.constants[vid] = np.zeros(ws.shape, ws.dtype)
            ids.append(vid)
        return ids

    def launch(self, group: GroupOp) -> list[KernelLaunch]:
        """Write `group` through its writer: a library call's launch, or its
        kernel and the launches that run it (its `before` kernels first,
        sharing its workspaces)."""
        for value in (*group.inputs, *group.outputs):
            self.value_id(value, group)  # reports unsupported element types at the group
        func_name = self.func.sym_name.data
        group_name = group_attr(group, "name", f"g{len(self.kernels)}")
        main = op.name.removeprefix("nn.") if (op := main_op(group)) else "copy"
        # a long function name is cut so the group and op still show in the name
        # A split reduction or attention adds `<name>_partials` beside it.
        kernel_name = self.names.fresh(f"{func_name[:KERNEL_NAME_FUNC_CHARS]}_{group_name}_{main}",
                                       derived=(PARTIALS_SUFFIX,))
        kind = group_attr(group, "kind", "")
        writer = writer_for(group)
        try:
            with group_plan(group, self.target) as plan:
                kernel = writer.write(WriteTask(plan, kernel_name, group_name, self.value_id,
                                                self.target))
                stored = plan.stored()
        except NotImplementedError as err:  # a writer's documented gap, not a crash
            raise op_error(group, f"cannot generate this {kind} group: {err}") from None
        if isinstance(kernel, KernelLaunch):  # a library call: no kernel of kernels.py
            return [replace(priced(kernel, self.program.values, self.target), plan=stored)]
        cap = _int_attr(group, MAX_REGISTERS_ATTR)  # `--max-registers`
        firsts = [self._fitted(k, cap) for k in kernel.before]
        kernel = self._fitted(kernel, cap)
        for k in firsts:
            self.names.used.add(k.name)
        self.kernels += [*firsts, kernel]
        annotate(group, kernel)
        workspaces = self.workspace_ids(kernel)
        return [self._launch_of(k, group, group_name, workspaces, stored)
                for k in (*firsts, kernel)]

    def split_launch(self, groups: list[GroupOp]) -> KernelLaunch:
        """One kernel and launch for `groups` (`codegen/split_launch.py`)."""
        for group in groups:
            for value in (*group.inputs, *group.outputs):
                self.value_id(value, group)
        func_name = self.func.sym_name.data
        names = [group_attr(g, "name", "g") for g in groups]
        kernel_name = self.names.fresh(
            f"{func_name[:KERNEL_NAME_FUNC_CHARS]}_{names[0]}_split",
            derived=tuple(f"_s{k}" for k in range(len(groups))))
        with ExitStack() as planning:
            plans = [planning.enter_context(group_plan(g, self.target)) for g in groups]
            kernel, values = split_launch.emit(
                groups, [p.detail_of(TransposedPlan) for p in plans], kernel_name)
            stored = [p.stored() for p in plans]
        caps = [_int_attr(g, MAX_REGISTERS_ATTR) for g in groups]
        kernel = self._fitted(kernel, min((c for c in caps if c), default=0))
        self.kernels.append(kernel)
        for group in groups:
            annotate(group, kernel)
        RemarkCollector().announce(
            "remark", f"groups {', '.join(names)} read slices of one value: one launch, "
            f"one segment of blocks per group (kernel {kernel_name})")
        args = [ArgSpec(self.value_id(v), p.view_shape, p.role == "output")
                for p, v in zip(kernel.params, values, strict=True)]
        assert self.program is not None
        moved = sum(self.program.values[v].nbytes for v in dict.fromkeys(a.value for a in args))
        ops = [op for g in groups for op in g.block.ops if not isinstance(op, YieldOp)]
        return KernelLaunch(
            kernel=kernel.name, grid=kernel.grid, block=kernel.block,
            shared_bytes=kernel.shared_bytes, args=args, ops=[op.name for op in ops],
            group="+".join(names),
            hbm_bytes=moved,
            est_time_us=self.target.kernel_time(moved, sum(op_flops(op) for op in ops)) * 1e6,
            est_registers=max(_est_registers(g) for g in groups),
            plan={"kind": "pointwise", "backend": "numba", "schedule": None, "parts": stored},
        )

    def _fitted(self, kernel: KernelSource, cap: int) -> KernelSource:
        """`kernel` within the target's grid limits, declared with the
        registers a block of it can launch with (and `cap`, --max-registers)."""
        kernel = fit_grid(kernel, self.target)
        return capped(kernel, launch_register_cap(kernel, self.target, cap))

    def _launch_of(self, kernel: KernelSource, group: GroupOp, group_name: str,
                   workspaces: list[str], stored: dict[str, Any]) -> KernelLaunch:
        """The launch of `kernel`, one of `group`'s kernels, whose plan's
        stored form is `stored`."""
        args = [
            ArgSpec(workspaces[p.index], p.view_shape, not p.read_only)
            if p.role == "workspace" else
            ArgSpec(self.value_id(self.param_value(group, p)), p.view_shape, p.role == "output")
            for p in kernel.params
        ]
        ops = [op.name for op in group.block.ops if not isinstance(op, YieldOp)]
        assert self.program is not None
        # Each distinct buffer once: what the kernel must at least move.
        moved = sum(self.program.values[v].nbytes for v in dict.fromkeys(a.value for a in args))
        # The roofline of analysis/cost_model.py: max(bytes/BW, flops/peak) + launch.
        flops = sum(op_flops(op) for op in group.block.ops if not isinstance(op, YieldOp))
        return KernelLaunch(
            kernel=kernel.name, grid=kernel.grid, block=kernel.block,
            shared_bytes=kernel.shared_bytes, args=args, ops=ops, group=group_name,
            hbm_bytes=moved, est_time_us=self.target.kernel_time(moved, flops) * 1e6,
            est_registers=_est_registers(group), plan=stored,
        )


def _est_registers(group: GroupOp) -> int:
    """The `est_registers` register-budget recorded on the group (0: not run)."""
    return _int_attr(group, "est_registers")


def _int_attr(group: GroupOp, key: str) -> int:
    attr = group.attributes.get(key)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def top_level_names(text: str) -> list[str]:
    """The names a piece of module source binds at top level (defs, classes,
    imports, assignments), in order, repeats kept."""
    names: list[str] = []
    _bound_names(ast.parse(text).body, names)
    return names


def _bound_names(body: list[ast.stmt], names: list[str]) -> None:
    """The names `body` binds in its own scope: into `if`/`try`/`with`/loop
    blocks, not into the bodies of the functions and classes it defines
    (their locals, a prelude helper's loop variable, bind nothing here)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.extend((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.For | ast.While | ast.With | ast.Try):
            heads = [node.target] if isinstance(node, ast.For) else [
                i.optional_vars for i in getattr(node, "items", []) if i.optional_vars]
            names.extend(n.id for h in heads for n in ast.walk(h)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            for block in ("body", "orelse", "finalbody"):
                _bound_names(getattr(node, block, []), names)
            for handler in getattr(node, "handlers", []):
                _bound_names(handler.body, names)
        else:
            names.extend(n.id for n in ast.walk(node)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


# Stands for a kernel's own name in `_kernel_names`' memo key.
_OWN_NAME = "__fusec_own_name__"
_COMMENT_LINE = re.compile(r"^[ \t]*#.*\n?", re.MULTILINE)


@functools.lru_cache(maxsize=256)
def _unit_names(text: str) -> tuple[str, ...]:
    return tuple(top_level_names(text))


def _kernel_names(kernel: KernelSource) -> list[str]:
    """`top_level_names` of one kernel, parsed once per body: kernels of
    repeated layers differ only in their names and comments (a 12-layer
    GPT-2: 96 kernels, 8 bodies), and neither binds a name."""
    own = re.compile(rf"\b{re.escape(kernel.name)}\b")
    unit = own.sub(_OWN_NAME, _COMMENT_LINE.sub("", kernel.text))
    return [kernel.name if n == _OWN_NAME else n for n in _unit_names(unit)]


def check_unique_names(kernels: list[KernelSource]) -> None:
    """Every top-level name of kernels.py bound once, and each kernel defining
    its own name. A name bound twice would silently make the later definition
    run for both launches (wrong numbers), so a clash is an internal error."""
    seen = dict.fromkeys(top_level_names(kernel_prelude([k.text for k in kernels])),
                         "the prelude")
    for k in kernels:
        defined = _kernel_names(k)
        if k.name not in defined:
            raise RuntimeError(f"kernel {k.name!r}: its source does not define {k.name!r}")
        for name in defined:
            if name in seen:
                raise RuntimeError(
                    f"kernels.py would bind {name!r} twice ({seen[name]} and kernel {k.name!r})"
                )
            seen[name] = f"kernel {k.name!r}"


def kernels_text(kernels: list[KernelSource]) -> str:
    """The text of `kernels.py`: the prelude, then each kernel (checked by
    `check_unique_names`)."""
    check_unique_names(kernels)
    prelude = kernel_prelude([k.text for k in kernels])
    parts = [prelude.rstrip("\n"), *(k.text.strip("\n") for k in kernels)]
    return "\n\n\n".join(parts) + "\n"


def generate_program(module: ModuleOp, target: Target | None = None,
                     max_constant_bytes: int = MAX_CONSTANT_BYTES) -> Program:
    """Generate every kernel of `module` and the launch plan of each public
    function; annotates each group with `kernel`, `grid`, `block` and
    `shared_bytes`; schedules the groups that have no `schedule` yet and
    prices each launch on `target` (default h200). Splat constants the
    kernels can read as literals move into their groups; one that must be
    written out past `max_constant_bytes` is an error. Raises a
    located `FusecError` for what it cannot generate.
    """
    profile = target or get_target(DEFAULT_TARGET)
    from fusec.analysis.schedule_choice import ensure_schedules

    ensure_schedules([g for g in module.walk() if isinstance(g, GroupOp)], profile)
    names = NameTable()
    kernels: list[KernelSource] = []
    functions: dict[str, FunctionProgram] = {}
    for op in module.ops:
        if not isinstance(op, FuncOp) or not op.body.blocks:
            continue
        if op.sym_visibility is not None and op.sym_visibility.data == "private":
            continue
        if op.sym_name.data in functions:
            raise op_error(op, f"function @{op.sym_name.data} is defined twice")
        functions[op.sym_name.data] = _FunctionBuilder(op, names, kernels, profile,
                                                      max_constant_bytes).build()
    if not functions:
        raise FusecError("the module has no public function to compile")
    return Program(kernels_source=kernels_text(kernels), functions=functions, target=profile)
