"""Lowered Relax ``main`` → ``PackagePlan``: plain data the templates render.

The plan names every DLTensor the driver passes to kernels, where its bytes live (the
arena, a caller's input buffer, or the embedded weights), the kernel calls in order, and the
I/O table. Nothing in it is a TVM object.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from relay2cmake import arena
from relay2cmake.builtins import BUILTIN_FUNCTIONS, INPUT_MARK, LAST_STATES, STACK_STATES, builtin_symbol
from relay2cmake.dtypes import carrier, storage_bytes
from relay2cmake.errors import ModelError
from relay2cmake.kernel_sets import KernelCode
from relay2cmake.naming import unique_identifiers
from relay2cmake.step_guards import StepReads, step_guards
from relay2cmake.symbolic import DimExpr, DimRange, symbolic_shape
from relay2cmake.tensor_memory import tensor_values
from relay2cmake.weights_file import WeightsFile, WeightsWriter, constant_bytes

if TYPE_CHECKING:  # the plan reads both stages' results; it imports neither
    from relay2cmake.frontends import ImportedModel
    from relay2cmake.lower.pipeline import LoweredModel

# Relax builtins that only check or bookkeep what the driver already guarantees.
IGNORED_OPS = frozenset({"relax.null_value", "relax.vm.alloc_storage", "relax.vm.kill_object"})
IGNORED_PACKED = frozenset({"vm.builtin.check_tensor_info", "vm.builtin.match_shape", "vm.builtin.shape_of"})


@dataclass(frozen=True)
class IOTensor:
    """A model input or output as the C API presents it."""

    index: int
    name: str  # the model's own name
    c_name: str  # unique C identifier
    dtype: str
    shape: tuple[int, ...]  # a bounded output's upper bound
    dynamic_axis: int | None = None  # bounded outputs: the axis whose extent is data-dependent
    extent_buffer: int | None = None  # bounded outputs: the int64[1] buffer holding that extent
    # Extents chosen at run time: per axis an expression over the dimensions, or None
    # (``shape`` holds the largest); empty when static.
    symbolic: tuple[DimExpr | None, ...] = ()

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return storage_bytes(self.dtype, self.shape)


@dataclass(frozen=True)
class Constant:
    index: int
    dtype: str
    shape: tuple[int, ...]
    offset: int  # in the weights file, a multiple of 64
    nbytes: int


@dataclass(frozen=True)
class Buffer:
    """One DLTensor of the driver. Views share ``home``/``slot`` with what they view."""

    index: int
    dtype: str
    shape: tuple[int, ...]
    home: str  # "arena" (slot = byte offset), "input" (slot = input index), "constant" (slot = index)
    slot: int
    # The output this buffer is (or views), computed straight into the caller's output buffer
    # when that one is aligned and overlaps no other input or output (else copied out); -1: none.
    output: int = -1
    # Extents that depend on the run-time dimensions, as for IOTensor; ``shape`` (the largest)
    # sized its room in the arena.
    symbolic: tuple[DimExpr | None, ...] = ()


@dataclass(frozen=True)
class Arg:
    # "tensor" (value = buffer index), "int" (value = the integer; a text: its index) or
    # "dim" (an integer computed from the run-time dimensions: ``expr``)
    kind: str
    value: int
    expr: DimExpr | None = None


@dataclass(frozen=True)
class Step:
    kernel: str  # the Relax name of the PrimFunc
    symbol: str  # its C symbol
    args: tuple[Arg, ...]
    scratch_offset: int
    scratch_bytes: int
    # Run only when this is > 0, and when it is not, skip the next ``skip`` steps too (their
    # guards are then 0 as well): see step_guards. None: always run.
    guard: DimExpr | None = None
    skip: int = 0


@dataclass(frozen=True)
class PackagePlan:
    inputs: tuple[IOTensor, ...]
    outputs: tuple[IOTensor, ...]
    input_staging: tuple[int, ...] | None  # arena offset for misaligned input i; None: used in place
    output_buffers: tuple[int, ...]  # buffer index holding output i after the steps
    buffers: tuple[Buffer, ...]
    constants: tuple[Constant, ...]
    weights: WeightsFile  # the constants' bytes, each at its offset
    steps: tuple[Step, ...]
    # Texts builtins report (an index check's operator); a step passes a text's index.
    texts: tuple[str, ...]
    arena_bytes: int
    intermediate_bytes: int  # what the arena would be for intermediates alone
    tvm_storage_bytes: int  # what TVM's own static plan allocates (intermediates), for comparison
    kernels: KernelCode  # the kernels' code (C source, object sets), carried from lowering to emit
    dims: tuple[DimRange, ...] = ()  # dimensions chosen at run time, in the C API's order

    @property
    def weight_bytes(self) -> int:
        return sum(c.nbytes for c in self.constants)


class _Builder:
    """Walks the bindings once, recording buffers, uses and steps."""

    def __init__(
        self, lowered: LoweredModel, imported: ImportedModel, stage_inputs: bool, weights_folder: Path | None
    ):
        self.lowered = lowered
        self.imported = imported
        self.stage_inputs = stage_inputs
        self.buffers: list[dict[str, Any]] = []  # mutable while building
        self.constants: list[Constant] = []
        self.weights = WeightsWriter(weights_folder)
        self.constant_ids: dict[str, int] = {}
        self.refs: dict[Any, Any] = {}  # relax Var → buffer index | tuple of refs | None (ignored)
        self.last_use: dict[int, int] = {}  # root buffer index → last binding index
        self.defined_at: dict[int, int] = {}
        self.steps: list[dict[str, Any]] = []
        self.tvm_storage_bytes = 0
        self.input_roots: list[int] = []
        self.texts: list[str] = []

    # -- buffers -------------------------------------------------------------------------
    def new_buffer(
        self,
        dtype: str,
        shape: tuple[int, ...],
        home: str,
        slot: int,
        root: int | None = None,
        symbolic: tuple[DimExpr | None, ...] = (),
    ) -> int:
        index = len(self.buffers)
        self.buffers.append(
            {
                "dtype": dtype,
                "shape": shape,
                "home": home,
                "slot": slot,
                "root": index if root is None else root,
                "symbolic": symbolic,
            }
        )
        return index

    def shape_of(self, shape_expr) -> tuple[tuple[int, ...], tuple[DimExpr | None, ...]]:
        return symbolic_shape(shape_expr.values, self.imported.dims, "A tensor of the lowered model")

    def root(self, index: int) -> int:
        return self.buffers[index]["root"]

    def use(self, ref: Any, step: int) -> None:
        if isinstance(ref, tuple):
            for item in ref:
                self.use(item, step)
        elif isinstance(ref, int):
            root = self.root(ref)
            self.last_use[root] = max(self.last_use.get(root, -1), step)

    def constant(self, expr) -> int:
        array = tensor_values(expr.value)
        dtype, shape = str(expr.value.dtype), tuple(int(d) for d in array.shape)
        data = constant_bytes(array)
        digest = hashlib.sha256(dtype.encode() + repr(shape).encode())
        digest.update(data)
        key = digest.hexdigest()
        if key not in self.constant_ids:
            index = len(self.constants)
            self.constants.append(Constant(index, dtype, shape, self.weights.append(data), data.nbytes))
            self.constant_ids[key] = self.new_buffer(dtype, shape, "constant", index)
        return self.constant_ids[key]

    # -- expressions -----------------------------------------------------------------------
    def resolve(self, expr) -> Any:
        import tvm
        from tvm import relax

        if isinstance(expr, relax.Var):
            if expr not in self.refs:
                raise ModelError(f"Lowered model refers to {expr.name!r} before defining it.")
            return self.refs[expr]
        if isinstance(expr, tvm.ir.expr.GenericConst) and hasattr(expr.value, "numpy"):
            return self.constant(expr)
        if isinstance(expr, relax.Tuple):
            return tuple(self.resolve(field) for field in expr.fields)
        raise ModelError(
            f"Lowered model uses an expression the driver cannot represent: {type(expr).__name__}."
        )

    def bind(self, var, value, step: int) -> None:
        import tvm
        from tvm import relax

        if isinstance(value, relax.Call):
            op = value.op
            if isinstance(op, tvm.ir.Op):
                if op.name in IGNORED_OPS:
                    if op.name == "relax.vm.alloc_storage":
                        self.tvm_storage_bytes += self.shape_of(value.args[0])[0][0]
                    self.refs[var] = None
                    return
                if op.name == "relax.vm.alloc_tensor":
                    shape, symbolic = self.shape_of(value.args[2])
                    dtype = str(value.args[3].value)
                    index = self.new_buffer(dtype, shape, "arena", 0, symbolic=symbolic)
                    self.defined_at[index] = step
                    self.refs[var] = index
                    return
                raise ModelError(
                    f"Lowered model uses the Relax operator {op.name}, which the driver does not support."
                )
            if isinstance(op, relax.ExternFunc):
                name = str(op.global_symbol)
                if name in IGNORED_PACKED:
                    self.refs[var] = None
                    return
                if name in BUILTIN_FUNCTIONS:
                    # A builtin of the package (src/<prefix>_builtins.c), called like a kernel.
                    symbol = builtin_symbol(self.lowered.prefix, name)
                    self.call_kernel(name, symbol, value.args, step)
                    self.refs[var] = None
                    return
                if name == "vm.builtin.reshape":
                    base = self.resolve(value.args[0])
                    if not isinstance(base, int):
                        raise ModelError("Lowered model reshapes something that is not a tensor.")
                    self.use(base, step)
                    shape, symbolic = self.shape_of(value.args[1])
                    info = self.buffers[base]
                    self.refs[var] = self.new_buffer(
                        info["dtype"],
                        shape,
                        info["home"],
                        info["slot"],
                        root=self.root(base),
                        symbolic=symbolic,
                    )
                    return
                raise ModelError(
                    f"Lowered model calls the TVM runtime function {name!r}, which a standalone package "
                    "does not have."
                )
            if isinstance(op, tvm.ir.GlobalVar):
                name = op.name_hint
                self.call_kernel(name, self.lowered.kernel_symbols[name], value.args, step)
                self.refs[var] = None
                return
            raise ModelError(f"Lowered model calls {op!r}, which the driver does not support.")
        if isinstance(value, relax.TupleGetItem):
            whole = self.resolve(value.tuple_value)
            self.refs[var] = whole[value.index]
            return
        self.refs[var] = self.resolve(value)

    def named_inputs(self, text: str) -> str:
        """``input #3`` in a builtin's text → ``input 'ids'`` (the model's own name: untrusted
        text, which the C literal encoder and the terminal filters handle)."""
        inputs = self.imported.inputs

        def name(match: re.Match) -> str:
            index = int(match.group(1))
            return f"input {inputs[index].name!r}" if index < len(inputs) else match.group(0)

        return re.sub(re.escape(INPUT_MARK) + r"(\d+)", name, text)

    def is_size(self, expr) -> bool:
        """A TIR integer expression of the run-time dimensions (Relax and TIR variables share
        one class: a dimension is known by its symbol)."""
        from tvm import tirx

        arithmetic: tuple = (tirx.Add, tirx.Sub, tirx.Mul, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max)
        arithmetic += (tirx.Cast,)
        if isinstance(expr, arithmetic):
            return True
        return isinstance(expr, tirx.Var) and expr.name in {d.symbol for d in self.imported.dims}

    def call_kernel(self, name: str, symbol: str, args, step: int) -> None:
        import tvm
        from tvm import relax

        packed = []
        for arg in args:
            if isinstance(arg, tvm.tirx.IntImm):
                packed.append(Arg("int", int(arg.value)))
                continue
            if isinstance(arg, relax.ShapeExpr) or self.is_size(arg):
                # Sizes the kernel takes as integers (TVM's ``tir_vars``, a builtin's bounds),
                # one argument each, computed from the run-time dimensions.
                values = list(arg.values) if isinstance(arg, relax.ShapeExpr) else [arg]
                _, exprs = self.shape_of(relax.ShapeExpr(values))
                for position, value in enumerate(values):
                    expr = exprs[position] if exprs else None
                    packed.append(Arg("dim", 0, expr) if expr is not None else Arg("int", int(value)))
                continue
            if isinstance(arg, tvm.ir.StringImm):
                packed.append(Arg("int", len(self.texts)))
                self.texts.append(self.named_inputs(str(arg.value)))
                continue
            ref = self.resolve(arg)
            if not isinstance(ref, int):
                raise ModelError(
                    f"Kernel {name} takes an argument the driver cannot pass ({type(arg).__name__})."
                )
            self.use(ref, step)
            packed.append(Arg("tensor", ref))
        scratch = self.lowered.kernel_scratch.get(symbol, 0)
        self.steps.append(
            {"kernel": name, "symbol": symbol, "args": tuple(packed), "scratch": scratch, "at": step}
        )

    def step_reads(self, step: dict[str, Any]) -> StepReads:
        """The step's tensors, and which it reads only under a condition: the recurrence
        builtins read step s of each pass (``parts`` in passes of equal length) only when the
        run-time length exceeds s."""
        tensors = [a.value for a in step["args"] if a.kind == "tensor"]
        roots = tuple(self.root(t) for t in tensors)
        if step["kernel"] not in (STACK_STATES, LAST_STATES):
            return StepReads(roots, {})
        out = self.buffers[tensors[-1]]
        length, passes = None, 1
        if step["kernel"] == STACK_STATES and out["symbolic"]:
            length, passes = out["symbolic"][0], out["shape"][1]
        elif step["kernel"] == LAST_STATES:
            length = next((a.expr for a in step["args"] if a.kind == "dim"), None)
            passes = out["shape"][0]
        if length is None:
            return StepReads(roots, {})
        parts = len(tensors) - 1
        return StepReads(roots, {p: (length, p % (parts // passes)) for p in range(parts)})

    # -- the walk --------------------------------------------------------------------------
    def run(self) -> PackagePlan:
        from tvm import relax

        main = self.lowered.main
        for index, (param, signature) in enumerate(zip(main.params, self.imported.inputs, strict=True)):
            buffer = self.new_buffer(
                *carrier(signature.dtype, signature.shape), "input", index, symbolic=signature.symbolic
            )
            self.refs[param] = buffer
            self.input_roots.append(buffer)
            self.defined_at[buffer] = 0

        body = main.body
        step = 0
        for block in body.blocks:
            for binding in block.bindings:
                step += 1
                if not isinstance(binding, relax.VarBinding | relax.MatchCast):
                    raise ModelError(f"Lowered model has a {type(binding).__name__}, which is not supported.")
                self.bind(binding.var, binding.value, step)
        end = step + 1

        result = self.resolve(body.body)
        # The outputs, then the extent of each bounded output (see ImportedModel).
        outputs = self.imported.outputs
        returned = len(outputs) + sum(o.dynamic_axis is not None for o in outputs)
        refs = list(result) if returned > 1 else [result]
        if len(refs) != returned or not all(isinstance(r, int) for r in refs):
            raise ModelError("The lowered model does not return one tensor per declared output.")
        for ref in refs:
            self.use(ref, end)
        extents = iter(refs[len(outputs) :])
        extent_refs = [next(extents) if o.dynamic_axis is not None else None for o in outputs]
        return self.finish(refs[: len(outputs)], extent_refs, end)

    def direct_outputs(self, output_refs: list[int], extent_refs: list[int | None]) -> dict[int, int]:
        """Arena roots that may be computed in the caller's output buffer: output ``i``'s, when
        it is a whole arena tensor (not an input passed through, not a constant, not a bounded
        output) that no other output shares. Copying a 25 MB output (GPT-2's logits) out of the
        arena took a third of the run."""
        roots = [self.root(ref) for ref in output_refs]
        direct = {}
        for i, (ref, root) in enumerate(zip(output_refs, roots, strict=True)):
            info = self.buffers[root]
            if (
                info["home"] == "arena"
                and extent_refs[i] is None
                and roots.count(root) == 1
                and storage_bytes(info["dtype"], info["shape"])
                == storage_bytes(self.buffers[ref]["dtype"], self.buffers[ref]["shape"])
                and (not info["symbolic"] or info["symbolic"] == self.buffers[ref]["symbolic"])
            ):
                direct[root] = i
        return direct

    def finish(self, output_refs: list[int], extent_refs: list[int | None], end: int) -> PackagePlan:
        lifetimes = []
        for index, info in enumerate(self.buffers):
            if info["root"] == index and info["home"] == "arena":
                first = self.defined_at[index]
                last = self.last_use.get(index, first)
                lifetimes.append(
                    arena.Lifetime(f"t{index}", storage_bytes(info["dtype"], info["shape"]), first, last)
                )
        intermediate_bytes = arena.pack(lifetimes)[1] if lifetimes else 0
        for position, root in enumerate(self.input_roots if self.stage_inputs else []):
            info = self.buffers[root]
            lifetimes.append(
                arena.Lifetime(
                    f"in{position}",
                    storage_bytes(info["dtype"], info["shape"]),
                    0,
                    self.last_use.get(root, 0),
                )
            )
        for position, step in enumerate(self.steps):
            if step["scratch"]:
                lifetimes.append(arena.Lifetime(f"s{position}", step["scratch"], step["at"], step["at"]))
        offsets, total = arena.pack(lifetimes)

        direct = self.direct_outputs(output_refs, extent_refs)
        buffers = []
        for index, info in enumerate(self.buffers):
            slot = info["slot"]
            if info["home"] == "arena":
                slot = offsets[f"t{info['root']}"]
            output = direct.get(info["root"], -1)
            buffers.append(
                Buffer(index, info["dtype"], info["shape"], info["home"], slot, output, info["symbolic"])
            )

        inputs = _io_table(self.imported.inputs)
        outputs = _io_table(self.imported.outputs, extent_refs)
        for io, ref in zip(outputs, output_refs, strict=True):
            held = self.buffers[ref]
            computed = (held["dtype"], storage_bytes(held["dtype"], held["shape"]))
            if computed != (carrier(io.dtype, io.shape)[0], io.nbytes):
                raise ModelError(f"Output {io.name!r} does not match what the lowered model computes.")
        guards = step_guards(
            [self.step_reads(s) for s in self.steps],
            {i for i, info in enumerate(self.buffers) if info["root"] == i and info["home"] == "arena"},
            {self.root(ref) for ref in output_refs + [r for r in extent_refs if r is not None]},
            self.imported.dims,
        )
        steps = tuple(
            Step(
                kernel=s["kernel"],
                symbol=s["symbol"],
                args=s["args"],
                scratch_offset=offsets.get(f"s{position}", 0),
                scratch_bytes=s["scratch"],
                guard=guard.expr if guard else None,
                skip=guard.skip if guard else 0,
            )
            for position, (s, guard) in enumerate(zip(self.steps, guards, strict=True))
        )
        return PackagePlan(
            inputs=inputs,
            outputs=outputs,
            input_staging=tuple(offsets[f"in{i}"] for i in range(len(inputs))) if self.stage_inputs else None,
            output_buffers=tuple(output_refs),
            buffers=tuple(buffers),
            constants=tuple(self.constants),
            weights=self.weights.finish(),
            steps=steps,
            texts=tuple(self.texts),
            arena_bytes=total,
            intermediate_bytes=intermediate_bytes,
            tvm_storage_bytes=self.tvm_storage_bytes,
            kernels=self.lowered.code,
            dims=self.imported.dims,
        )


def _io_table(signatures, extent_refs: list[int | None] | None = None) -> tuple[IOTensor, ...]:
    c_names = unique_identifiers([s.name for s in signatures])
    extents = extent_refs or [None] * len(signatures)
    return tuple(
        IOTensor(
            index=i,
            name=s.name,
            c_name=c,
            dtype=s.dtype,
            shape=s.shape,
            dynamic_axis=s.dynamic_axis,
            extent_buffer=extent,
            symbolic=s.symbolic,
        )
        for i, (s, c, extent) in enumerate(zip(signatures, c_names, extents, strict=True))
    )


def build_plan(
    imported: ImportedModel, lowered: LoweredModel, stage_inputs: bool, weights_folder: Path | None = None
) -> PackagePlan:
    """``stage_inputs``: reserve arena room to copy inputs that are not 64-byte aligned
    (kernels compiled with aligned vector loads need it; portable C kernels do not);
    ``weights_folder``: where the weights file is written until the package is staged."""
    return _Builder(lowered, imported, stage_inputs, weights_folder).run()
