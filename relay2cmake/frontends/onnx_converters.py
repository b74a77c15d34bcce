"""ONNX operators TVM 0.27's importer lacks, added through its own extension point.

TVM's ``ONNXGraphImporter`` looks converters up in ``_convert_operator`` (and checks support
in ``_check_for_unsupported_ops``); ``Importer`` overrides both to consult ``CONVERTERS``
first, so TVM itself is left untouched. Each converter is an ``OnnxOpConverter`` that builds
Relax from static shapes:

- RNN, GRU, LSTM: unrolled over the sequence (a run-time length: to its largest value, the
  outputs gathered by builtins the driver's step guards read), all directions, both layouts,
  peepholes, clip, the common activations; ``sequence_lens`` must be absent.
- Attention (opset 23+): TVM's converter only knows com.microsoft's (``num_heads``).
- LpNormalization: x / ||x||_p along one axis, p = 1 or 2.
- OneHot: a float ``depth`` made an integer; (off, on) given at run time picked through a
  0/1 one-hot; TVM's converter does the rest.
- Scan (opset 9+): unrolled over the static sequence length, the body imported once per
  step by TVM's own subgraph walker (the one it uses for If).
- Loop: unrolled the same way when the trip count is a constant and the condition stays a
  constant true (a data-dependent exit needs control flow the driver does not have).
- Clip: as TVM's, but with Relax ``maximum``/``minimum`` that layout conversion sees through.
- BitCast: TIR's ``reinterpret`` (same-width types only, as ONNX requires).
- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: gather along the class axis, with
  class weights, ``ignore_index`` and the three reductions; the latter also yields log_prob.
- NonZero, Compress, Unique: package builtins with bounded outputs (``onnx_bounded``); the
  importer tracks those outputs and appends their extents to ``main``'s results.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType

import numpy as np
import onnx
import tvm
from onnx import numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import (
    ONNXGraphImporter,
    OnnxOpConverter,
    _get_convert_map,
    get_constant,
    onnx_input,
)

from relay2cmake.builtins import LAST_STATES, STACK_STATES
from relay2cmake.dtypes import numpy_dtype
from relay2cmake.frontends import (
    onnx_bounded,
    onnx_conv_transpose,
    onnx_deform_conv,
    onnx_determinant,
    onnx_given_parameters,
    onnx_mel_weights,
    onnx_ml,
    onnx_ms_quantized,
    onnx_pooling,
    onnx_quantized,
    onnx_resize,
    onnx_roi_align,
    onnx_settled,
    onnx_settled_inputs,
    onnx_sub_byte,
    onnx_tfidf,
    onnx_training,
    onnx_windows,
)
from relay2cmake.frontends.onnx_converter_support import (
    OPSET,
    _attr_text,
    _constant_value,
    _static_shape,
    _theirs,
)
from relay2cmake.frontends.onnx_weights import initializer_values
from relay2cmake.tensor_memory import adopted_tensor

# The largest values of the run-time dimensions (symbol → value) while a model with them is
# imported: a recurrent operator over a sequence of run-time length is unrolled to it.
DIM_BOUNDS: ContextVar[dict[str, int] | None] = ContextVar("DIM_BOUNDS", default=None)


def _activation(name: bytes | str, alpha: float | None, beta: float | None):
    name = name.decode() if isinstance(name, bytes) else name
    simple = {"Sigmoid": relax.op.sigmoid, "Tanh": relax.op.tanh, "Relu": relax.op.nn.relu}
    if name in simple:
        return simple[name]
    if name == "HardSigmoid":
        a, b = alpha if alpha is not None else 0.2, beta if beta is not None else 0.5
        return lambda x: relax.op.clip(
            relax.op.add(relax.op.multiply(x, _scalar(a, x)), _scalar(b, x)), 0.0, 1.0
        )
    if name == "LeakyRelu":
        return lambda x: relax.op.nn.leakyrelu(x, alpha if alpha is not None else 0.01)
    if name == "Affine":
        return lambda x: relax.op.add(relax.op.multiply(x, _scalar(alpha or 1.0, x)), _scalar(beta or 0.0, x))
    raise NotImplementedError(f"recurrent activation {name} is not supported")


def _scalar(value: float, like) -> relax.Expr:
    return relax.const(value, str(like.ty.dtype))


def _stack_states_reference(*args) -> None:
    """The builtin for TVM's own VM (the golden step's third reference path)."""
    out = args[-1]
    rows, groups = int(out.shape[0]), int(out.shape[1])
    flags = [int(f) for f in args[-1 - groups : -1]]
    parts = [part.numpy() for part in args[: -1 - groups]]
    steps = len(parts) // groups
    table = [
        [parts[g * steps + (rows - 1 - t if flags[g] else t)] for g in range(groups)] for t in range(rows)
    ]
    out.copyfrom(np.array(table).reshape(tuple(out.shape)))


def _last_states_reference(*args) -> None:
    out, length = args[-1], int(args[-2])
    groups = int(out.shape[0])
    parts = [part.numpy() for part in args[:-2]]
    steps = len(parts) // groups
    out.copyfrom(np.array([parts[g * steps + length - 1] for g in range(groups)]).reshape(tuple(out.shape)))


tvm.register_global_func(STACK_STATES, _stack_states_reference, override=True)
tvm.register_global_func(LAST_STATES, _last_states_reference, override=True)


def _stack_states(bb, passes: list[list[relax.Expr]], reverse: list[bool], length) -> relax.Expr:
    """[length, passes, *state]: row t holds each pass's state at position t (a reverse pass's
    step length - 1 - t). The package builtin reads step s only when s < length, so the
    driver may skip computing the others."""
    first = passes[0][0].ty
    out_ty = relax.TensorType([length, len(passes), *first.shape.values], str(first.dtype))
    args = [state for states in passes for state in states] + [relax.prim_value(int(r)) for r in reverse]
    return bb.emit(relax.call_dps_packed(STACK_STATES, relax.Tuple(args), out_ty=out_ty))


def _last_states(bb, passes: list[list[relax.Expr]], length) -> relax.Expr:
    """[passes, *state]: each pass's state after step length - 1."""
    first = passes[0][0].ty
    out_ty = relax.TensorType([len(passes), *first.shape.values], str(first.dtype))
    args = [state for states in passes for state in states] + [relax.prim_value(length)]
    return bb.emit(relax.call_dps_packed(LAST_STATES, relax.Tuple(args), out_ty=out_ty))


def _stacked(bb, values: list[relax.Expr], axis: int) -> relax.Expr:
    """``stack(values, axis)`` as a concat of each value with the axis added: TVM's layout
    conversion fails on ``stack`` ("String index out of bounds"), and the channels-last
    rewrite then retried around each operator kind in turn (Sequencer2D's LSTMs between
    convolutions: minutes per retry over 30,000 bindings)."""
    return bb.emit(relax.op.concat([bb.emit(relax.op.expand_dims(v, axis)) for v in values], axis=axis))


class _Recurrent(OnnxOpConverter):
    """Shared unrolling of ONNX's RNN, GRU and LSTM. Per pass, the weights are transposed and
    the biases split once, and over a sequence of fixed length the input's share of every
    gate (x W^T + Wb) is one product over all the steps; a step then only adds the state's
    share (h R^T + Rb) and applies the gates. (Each step computing its own x W^T, with its
    own transposes and splits, gave Sequencer's 36 LSTMs over 8-32 steps tens of thousands of
    operators to lower.)"""

    gates = 1
    default_activations: tuple[str, ...] = ()

    @classmethod
    def _cell(cls, bb, x_part, state, weights, acts, attr) -> tuple[relax.Expr, relax.Expr | None]:
        """The step's new state from ``x_part`` = x_t W^T + Wb, its gates in ONNX's order, and
        ``weights``: "RT" (R transposed), "RB" (R's bias) and "P" (LSTM's peepholes or None)."""
        raise NotImplementedError

    @classmethod
    def _pass_weights(cls, bb, weights: dict) -> dict:
        """What a pass's steps share beyond ``weights`` (GRU: R and Rb split by gate)."""
        return weights

    @classmethod
    def _impl_v7(cls, bb, inputs, attr, params):
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b, sequence_lens, initial_h = inputs[:6]
        layout = attr.get("layout", 0)
        if layout == 1:
            x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
        extent = x.ty.shape.values[0]
        # A sequence of run-time length L: unrolled to its largest value, each pass's step t
        # at position t (a reverse pass's at L - 1 - t). The states reach Y, Y_h and Y_c
        # only through builtins that read step t only when t < L, so the driver skips the
        # steps past L (``step_guards``).
        runtime_length = not hasattr(extent, "value")
        if runtime_length:
            if sequence_lens is not None or not isinstance(extent, tvm.tirx.Var):
                raise NotImplementedError(
                    f"{cls.__name__} over a sequence of run-time length with sequence_lens"
                )
            seq_len = (DIM_BOUNDS.get() or {}).get(extent.name)
            if seq_len is None:
                raise NotImplementedError(f"{cls.__name__} over a sequence of unknown length")
            batch = int(x.ty.shape.values[1])
        else:
            seq_len, batch, _ = _static_shape(x)
        if sequence_lens is not None:
            lengths = get_constant(sequence_lens, params)
            if not hasattr(lengths, "value") or np.any(lengths.value.numpy() != seq_len):
                raise NotImplementedError(f"{cls.__name__} with sequence_lens shorter than the sequence")
        hidden = int(attr["hidden_size"]) if "hidden_size" in attr else _static_shape(r)[-1]
        direction = attr.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        directions = 2 if direction == "bidirectional" else 1
        names = list(attr.get("activations", cls.default_activations * directions))
        alphas = list(attr.get("activation_alpha", ())) + [None] * len(names)
        betas = list(attr.get("activation_beta", ())) + [None] * len(names)
        per_direction = len(cls.default_activations)
        dtype = str(x.ty.dtype)

        # Emitted beside each step's cell, so a run at L skips the steps past it in one go.
        # One take kernel serves every step (the position is a tensor argument, clipped: the
        # steps past L do not run); a reverse pass's step t reads flip(x)[t] = x[L - 1 - t].
        flipped = bb.emit(relax.op.flip(x, axis=0)) if runtime_length and direction != "forward" else None

        def step_input(t, reverse):
            source = flipped if reverse else x
            return bb.emit(relax.op.take(source, relax.const(t, "int64"), axis=0, mode="clip"))

        def step_of(values, t):
            return bb.emit(relax.op.squeeze(relax.op.strided_slice(values, [0], [t], [t + 1]), [0]))

        passes, cell_passes, reversed_passes = [], [], []  # each pass's states, in its order
        for d in range(directions):
            reverse = direction == "reverse" or d == 1
            acts = [
                _activation(
                    names[d * per_direction + k], alphas[d * per_direction + k], betas[d * per_direction + k]
                )
                for k in range(per_direction)
            ]

            def pick(tensor, i=d):
                return bb.emit(relax.op.squeeze(relax.op.strided_slice(tensor, [0], [i], [i + 1]), [0]))

            bias = pick(b) if b is not None else relax.const(np.zeros(2 * cls.gates * hidden, dtype), dtype)
            input_bias, recurrent_bias = cls._split(bb, bias, 2)
            input_weights = bb.emit(relax.op.permute_dims(pick(w), [1, 0]))
            weights = {
                "RT": bb.emit(relax.op.permute_dims(pick(r), [1, 0])),
                "RB": recurrent_bias,
                "P": pick(inputs[7]) if len(inputs) > 7 and inputs[7] is not None and cls is LSTM else None,
            }
            weights = cls._pass_weights(bb, weights)
            # x W^T + Wb for every step at once (a run-time length: step by step, each step
            # reading its input through a clipped take, so the steps past it need not run)
            projected = (
                None
                if runtime_length
                else bb.emit(relax.op.add(relax.op.matmul(x, input_weights), input_bias))
            )
            zeros = relax.const(np.zeros((batch, hidden), dtype), dtype)
            h = pick(initial_h) if initial_h is not None else zeros
            c = None
            if cls is LSTM:
                c = pick(inputs[6]) if inputs[6] is not None else zeros
            order = list(reversed(range(seq_len))) if reverse and not runtime_length else list(range(seq_len))
            states, cell_states = [], []
            for t in order:
                if projected is not None:
                    x_part = step_of(projected, t)
                else:
                    x_part = bb.emit(
                        relax.op.add(relax.op.matmul(step_input(t, reverse), input_weights), input_bias)
                    )
                h, c = cls._cell(bb, x_part, (h, c), weights, acts, attr)
                states.append(h)
                cell_states.append(c)
            passes.append(states)
            cell_passes.append(cell_states)
            reversed_passes.append(reverse)
        if runtime_length:
            y = _stack_states(bb, passes, reversed_passes, extent)
            y_h = _last_states(bb, passes, extent)
            y_c = _last_states(bb, cell_passes, extent) if cls is LSTM else None
        else:  # in position order: a reverse pass's states turned around
            by_position = [
                states[::-1] if r else states for states, r in zip(passes, reversed_passes, strict=True)
            ]
            y = _stacked(bb, [_stacked(bb, s, 0) for s in by_position], 1)
            y_h = _stacked(bb, [states[-1] for states in passes], 0)
            y_c = _stacked(bb, [states[-1] for states in cell_passes], 0) if cls is LSTM else None
        if layout == 1:
            y = bb.emit(relax.op.permute_dims(y, [2, 0, 1, 3]))
            y_h = bb.emit(relax.op.permute_dims(y_h, [1, 0, 2]))
        results = [y, y_h]
        if y_c is not None:
            results.append(bb.emit(relax.op.permute_dims(y_c, [1, 0, 2])) if layout == 1 else y_c)
        return relax.Tuple(results)

    @staticmethod
    def _recurrent_part(h, weights):
        """h R^T + Rb."""
        return relax.op.add(relax.op.matmul(h, weights["RT"]), weights["RB"])

    @staticmethod
    def _clip(value, attr):
        limit = attr.get("clip")
        return relax.op.clip(value, -float(limit), float(limit)) if limit is not None else value

    @staticmethod
    def _split(bb, tensor, parts: int):
        return [
            bb.emit(relax.TupleGetItem(bb.emit(relax.op.split(tensor, parts, axis=-1)), i))
            for i in range(parts)
        ]


class RNN(_Recurrent):
    gates = 1
    default_activations = ("Tanh",)

    @classmethod
    def _cell(cls, bb, x_part, state, weights, acts, attr):
        h, _ = state
        pre = relax.op.add(x_part, cls._recurrent_part(h, weights))
        return bb.emit(acts[0](cls._clip(pre, attr))), None


class GRU(_Recurrent):
    gates = 3
    default_activations = ("Sigmoid", "Tanh")

    @classmethod
    def _pass_weights(cls, bb, weights):
        return {
            **weights,
            "R_parts": cls._split(bb, weights["RT"], 3),
            "RB_parts": cls._split(bb, weights["RB"], 3),
        }

    @classmethod
    def _cell(cls, bb, x_part, state, weights, acts, attr):
        h, _ = state
        f, g = acts
        r_z, r_r, r_h = weights["R_parts"]
        rb_z, rb_r, rb_h = weights["RB_parts"]
        x_z, x_r, x_h = cls._split(bb, x_part, 3)

        def gate(x_gate, r_part, rb, state_in):
            return relax.op.add(x_gate, relax.op.add(relax.op.matmul(state_in, r_part), rb))

        z = bb.emit(f(cls._clip(gate(x_z, r_z, rb_z, h), attr)))
        r = bb.emit(f(cls._clip(gate(x_r, r_r, rb_r, h), attr)))
        if attr.get("linear_before_reset", 0):
            recurrent = relax.op.multiply(r, relax.op.add(relax.op.matmul(h, r_h), rb_h))
            candidate = relax.op.add(x_h, recurrent)
        else:
            candidate = gate(x_h, r_h, rb_h, relax.op.multiply(r, h))
        h_tilde = bb.emit(g(cls._clip(candidate, attr)))
        one = _scalar(1.0, h)
        new_h = relax.op.add(relax.op.multiply(relax.op.subtract(one, z), h_tilde), relax.op.multiply(z, h))
        return bb.emit(new_h), None


class LSTM(_Recurrent):
    gates = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh")

    @classmethod
    def _cell(cls, bb, x_part, state, weights, acts, attr):
        h, c = state
        f, g, act_h = acts
        pre = relax.op.add(x_part, cls._recurrent_part(h, weights))
        i_pre, o_pre, f_pre, c_pre = cls._split(bb, bb.emit(pre), 4)  # ONNX gate order: i, o, f, c
        if weights["P"] is not None:
            p_i, p_o, p_f = cls._split(bb, weights["P"], 3)
            i_pre = relax.op.add(i_pre, relax.op.multiply(p_i, c))
            f_pre = relax.op.add(f_pre, relax.op.multiply(p_f, c))
        i = bb.emit(f(cls._clip(i_pre, attr)))
        forget = bb.emit(f(cls._clip(f_pre, attr)))
        if attr.get("input_forget", 0):
            forget = bb.emit(relax.op.subtract(_scalar(1.0, i), i))
        candidate = bb.emit(g(cls._clip(c_pre, attr)))
        new_c = bb.emit(relax.op.add(relax.op.multiply(forget, c), relax.op.multiply(i, candidate)))
        if weights["P"] is not None:
            o_pre = relax.op.add(o_pre, relax.op.multiply(p_o, new_c))
        o = bb.emit(f(cls._clip(o_pre, attr)))
        return bb.emit(relax.op.multiply(o, act_h(new_c))), new_c


class Attention(OnnxOpConverter):
    """ONNX's Attention (opset 23/24): 3D or 4D Q/K/V, grouped KV heads, boolean or additive
    masks (padded to the key length), causal masking offset by a past cache, softcap, the
    four ``qk_matmul_output_mode``s, and fully masked rows softmaxed to zero, as in ONNX's
    reference. Sliding windows and ``nonpad_kv_seqlen`` are left to ONNX's function body."""

    @staticmethod
    def declines(node: onnx.NodeProto) -> bool:
        windows = {a.name: a.i for a in node.attribute if a.name in ("left_window_size", "right_window_size")}
        return (len(node.input) > 6 and node.input[6] != "") or any(size >= 0 for size in windows.values())

    @classmethod
    def _impl_v23(cls, bb, inputs, attr, params):
        inputs = list(inputs) + [None] * (7 - len(inputs))
        q, k, v, mask, past_key, past_value, nonpad = inputs[:7]
        if (
            nonpad is not None
            or attr.get("left_window_size", -1) >= 0
            or attr.get("right_window_size", -1) >= 0
        ):
            raise NotImplementedError("Attention with nonpad_kv_seqlen or sliding windows is not supported")
        dtype = str(q.ty.dtype)
        rank = len(_static_shape(q))
        if rank == 3:
            q_heads, kv_heads = int(attr["q_num_heads"]), int(attr["kv_num_heads"])
            q, k, v = (cls._split_heads(bb, t, h) for t, h in ((q, q_heads), (k, kv_heads), (v, kv_heads)))
        q_heads, q_len, head_size = _static_shape(q)[1:]
        scale = attr.get("scale")
        scale = float(np.sqrt(scale if scale is not None else 1.0 / np.sqrt(head_size)))
        if past_key is not None:
            k = bb.emit(relax.op.concat([past_key, k], axis=2))
            v = bb.emit(relax.op.concat([past_value, v], axis=2))
        present_key, present_value = k, v
        kv_len = _static_shape(k)[2]
        past_len = _static_shape(past_key)[2] if past_key is not None else 0

        bias = cls._bias(bb, mask, dtype, q_len, kv_len, past_len, bool(attr.get("is_causal", 0)))
        kv_heads = _static_shape(k)[1]
        if kv_heads != q_heads:
            k = bb.emit(relax.op.repeat(k, q_heads // kv_heads, axis=1))
            v = bb.emit(relax.op.repeat(v, q_heads // kv_heads, axis=1))
        factor = relax.const(scale, dtype)
        scores = bb.emit(
            relax.op.matmul(
                relax.op.multiply(q, factor),
                relax.op.permute_dims(relax.op.multiply(k, factor), [0, 1, 3, 2]),
            )
        )
        softcap = attr.get("softcap")
        if softcap:
            cap = relax.const(float(softcap), dtype)
            scores = bb.emit(relax.op.multiply(relax.op.tanh(relax.op.divide(scores, cap)), cap))
        with_bias = bb.emit(relax.op.add(scores, bias)) if bias is not None else scores
        logits = with_bias
        precision = attr.get("softmax_precision")
        if precision is not None:
            logits = relax.op.astype(logits, onnx.helper.tensor_dtype_to_np_dtype(precision).name)
        probabilities = bb.emit(relax.op.astype(relax.op.nn.softmax(logits, axis=-1), dtype))
        if bias is not None:
            # A row whose keys are all masked has no attendable key: its probabilities are 0.
            # (Counted, not compared with a maximum: TVM starts a float16 maximum at -65504, so
            # a row of -inf had a maximum above -inf and kept its NaNs.)
            attendable = relax.op.astype(relax.op.not_equal(bias, relax.const(-np.inf, dtype)), "int32")
            all_masked = relax.op.equal(
                relax.op.sum(attendable, axis=[-1], keepdims=True), relax.const(0, "int32")
            )
            probabilities = bb.emit(relax.op.where(all_masked, relax.const(0.0, dtype), probabilities))
        y = bb.emit(relax.op.matmul(probabilities, v))
        if rank == 3:
            batch, heads, length, size = _static_shape(y)
            y = bb.emit(
                relax.op.reshape(relax.op.permute_dims(y, [0, 2, 1, 3]), [batch, length, heads * size])
            )
        mode = int(attr.get("qk_matmul_output_mode", 0))
        qk_output = {0: scores, 1: scores, 2: with_bias, 3: probabilities}[mode]
        return relax.Tuple([y, present_key, present_value, qk_output])

    @staticmethod
    def _split_heads(bb, tensor, heads: int):
        batch, length, hidden = _static_shape(tensor)
        shaped = relax.op.reshape(tensor, [batch, length, heads, hidden // heads])
        return bb.emit(relax.op.permute_dims(shaped, [0, 2, 1, 3]))

    @staticmethod
    def _bias(bb, mask, dtype, q_len, kv_len, past_len, causal):
        """The additive bias (0 = attend, -inf = masked), or None when there is none."""
        zero, minus_inf = relax.const(0.0, dtype), relax.const(-np.inf, dtype)
        bias = None
        if mask is not None:
            shape = _static_shape(mask)
            if shape[-1] < kv_len:
                fill = np.zeros if str(mask.ty.dtype) == "bool" else (lambda s, d: np.full(s, -np.inf, d))
                pad = relax.const(
                    fill((*shape[:-1], kv_len - shape[-1]), str(mask.ty.dtype)), str(mask.ty.dtype)
                )
                mask = bb.emit(relax.op.concat([mask, pad], axis=-1))
            bias = bb.emit(relax.op.where(mask, zero, minus_inf)) if str(mask.ty.dtype) == "bool" else mask
        if causal:
            allowed = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + past_len
            causal_bias = relax.const(np.where(allowed, 0.0, -np.inf).astype(dtype), dtype)
            bias = bb.emit(relax.op.add(bias, causal_bias)) if bias is not None else causal_bias
        return bias


class LpNormalization(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x = inputs[0]
        axis, p = int(attr.get("axis", -1)), int(attr.get("p", 2))
        if p == 1:
            norm = relax.op.sum(relax.op.abs(x), axis=[axis], keepdims=True)
        elif p == 2:
            norm = relax.op.sqrt(relax.op.sum(relax.op.multiply(x, x), axis=[axis], keepdims=True))
        else:
            raise NotImplementedError("LpNormalization supports p = 1 and p = 2")
        # A zero vector stays zero (ONNX's reference; 0 / 0 would be NaN)
        norm = bb.emit(norm)
        zero = relax.const(0, str(x.ty.dtype))
        return relax.op.where(relax.op.equal(norm, zero), zero, relax.op.divide(x, norm))


class OneHot(OnnxOpConverter):
    """TVM's OneHot passes ``depth`` and ``indices`` on as given, and fails when they are
    floats (ONNX allows any numeric type, cast to an integer): make them integers, then use
    TVM's converter."""

    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        indices, depth, values = inputs
        if "float" in str(indices.ty.dtype):
            indices = bb.emit(relax.op.astype(indices, "int64"))
        axis = attr.get("axis", -1)
        if axis < -1:  # TVM's lowering takes -1 only: counted from the output's rank
            attr = {**attr, "axis": axis + len(_static_shape(indices)) + 1}
        constant = get_constant(depth, params)
        if hasattr(constant, "value"):
            depth = relax.const(constant.value.numpy().astype("int64"), "int64")
        if hasattr(get_constant(values, params), "value"):
            return _theirs("OneHot", bb, [indices, depth, values], attr, params)
        # (off, on) given at run time: TVM's converter takes constants only; a 0/1 one-hot
        # picks between the two values.
        mask = bb.emit(
            _theirs("OneHot", bb, [indices, depth, relax.const(np.array([0, 1], "int8"))], attr, params)
        )
        off, on = (bb.emit(relax.op.take(values, relax.const(i, "int64"), axis=0)) for i in (0, 1))
        return relax.op.where(relax.op.equal(mask, relax.const(1, "int8")), on, off)


class _BoolReduction(OnnxOpConverter):
    """ReduceMax and ReduceMin of bool (opset 20) as ``any`` and ``all``, counted with
    ReduceSum: TVM's max and min have no identity for bool (nor a right one for an empty
    uint8 set). Any: some True; all: no False (True over an empty set, as ONNX's rule for the
    maximum of the type). Other types as TVM does."""

    op_name = ""
    counted = True  # the value whose presence decides the result: ReduceMax counts Trues

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        data, *rest = inputs
        if str(data.ty.dtype) != "bool":
            return _theirs(cls.op_name, bb, inputs, attr, params)
        hits = bb.emit(relax.op.equal(data, relax.const(cls.counted, "bool")))
        hits = bb.emit(relax.op.astype(hits, "int64"))
        count = bb.emit(_theirs("ReduceSum", bb, [hits, *rest], attr, params))
        found = relax.op.greater(count, relax.const(0, "int64"))
        return found if cls.counted else relax.op.logical_not(found)


class ReduceMax(_BoolReduction):
    op_name = "ReduceMax"


class ReduceMin(_BoolReduction):
    op_name = "ReduceMin"
    counted = False


class Split(OnnxOpConverter):
    """Parts of size 0 (ONNX allows them) repeat an index TVM's split needs strictly
    increasing: such a split becomes one slice per part. Others as TVM does."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        return cls._split(bb, inputs, attr, params, attr.get("split"))

    @classmethod
    def _impl_v13(cls, bb, inputs, attr, params):
        given = inputs[1] if len(inputs) > 1 else None
        return cls._split(bb, inputs, attr, params, _constant_value(given, params))

    @classmethod
    def _split(cls, bb, inputs, attr, params, sizes):
        if sizes is None or 0 not in [int(s) for s in np.asarray(sizes).reshape(-1)]:
            return _theirs("Split", bb, inputs, attr, params)
        data, axis = inputs[0], int(attr.get("axis", 0))
        starts = np.concatenate([[0], np.cumsum(np.asarray(sizes, "int64").reshape(-1))])
        parts = [
            bb.emit(relax.op.strided_slice(data, axes=[axis], begin=[int(b)], end=[int(e)]))
            for b, e in itertools.pairwise(starts)
        ]
        return relax.Tuple(parts)


class MaxUnpool(OnnxOpConverter):
    """A given ``output_shape`` as ONNX's reference (and its node tests) has it: the indices
    address the shape the pooling parameters infer, and the result is padded with zeros at
    the end of each axis up to the given shape. TVM's converter scattered into the given
    shape (index 5 of a 4 x 4 grid landed in row 1 of a 5 x 5 one at column 0, not 1)."""

    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        given = inputs[2] if len(inputs) > 2 else None
        unpooled = _theirs("MaxUnpool", bb, [inputs[0], inputs[1], None], attr, params)
        if given is None:
            return unpooled
        shape = _constant_value(given, params)
        if shape is None:
            raise NotImplementedError("MaxUnpool's output_shape must be a constant")
        inferred = _static_shape(bb.normalize(unpooled))
        extra = [int(s) - i for s, i in zip(shape.reshape(-1), inferred, strict=True)]
        if any(e < 0 for e in extra):
            raise NotImplementedError(f"MaxUnpool's output_shape {shape.tolist()} is smaller than {inferred}")
        if not any(extra):
            return unpooled
        widths = [w for e in extra for w in (0, e)]
        return relax.op.nn.pad(bb.emit(unpooled), widths)


class Reshape(OnnxOpConverter):
    """A constant target with ``allowzero`` and a 0 (an extent of 0, not a copy): TVM's
    converter makes it a shape computed at run time, and Relax's reshape reads a 0 as a copy.
    The result has no elements: an empty tensor of that static shape."""

    @classmethod
    def _impl_v5(cls, bb, inputs, attr, params):
        target = _constant_value(inputs[1], params)
        if attr.get("allowzero", 0) and target is not None and 0 in target.tolist():
            if 0 not in _static_shape(inputs[0]):
                raise ValueError(f"Reshape cannot give shape {target.tolist()} to a tensor with elements")
            return relax.op.zeros(relax.ShapeExpr([int(d) for d in target.reshape(-1)]), inputs[0].ty.dtype)
        return _theirs("Reshape", bb, inputs, attr, params)


class _Cumulative(OnnxOpConverter):
    """CumSum and CumProd, with ``exclusive`` and ``reverse``. A constant axis gives one scan;
    an axis given at run time (ONNX allows it) one scan per axis of the static rank, the one
    asked for picked by value (the output's shape is the same for every axis); an axis out
    of range stops the run with an error."""

    scan = staticmethod(relax.op.cumsum)

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        data, axis = inputs
        rank = len(_static_shape(data))
        constant = get_constant(axis, params)
        if hasattr(constant, "value"):
            return cls._along(bb, data, int(constant.value.numpy().reshape(-1)[0]) % rank, attr)
        # The axis read through a gather of [0, rank): index_checks makes the package check it
        # at run time (a negative one wrapped once, one still outside an error code).
        dtype = str(axis.ty.dtype)
        given = bb.emit(relax.op.reshape(axis, []))
        given = bb.emit(
            relax.op.where(
                relax.op.less(given, relax.const(0, dtype)),
                relax.op.add(given, relax.const(rank, dtype)),
                given,
            )
        )
        asked = bb.emit(relax.op.take(relax.const(np.arange(rank, dtype=dtype)), given, axis=0, mode="fast"))
        result = cls._along(bb, data, rank - 1, attr)
        for candidate in range(rank - 1):
            is_candidate = relax.op.equal(asked, relax.const(candidate, dtype))
            result = bb.emit(relax.op.where(is_candidate, cls._along(bb, data, candidate, attr), result))
        return result

    @classmethod
    def _along(cls, bb, data, axis: int, attr):
        reverse = bool(attr.get("reverse", 0))
        if reverse:
            data = bb.emit(relax.op.flip(data, axis))
        scanned = bb.emit(cls.scan(data, axis, exclusive=bool(attr.get("exclusive", 0))))
        return bb.emit(relax.op.flip(scanned, axis)) if reverse else scanned


class CumSum(_Cumulative):
    pass


class CumProd(_Cumulative):
    scan = staticmethod(relax.op.cumprod)


class Pow(OnnxOpConverter):
    """ONNX lets the exponent's type differ from the base's (the result has the base's), which
    TVM's converter refuses, and TVM's power takes floats only: an integer base is raised in
    float64 (exact below 2**53) and cast back, as ONNX's reference computes it; a float base
    takes the exponent in its own type."""

    @classmethod
    def _impl_v7(cls, bb, inputs, attr, params):
        base, exponent = inputs
        base_type, exponent_type = str(base.ty.dtype), str(exponent.ty.dtype)
        if not base_type.startswith(("int", "uint")) and base_type == exponent_type:
            return _theirs("Pow", bb, inputs, attr, params)
        if base_type.startswith(("int", "uint")):  # TVM's power takes floats only
            raised = relax.op.power(relax.op.astype(base, "float64"), relax.op.astype(exponent, "float64"))
            return relax.op.astype(raised, base_type)
        return relax.op.power(base, relax.op.astype(exponent, base_type))


class Einsum(OnnxOpConverter):
    """Relax's einsum operator, which the einsum-as-matmul rewrite can read (TVM's converter
    emits TE loops at once); the equation without the spaces exporters may put in it
    (MaxViT's "B G H I D, B G H J D -> B G H I J")."""

    @classmethod
    def _impl_v12(cls, bb, inputs, attr, params):
        equation = "".join(_attr_text(attr.get("equation"), "").split())
        return relax.op.einsum(relax.Tuple(list(inputs)), equation)


def _nll_loss(log_prob, target, weight, attr) -> relax.Expr:
    """ONNX's NegativeLogLikelihoodLoss on ``log_prob`` (N, C, d1..dk) and ``target`` (N, d1..dk)."""
    reduction = _attr_text(attr.get("reduction"), "mean")
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"unknown reduction {reduction!r}")
    dtype = log_prob.ty.dtype
    ignore_index = attr.get("ignore_index")
    if ignore_index is not None:
        kept = relax.op.not_equal(target, relax.const(int(ignore_index), target.ty.dtype))
        target = relax.op.where(kept, target, relax.op.zeros_like(target))
    picked = relax.op.gather_elements(log_prob, relax.op.expand_dims(target, 1), axis=1)
    loss = relax.op.negative(relax.op.squeeze(picked, [1]))
    if weight is not None:
        scale = relax.op.take(weight, target, axis=0)  # (N, d1..dk): the weight of each target's class
    else:
        scale = relax.op.ones_like(loss)
    if ignore_index is not None:
        scale = relax.op.multiply(scale, relax.op.astype(kept, dtype))
    if weight is not None or ignore_index is not None:
        loss = relax.op.multiply(loss, scale)
    if reduction == "none":
        return loss
    total = relax.op.sum(loss)
    if reduction == "sum":
        return total
    return relax.op.divide(total, relax.op.sum(scale))


class BitCast(OnnxOpConverter):
    """Reinterpret the bits as another type of the same width (TIR's ``reinterpret``)."""

    @classmethod
    def _impl_v26(cls, bb, inputs, attr, params):
        from tvm import topi

        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        target = ONNX_DTYPES.get(int(attr["to"]))
        if target is None:
            raise NotImplementedError(f"BitCast to ONNX type {attr['to']} is not supported")
        if "bool" in (target, str(inputs[0].ty.dtype)):  # a bool is the byte 0 or 1 (TIR: 1 bit)
            return relax.op.astype(inputs[0], target)
        return bb.call_te(topi.reinterpret, inputs[0], target, primfunc_name_hint="bitcast")


class Cast(OnnxOpConverter):
    """Casts from or to an 8-bit float type as integer arithmetic on its bits
    (``narrow_floats``); every other cast is TVM's."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        to = attr.get("to")
        target = ONNX_DTYPES.get(int(to)) if isinstance(to, int) else None  # Cast-1 named it: "FLOAT"
        narrow = _narrow_cast(bb, inputs[0], target, attr) if target is not None else None
        return narrow if narrow is not None else _theirs("Cast", bb, inputs, attr, params)


class CastLike(OnnxOpConverter):
    """CastLike as Cast to the second input's type."""

    @classmethod
    def _impl_v15(cls, bb, inputs, attr, params):
        target = onnx_sub_byte.input_type(1) or getattr(getattr(inputs[1], "ty", None), "dtype", None)
        narrow = _narrow_cast(bb, inputs[0], str(target), attr) if target is not None else None
        return narrow if narrow is not None else _theirs("CastLike", bb, inputs, attr, params)


def _narrow_cast(bb, data, target: str, attr) -> relax.Expr | None:
    """``data`` cast to ``target`` when either is an 8-bit float type or ``target`` is a
    sub-byte type, else None."""
    from relay2cmake.frontends import narrow_floats

    if target in onnx_sub_byte.CARRIERS:
        if str(data.ty.dtype) in narrow_floats.NARROW:
            data = _decoded(bb, data, "float32")
        return onnx_sub_byte.cast(bb, data, target)
    source = getattr(getattr(data, "ty", None), "dtype", None)
    if source is None or (str(source) not in narrow_floats.NARROW and target not in narrow_floats.NARROW):
        return None
    source = str(source)
    if source in narrow_floats.NARROW:
        source = target if target in ("float16", "float32", "float64") else "float32"
        data = _decoded(bb, data, source)
    if target not in narrow_floats.NARROW:
        return data if source == target else relax.op.astype(data, target)
    if not source.startswith(("float", "bfloat")):
        data = bb.emit(relax.op.astype(data, "float32"))
    saturate = bool(attr.get("saturate", 1))
    round_mode = _attr_text(attr.get("round_mode"), "up")
    return bb.emit_te(
        narrow_floats.encode, data, target, saturate, round_mode, primfunc_name_hint="encode_float8"
    )


class BitShift(OnnxOpConverter):
    """A shift by a negative amount or by the width or more (undefined behaviour in C and
    LLVM: TVM's kernels returned whatever the CPU made of it) gives what ONNX says: 0 to the
    left, the sign's fill to the right; a left shift is done on the bits as unsigned (C leaves
    shifting a negative value undefined)."""

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        from tvm import topi

        data, amount = inputs
        dtype = str(data.ty.dtype)
        width = np.dtype(dtype).itemsize * 8
        signed = dtype.startswith("int")
        amount = bb.emit(relax.op.astype(amount, dtype)) if str(amount.ty.dtype) != dtype else amount
        in_range = bb.emit(
            relax.op.logical_and(
                relax.op.greater_equal(amount, relax.const(0, dtype)),
                relax.op.less(amount, relax.const(width, dtype)),
            )
        )
        safe = bb.emit(relax.op.where(in_range, amount, relax.const(0, dtype)))
        if _attr_text(attr.get("direction"), "LEFT") == "LEFT":
            bits = f"uint{width}"
            raw = bb.emit_te(topi.reinterpret, data, bits) if signed else data
            moved = bb.emit(relax.op.left_shift(raw, relax.op.astype(safe, bits) if signed else safe))
            shifted = bb.emit_te(topi.reinterpret, moved, dtype) if signed else moved
            return relax.op.where(in_range, shifted, relax.const(0, dtype))
        shifted = bb.emit(relax.op.right_shift(data, safe))
        outside = (
            relax.op.right_shift(data, relax.const(width - 1, dtype)) if signed else relax.const(0, dtype)
        )
        return relax.op.where(in_range, shifted, outside)


class IsInf(OnnxOpConverter):
    """IsInf with ``detect_positive`` / ``detect_negative`` (TVM's converter ignores them)."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        data = inputs[0]
        found = bb.emit(relax.op.isinf(data))
        zero = relax.const(0, str(data.ty.dtype))
        positive, negative = int(attr.get("detect_positive", 1)), int(attr.get("detect_negative", 1))
        if positive and negative:
            return found
        if positive:
            return relax.op.logical_and(found, relax.op.greater(data, zero))
        if negative:
            return relax.op.logical_and(found, relax.op.less(data, zero))
        return relax.op.logical_and(found, relax.const(False))


class Mod(OnnxOpConverter):
    """Float Mod with ``fmod`` = 0 as C's fmod moved into the divisor's sign (x - floor(x/y)*y,
    TVM's, is NaN for a finite x over an infinite y, where ONNX and NumPy give x or y);
    everything else TVM's."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        x, y = inputs
        dtype = str(getattr(getattr(x, "ty", None), "dtype", ""))
        if int(attr.get("fmod", 0)) or not dtype.startswith("float") or not isinstance(y, relax.Expr):
            return _theirs("Mod", bb, inputs, attr, params)
        remainder = bb.emit(relax.op.mod(x, y))  # C's fmod: the dividend's sign
        zero = relax.const(0, dtype)
        differs = relax.op.logical_and(
            relax.op.not_equal(remainder, zero),
            relax.op.logical_xor(relax.op.less(remainder, zero), relax.op.less(y, zero)),
        )
        return relax.op.where(differs, relax.op.add(remainder, y), remainder)


class SpaceToDepth(OnnxOpConverter):
    """SpaceToDepth with ``mode`` (opset 26: CRD orders the output channels channel first)."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        block = int(attr["blocksize"])
        n, c, h, w = inputs[0].ty.shape
        x = relax.op.reshape(inputs[0], (n, c, h // block, block, w // block, block))
        crd = _attr_text(attr.get("mode"), "DCR") == "CRD"
        x = relax.op.permute_dims(x, [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
        return relax.op.reshape(x, (n, c * block * block, h // block, w // block))


class Constant(OnnxOpConverter):
    """Constant with any of its value attributes (TVM's reads ``value`` only: function bodies
    such as SwiGLU's and the window functions' use ``value_float`` / ``value_int``)."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        # The type given explicitly: relax.const makes an int64 array's values int32 otherwise.
        for name, dtype in (("value_float", "float32"), ("value_int", "int64")):
            if name in attr:
                return relax.const(np.asarray(attr[name], dtype=dtype), dtype)
        for name, dtype in (("value_floats", "float32"), ("value_ints", "int64")):
            if name in attr:
                return relax.const(np.asarray(list(attr[name]), dtype=dtype).reshape(-1), dtype)
        value = attr.get("value")
        if isinstance(value, onnx.TensorProto):
            array = numpy_helper.to_array(value)
            if array.dtype.name in onnx_sub_byte.CARRIERS:
                return relax.const(onnx_sub_byte.carrier_array(array))
        return _theirs("Constant", bb, inputs, attr, params)


class Elu(OnnxOpConverter):
    """Elu in the input's own type (TVM's mixes in float32 constants, which Relax refuses for
    float16 and bfloat16 inputs; Celu's body is an Elu)."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x = inputs[0]
        alpha = _scalar(float(attr.get("alpha", 1.0)), x)
        negative = relax.op.multiply(alpha, relax.op.subtract(relax.op.exp(x), _scalar(1.0, x)))
        return relax.op.where(relax.op.greater(x, _scalar(0.0, x)), x, negative)


class RMSNormalization(OnnxOpConverter):
    """x / sqrt(mean(x^2 over the axes from ``axis`` on) + epsilon) * scale, computed in
    ``stash_type`` (TVM's converter failed to lower for axis 0)."""

    @classmethod
    def _impl_v23(cls, bb, inputs, attr, params):
        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        x, scale = inputs[0], inputs[1]
        dtype = str(x.ty.dtype)
        rank = len(x.ty.shape.values)
        axis = int(attr.get("axis", -1))
        axis = axis + rank if axis < 0 else axis
        stash = ONNX_DTYPES.get(int(attr.get("stash_type", 1)), "float32")
        wide = bb.emit(relax.op.astype(x, stash)) if stash != dtype else x
        mean = relax.op.mean(relax.op.multiply(wide, wide), axis=list(range(axis, rank)), keepdims=True)
        epsilon = relax.const(float(attr.get("epsilon", 1e-5)), stash)
        normal = relax.op.divide(wide, relax.op.sqrt(relax.op.add(mean, epsilon)))
        normal = bb.emit(relax.op.astype(normal, dtype)) if stash != dtype else normal
        return relax.op.multiply(normal, scale)


class EyeLike(OnnxOpConverter):
    """EyeLike with an output ``dtype`` other than the input's (TVM's refuses it)."""

    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        rows, columns = (int(d) for d in inputs[0].ty.shape.values)
        dtype = ONNX_DTYPES[int(attr["dtype"])] if "dtype" in attr else str(inputs[0].ty.dtype)
        eye = np.eye(rows, columns, int(attr.get("k", 0)))
        return relax.const(eye.astype(numpy_dtype(dtype)), dtype)


def _along_axis(bb, parameter, like, axis: int):
    """A per-axis quantization parameter (1-D, one value per index of ``axis``) shaped to
    broadcast against ``like``; a scalar or 1-element one as it is."""
    shape = [int(d) for d in parameter.ty.shape.values]
    if len(shape) != 1 or shape[0] == 1:
        return parameter
    rank = len(like.ty.shape.values)
    axis = axis + rank if axis < 0 else axis
    return bb.emit(relax.op.reshape(parameter, [1] * axis + shape + [1] * (rank - axis - 1)))


def _in_blocks(bb, parameter, like, axis: int, block: int):
    """A blocked quantization parameter (one value per ``block`` indices of ``axis``)
    repeated to ``like``'s extent along that axis."""
    rank = len(like.ty.shape.values)
    axis = axis + rank if axis < 0 else axis
    extent = int(like.ty.shape.values[axis])
    repeated = bb.emit(relax.op.repeat(parameter, block, axis=axis))
    if int(repeated.ty.shape.values[axis]) != extent:  # the last block is partial
        repeated = bb.emit(relax.op.strided_slice(repeated, axes=[axis], begin=[0], end=[extent]))
    return repeated


def _parameter(bb, parameter, like, axis: int, block: int):
    """A quantization parameter's float32 values shaped to broadcast against ``like``: per
    block of ``axis`` (blocked quantization), per index of it, or one for all."""
    values = _float32_values(bb, parameter)
    return _in_blocks(bb, values, like, axis, block) if block else _along_axis(bb, values, like, axis)


def _float32_values(bb, tensor):
    """A tensor's values as float32 (an 8-bit float's decoded)."""
    from relay2cmake.frontends import narrow_floats

    dtype = str(tensor.ty.dtype)
    if dtype in narrow_floats.NARROW:
        return _decoded(bb, tensor, "float32")
    return tensor if dtype == "float32" else bb.emit(relax.op.astype(tensor, "float32"))


def _decoded(bb, tensor, dtype: str):
    """The values of an 8-bit float tensor as ``dtype`` (a look-up in the table of its 256 codes)."""
    from relay2cmake.frontends import narrow_floats

    table = relax.const(narrow_floats.values_table(str(tensor.ty.dtype)))
    return bb.emit_te(narrow_floats.decode, tensor, table, dtype, primfunc_name_hint="decode_float8")


class DequantizeLinear(OnnxOpConverter):
    """8-bit float inputs (FLOAT8E4M3FN, E5M2, ...): (x - zero point) * scale in float32, in
    the scale's type (TVM's takes integer types only); the rest TVM's."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        from relay2cmake.frontends import narrow_floats
        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        x, scale = inputs[0], inputs[1]
        zero_point = inputs[2] if len(inputs) > 2 else None
        block = int(attr.get("block_size", 0))
        sub_byte = onnx_sub_byte.input_type(0) is not None  # carried as int8/uint8/float32
        if str(x.ty.dtype) not in narrow_floats.NARROW and not block and not sub_byte:
            return _theirs("DequantizeLinear", bb, inputs, attr, params)
        axis = int(attr.get("axis", 1))

        value = _float32_values(bb, x)
        chosen = None
        if zero_point is not None and str(zero_point.ty.dtype) in narrow_floats.NARROW:
            chosen = _zero_float8_zero_point(bb, zero_point, params, "DequantizeLinear")
        elif zero_point is not None:
            value = bb.emit(relax.op.subtract(value, _parameter(bb, zero_point, x, axis, block)))
        result = bb.emit(relax.op.multiply(value, _parameter(bb, scale, x, axis, block)))
        dtype = ONNX_DTYPES.get(int(attr.get("output_dtype", 0)), str(scale.ty.dtype))
        if dtype != "float32":
            result = bb.emit(relax.op.astype(result, dtype))
        return result if chosen is None else onnx_settled.kept_if_chosen(bb, result, chosen)


def _zero_float8_zero_point(bb, zero_point, params, op_name: str):
    """An 8-bit float zero point must be zero (ONNX's reference refuses any other in
    DequantizeLinear and ignores it in QuantizeLinear): a constant one is checked now, one
    given at run time by the package (the returned guard, for ``kept_if_chosen``; None for a
    constant). Either way it takes no part in the computation."""
    constant = _constant_value(zero_point, params)
    if constant is not None:
        if np.any(constant.astype(np.float32) != 0):
            raise ValueError(f"{op_name}: an 8-bit float zero point must be 0")
        return None
    values = _float32_values(bb, zero_point)
    nonzero = relax.op.astype(relax.op.not_equal(values, relax.const(0.0, "float32")), "int64")
    count = bb.emit(relax.op.reshape(relax.op.sum(nonzero), [1]))
    onnx_settled.accept(zero_point, np.zeros(_static_shape(zero_point), "float32"))
    site = f"{op_name} reads an 8-bit float zero point{onnx_settled.given_from(zero_point)} that is not 0"
    return onnx_settled.guard(bb, count, [[0]], [0], site)


class QuantizeLinear(OnnxOpConverter):
    """To an 8-bit float type (its zero point's, or ``output_dtype``): x / scale + zero point
    in float32, rounded to the nearest even and saturated unless ``saturate`` = 0."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        from relay2cmake.frontends import narrow_floats
        from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

        x, scale = inputs[0], inputs[1]
        zero_point = inputs[2] if len(inputs) > 2 else None
        target = str(zero_point.ty.dtype) if zero_point is not None else "uint8"
        target = onnx_sub_byte.input_type(2) or target
        if int(attr.get("output_dtype", 0)):
            target = ONNX_DTYPES.get(int(attr["output_dtype"]), target)
        block = int(attr.get("block_size", 0))
        sub_byte = target in onnx_sub_byte.CARRIERS
        if target not in narrow_floats.NARROW and not block and not sub_byte:
            return _theirs("QuantizeLinear", bb, inputs, attr, params)
        axis = int(attr.get("axis", 1))

        value = bb.emit(relax.op.divide(_float32_values(bb, x), _parameter(bb, scale, x, axis, block)))
        if target not in narrow_floats.NARROW and target != onnx_sub_byte.FLOAT4:  # rounded to even
            value = relax.op.round(value)
        if zero_point is not None and target in narrow_floats.NARROW:
            chosen = _zero_float8_zero_point(bb, zero_point, params, "QuantizeLinear")
            saturate = bool(attr.get("saturate", 1))
            encoded = bb.emit_te(
                narrow_floats.encode, value, target, saturate, "up", primfunc_name_hint="encode_float8"
            )
            return encoded if chosen is None else onnx_settled.kept_if_chosen(bb, encoded, chosen)
        if zero_point is not None:
            value = bb.emit(relax.op.add(value, _parameter(bb, zero_point, x, axis, block)))
        if sub_byte:
            return onnx_sub_byte.quantized(bb, value, target)
        if target in narrow_floats.NARROW:
            saturate = bool(attr.get("saturate", 1))
            return bb.emit_te(
                narrow_floats.encode, value, target, saturate, "up", primfunc_name_hint="encode_float8"
            )
        limits = np.iinfo(np.dtype(target))
        return relax.op.astype(relax.op.clip(value, float(limits.min), float(limits.max)), target)


class BatchNormalization(OnnxOpConverter):
    """``training_mode`` = 1: normalized by the batch's own statistics, and the running mean and
    variance updated as ``running * momentum + batch * (1 - momentum)`` (TVM's converter
    weighted them the other way round); inference mode is TVM's."""

    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        if not int(attr.get("training_mode", 0)):
            return _theirs("BatchNormalization", bb, inputs, attr, params)
        x, scale, bias, mean, var = inputs[:5]
        rank = len(x.ty.shape.values)
        axes = [0, *range(2, rank)]
        channel = [1, -1] + [1] * (rank - 2)
        batch_mean = bb.emit(relax.op.mean(x, axis=axes, keepdims=True))
        centred = bb.emit(relax.op.subtract(x, batch_mean))
        batch_var = bb.emit(relax.op.mean(relax.op.multiply(centred, centred), axis=axes, keepdims=True))
        epsilon = _scalar(float(attr.get("epsilon", 1e-5)), x)
        normal = relax.op.divide(centred, relax.op.sqrt(relax.op.add(batch_var, epsilon)))
        y = relax.op.add(
            relax.op.multiply(normal, relax.op.reshape(scale, channel)), relax.op.reshape(bias, channel)
        )
        momentum = float(attr.get("momentum", 0.9))

        def running(old, batch):
            kept = relax.op.multiply(old, _scalar(momentum, old))
            added = relax.op.multiply(relax.op.reshape(batch, [-1]), _scalar(1 - momentum, old))
            return relax.op.add(kept, added)

        return relax.Tuple([bb.emit(y), bb.emit(running(mean, batch_mean)), bb.emit(running(var, batch_var))])


class DFT(OnnxOpConverter):
    """The discrete Fourier transform along one axis as products with constant cosine and sine
    matrices (a signal of static length: one matmul per part), forward or inverse, one-sided
    (real input: the first N/2 + 1 frequencies; inverse: a real signal from them)."""

    @classmethod
    def _impl_v17(cls, bb, inputs, attr, params):
        return cls._dft(bb, inputs, int(attr.get("axis", 1)), attr)

    @classmethod
    def _impl_v20(cls, bb, inputs, attr, params):
        axis = get_constant(inputs[2], params) if len(inputs) > 2 and inputs[2] is not None else None
        if axis is not None and not hasattr(axis, "value"):
            raise NotImplementedError("DFT's axis must be a constant (freeze input 'axis')")
        value = -2 if axis is None else int(axis.value.numpy().reshape(-1)[0])
        return cls._dft(bb, inputs, value, attr)

    @classmethod
    def _dft(cls, bb, inputs, axis: int, attr):
        x, params_length = inputs[0], inputs[1] if len(inputs) > 1 else None
        shape = _static_shape(x)
        rank, dtype = len(shape), str(x.ty.dtype)
        axis = axis + rank if axis < 0 else axis
        inverse, onesided = bool(attr.get("inverse", 0)), bool(attr.get("onesided", 0))
        length = None
        if params_length is not None:
            if not isinstance(params_length, tvm.ir.GenericConst):
                raise NotImplementedError("DFT's dft_length must be a constant (freeze input 'dft_length')")
            length = int(params_length.value.numpy().reshape(-1)[0])
        parts = [bb.emit(relax.op.squeeze(relax.op.strided_slice(x, [rank - 1], [i], [i + 1]), [rank - 1]))
                 for i in range(shape[-1])]  # fmt: skip
        given = shape[axis]
        signal = length if length is not None else (2 * (given - 1) if inverse and onesided else given)
        rows = given if inverse and onesided else signal
        if not (inverse and onesided) and rows != given:  # zero-padded or truncated to dft_length
            parts = [_resized(bb, p, axis, rows) for p in parts]
        order = [d for d in range(rank - 1) if d != axis] + [axis]
        back = np.argsort(order).tolist()
        parts = [bb.emit(relax.op.permute_dims(p, order)) for p in parts]
        real, imag = parts[0], (parts[1] if len(parts) > 1 else None)
        columns = signal // 2 + 1 if onesided and not inverse else signal
        angle = 2 * np.pi * np.outer(np.arange(rows), np.arange(columns)) / signal
        cos, sin = np.cos(angle), np.sin(angle)
        if inverse:
            weight = np.ones(rows)
            if onesided:  # the missing half: conjugates of frequencies 1 .. N/2 - 1
                weight[1 : (signal + 1) // 2] = 2
            cos, sin = cos * weight[:, None] / signal, sin * weight[:, None] / signal

        def product(data, matrix):
            return bb.emit(relax.op.matmul(data, relax.const(matrix.astype(dtype))))

        if inverse:
            out_real = (
                product(real, cos)
                if imag is None
                else bb.emit(relax.op.subtract(product(real, cos), product(imag, sin)))
            )
            out_imag = (
                None
                if onesided
                else (
                    product(real, sin)
                    if imag is None
                    else bb.emit(relax.op.add(product(imag, cos), product(real, sin)))
                )
            )
        else:
            out_real = (
                product(real, cos)
                if imag is None
                else bb.emit(relax.op.add(product(real, cos), product(imag, sin)))
            )
            negative = bb.emit(relax.op.negative(product(real, sin)))
            out_imag = negative if imag is None else bb.emit(relax.op.add(product(imag, cos), negative))
        results = [r for r in (out_real, out_imag) if r is not None]
        results = [bb.emit(relax.op.expand_dims(relax.op.permute_dims(r, back), rank - 1)) for r in results]
        return results[0] if len(results) == 1 else relax.op.concat(results, axis=rank - 1)


class STFT(OnnxOpConverter):
    """Frames of the signal (a gather of constant positions), times the window, each through
    ``DFT`` along the frame. A frame step or frame length given at run time is settled by the
    declared output (its frame count and bins): every (length, step) pair that gives them is
    converted, and the package picks the one the tensors hold (``onnx_settled.guard``; any other
    stops the run). A step above signal - length gives one frame whatever it is."""

    @classmethod
    def _impl_v17(cls, bb, inputs, attr, params):
        signal, step = inputs[0], inputs[1]
        window = inputs[2] if len(inputs) > 2 else None
        frame_length = inputs[3] if len(inputs) > 3 else None
        length = _static_shape(signal)[1]
        onesided = int(attr.get("onesided", 1))
        steps = cls._given(step, params)
        widths = given_width = cls._given(frame_length, params)
        if window is not None:
            widths = [_static_shape(window)[0]] if widths is None else widths
        declared = onnx_settled.declared_output()
        if steps is not None and widths is not None:
            return cls._transformed(bb, signal, window, widths[0], steps[0], onesided)
        if declared is None or len(declared) != 4:
            raise NotImplementedError("STFT's frame_step and frame_length must be constants (freeze them)")
        frames, bins = declared[1], declared[2]
        if widths is None:
            widths = [2 * (bins - 1), 2 * bins - 1] if onesided else [bins]
        pairs = []  # (width, step) that give the declared frames; step capped at length + 1
        for width in (w for w in widths if 0 < w <= length):
            for candidate in steps or range(1, length + 2):
                if (length - width) // candidate + 1 == frames:
                    pairs.append((width, candidate))
        if not pairs:
            raise NotImplementedError(
                f"no STFT frame step or length gives the declared shape {list(declared)}"
            )
        # the run-time tensors the package compares (a length given with the window is checked too)
        given = [(frame_length, 0)] if given_width is None and frame_length is not None else []
        given += [(step, 1)] if steps is None else []
        normal = bb.emit(
            relax.op.concat(
                [cls._clamped(bb, tensor, length + 1 if slot else None) for tensor, slot in given], axis=0
            )
        )
        rows = [[pair[slot] for _, slot in given] for pair in pairs]
        # pairs with one frame compute the same whatever the step: one variant for them
        keys = [(w, s if frames > 1 else 0) for w, s in pairs]
        distinct = sorted(set(keys), key=keys.index)
        results = [cls._transformed(bb, signal, window, w, s or 1, onesided) for w, s in distinct]
        for tensor, slot in given:
            onnx_settled.accept(tensor, pairs[0][slot])
        site = (
            f"STFT reads its frame step or length at run time; this package was generated for the output "
            f"shape {list(declared)} the model declares, which only (frame_length, frame_step) in "
            f"{pairs[:8]}{' ...' if len(pairs) > 8 else ''} give"
        )
        chosen = onnx_settled.guard(bb, normal, rows, [distinct.index(k) for k in keys], site)
        return onnx_settled.chosen_result(bb, results, chosen)

    @staticmethod
    def _given(tensor, params) -> list[int] | None:
        value = _constant_value(tensor, params)
        return None if value is None else [int(value.reshape(-1)[0])]

    @staticmethod
    def _clamped(bb, tensor, cap: int | None):
        """A scalar parameter as int64 [1], capped (a huge step is one frame, as is the cap)."""
        value = bb.emit(relax.op.reshape(bb.emit(relax.op.astype(tensor, "int64")), [1]))
        return value if cap is None else bb.emit(relax.op.minimum(value, relax.const(cap, "int64")))

    @staticmethod
    def _transformed(bb, signal, window, width: int, step: int, onesided: int):
        length = _static_shape(signal)[1]
        frames = (length - width) // step + 1
        positions = np.arange(frames)[:, None] * step + np.arange(width)[None, :]
        framed = bb.emit(relax.op.take(signal, relax.const(positions.astype("int64")), axis=1))
        if window is not None:
            framed = bb.emit(relax.op.multiply(framed, relax.op.reshape(window, [1, 1, width, 1])))
        return bb.normalize(DFT._dft(bb, [framed, None], 2, {"onesided": onesided}))


class ReverseSequence(OnnxOpConverter):
    """Each batch entry's first ``sequence_lens[b]`` steps reversed: a GatherElements along
    the time axis, whose positions the package checks at run time (a length beyond the
    sequence is an error code)."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        data, lengths = inputs
        shape = _static_shape(data)
        time_axis, batch_axis = int(attr.get("time_axis", 0)), int(attr.get("batch_axis", 1))
        steps = shape[time_axis]
        pair = [1, 1]
        pair[time_axis] = steps
        step = relax.const(np.arange(steps).reshape(pair), "int64")
        pair = [1, 1]
        pair[batch_axis] = shape[batch_axis]
        length = bb.emit(relax.op.reshape(relax.op.astype(lengths, "int64"), pair))
        reversed_step = relax.op.subtract(relax.op.subtract(length, relax.const(1, "int64")), step)
        positions = bb.emit(relax.op.where(relax.op.less(step, length), reversed_step, step))
        positions = relax.op.reshape(positions, [shape[0], shape[1]] + [1] * (len(shape) - 2))
        positions = bb.emit(relax.op.broadcast_to(positions, shape))
        return relax.op.gather_elements(data, positions, axis=time_axis)


class TensorScatter(OnnxOpConverter):
    """A KV cache's update written at each batch entry's position (``write_indices``, 0 when
    absent) along the sequence axis, wrapping in ``circular`` mode: a ScatterElements, whose
    positions the package checks at run time."""

    @classmethod
    def _impl_v24(cls, bb, inputs, attr, params):
        cache, update = inputs[0], inputs[1]
        starts = inputs[2] if len(inputs) > 2 else None
        shape, rows = _static_shape(cache), _static_shape(update)
        axis = int(attr.get("axis", -2))
        axis = axis + len(shape) if axis < 0 else axis
        steps = [1] * len(rows)
        steps[axis] = rows[axis]
        step = relax.const(np.arange(rows[axis]).reshape(steps), "int64")
        if starts is None:
            positions = step
        else:
            batch = [1] * len(rows)
            batch[0] = rows[0]
            start = relax.op.reshape(relax.op.astype(starts, "int64"), batch)
            positions = bb.emit(relax.op.add(start, step))
        if _attr_text(attr.get("mode"), "linear") == "circular":
            positions = bb.emit(relax.op.floor_mod(positions, relax.const(shape[axis], "int64")))
        positions = bb.emit(relax.op.broadcast_to(positions, rows))
        return relax.op.scatter_elements(cache, positions, update, axis=axis)


def _resized(bb, data, axis: int, length: int):
    """``data`` cut or zero-padded to ``length`` along ``axis``."""
    shape = _static_shape(data)
    if shape[axis] > length:
        return bb.emit(relax.op.strided_slice(data, [axis], [0], [length]))
    pad = [0] * (2 * len(shape))
    pad[2 * axis + 1] = length - shape[axis]
    return bb.emit(relax.op.nn.pad(data, pad))


class Clip(OnnxOpConverter):
    """TVM's Clip, emitted as Relax ``maximum``/``minimum`` instead of TE calls: Relax ops stay
    visible to layout conversion (convolutions in NHWC), which a ``call_tir`` blocks."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        results = inputs[0]
        low, high = float(attr.get("min", -np.inf)), float(attr.get("max", np.inf))
        results = relax.op.maximum(results, _scalar(low, results))
        return relax.op.minimum(bb.normalize(results), _scalar(high, results))

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        results = inputs[0]
        tvm_clip = _get_convert_map()["Clip"]
        for bound, op, for_min in ((1, relax.op.maximum, True), (2, relax.op.minimum, False)):
            if len(inputs) > bound and inputs[bound] is not None:
                limit = tvm_clip._sanitize_nan_clip_bound(bb, inputs[bound], for_min=for_min)
                results = bb.normalize(op(results, limit))
        return results


class Dropout(OnnxOpConverter):
    """Inference Dropout: the input itself, and an all-true mask (bool from opset 10, the
    input's type before). TVM's converter emits ``R.nn.dropout``, a tuple-valued call that
    layout conversion cannot pass (classic CNNs keep the mask output), with a float mask."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        return cls._passthrough(bb, inputs[0], None)

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        return cls._passthrough(bb, inputs[0], "bool")

    @classmethod
    def _impl_v12(cls, bb, inputs, attr, params):
        """Training mode (a run-time or true ``training_mode``) with a ``seed``: the mask is
        NumPy's ``RandomState(seed).uniform(0, 1, shape) >= ratio``, as ONNX's reference draws
        it, the uniform numbers fixed at generation time and compared with the ratio at run
        time; kept values scaled by 1 / (1 - ratio). Without a seed no package can repeat the
        reference's random draw: refused, unless training is constantly off."""
        data = inputs[0]
        ratio = inputs[1] if len(inputs) > 1 else None
        training = inputs[2] if len(inputs) > 2 else None
        training_value = _constant_value(training, params) if training is not None else np.array(False)
        if training_value is not None and not bool(np.asarray(training_value).reshape(-1)[0]):
            return cls._passthrough(bb, data, "bool")
        if "seed" not in attr:
            raise NotImplementedError(
                "Dropout in training mode draws random numbers and has no seed attribute; freeze "
                "training_mode to false (--constant-input) or give the node a seed"
            )
        dtype = str(data.ty.dtype)
        shape = _static_shape(data)
        uniform = np.random.RandomState(int(attr["seed"])).uniform(0, 1.0, shape)
        if ratio is None:
            ratio = relax.const(np.asarray(0.5, dtype=dtype), dtype)
        ratio = bb.emit(relax.op.reshape(ratio, []))
        keep = bb.emit(
            relax.op.greater_equal(relax.const(uniform, "float64"), relax.op.astype(ratio, "float64"))
        )
        one = relax.const(np.asarray(1.0, dtype=dtype), dtype)
        scale = relax.op.divide(one, relax.op.subtract(one, relax.op.astype(ratio, dtype)))
        dropped = relax.op.multiply(relax.op.multiply(data, relax.op.astype(keep, dtype)), scale)
        if training is None:
            return relax.Tuple([bb.emit(dropped), keep])
        on = bb.emit(relax.op.reshape(relax.op.astype(training, "bool"), []))
        result = bb.emit(relax.op.where(on, dropped, data))
        mask = bb.emit(relax.op.logical_or(keep, relax.op.logical_not(on)))
        return relax.Tuple([result, mask])

    @staticmethod
    def _passthrough(bb, data, mask_dtype):
        return relax.Tuple([data, bb.normalize(relax.op.ones_like(data, mask_dtype))])


class NegativeLogLikelihoodLoss(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, bb, inputs, attr, params):
        weight = inputs[2] if len(inputs) > 2 else None
        return _nll_loss(inputs[0], inputs[1], weight, attr)


class SoftmaxCrossEntropyLoss(OnnxOpConverter):
    @classmethod
    def _impl_v12(cls, bb, inputs, attr, params):
        scores, labels = inputs[0], inputs[1]
        weight = inputs[2] if len(inputs) > 2 else None
        log_prob = bb.emit(relax.op.nn.log_softmax(scores, axis=1))
        loss = bb.emit(_nll_loss(log_prob, labels, weight, attr))
        return relax.Tuple([loss, log_prob])


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    **onnx_given_parameters.CONVERTERS,
    **onnx_training.CONVERTERS,
    **onnx_pooling.CONVERTERS,
    **onnx_resize.CONVERTERS,
    **onnx_quantized.CONVERTERS,
    **onnx_deform_conv.CONVERTERS,
    **onnx_determinant.CONVERTERS,
    **onnx_ml.CONVERTERS,
    **onnx_tfidf.CONVERTERS,
    **onnx_windows.CONVERTERS,
    **onnx_mel_weights.CONVERTERS,
    **onnx_roi_align.CONVERTERS,
    **onnx_conv_transpose.CONVERTERS,
    **onnx_ms_quantized.CONVERTERS,
    "BatchNormalization": BatchNormalization,
    "BitCast": BitCast,
    "BitShift": BitShift,
    "Cast": Cast,
    "CastLike": CastLike,
    "Constant": Constant,
    "DequantizeLinear": DequantizeLinear,
    "DFT": DFT,
    "Elu": Elu,
    "EyeLike": EyeLike,
    "QuantizeLinear": QuantizeLinear,
    "ReverseSequence": ReverseSequence,
    "RMSNormalization": RMSNormalization,
    "STFT": STFT,
    "TensorScatter": TensorScatter,
    "IsInf": IsInf,
    "Mod": Mod,
    "SpaceToDepth": SpaceToDepth,
    "Clip": Clip,
    "Dropout": Dropout,
    "NegativeLogLikelihoodLoss": NegativeLogLikelihoodLoss,
    "SoftmaxCrossEntropyLoss": SoftmaxCrossEntropyLoss,
    "OneHot": OneHot,
    "Split": Split,
    "Reshape": Reshape,
    "MaxUnpool": MaxUnpool,
    "ReduceMax": ReduceMax,
    "ReduceMin": ReduceMin,
    "CumSum": CumSum,
    "CumProd": CumProd,
    "Pow": Pow,
    "Einsum": Einsum,
    "Attention": Attention,
    "RNN": RNN,
    "GRU": GRU,
    "LSTM": LSTM,
    "LpNormalization": LpNormalization,
}


# Nodes TVM's own converters get wrong, left to the operator's ONNX function body instead.
TVM_DECLINES = {
    # Its Mean and InvStdDev outputs come out as scalars.
    "LayerNormalization": lambda node: any(node.output[1:]),
}


def declines(node: onnx.NodeProto) -> bool:
    """Whether the converter for this node's operator (ours or TVM's) leaves it to the
    operator's ONNX function body (``onnx_functions``): cases it does not implement."""
    converter = CONVERTERS.get(node.op_type)
    if converter is not None:
        return hasattr(converter, "declines") and converter.declines(node)
    return node.op_type in TVM_DECLINES and TVM_DECLINES[node.op_type](node)


def known_operators() -> set[str]:
    # TVM's importer handles If itself, outside its converter table; Importer handles Scan.
    return set(_get_convert_map()) | set(CONVERTERS) | set(onnx_bounded.CONVERTERS) | {"If", "Scan", "Loop"}


COUNT_SUFFIX = ":count"  # main's extra result for a bounded output NAME is "NAME:count"


class Importer(ONNXGraphImporter):
    """TVM's ONNX importer, with ``CONVERTERS`` consulted before TVM's own table.

    ``bounded_outputs`` maps each model output whose size depends on the data to its dynamic
    axis; ``main`` returns one int64[1] extent per such output after the model's outputs.
    """

    weights_folder: Path | None = None  # the model's, where its external data is
    sub_byte_values: Mapping[str, str] = MappingProxyType({})  # the values of a sub-byte type

    def _parse_array(self, tensor_proto: onnx.TensorProto) -> tvm.runtime.Tensor:
        """An initializer as a tensor holding the array read for it: external data is read
        once, into TVM's memory (TVM's own reads it through onnx and copies it)."""
        values = initializer_values(tensor_proto, self.weights_folder)
        if values.dtype.name in onnx_sub_byte.CARRIERS:  # int4 weights, ...: one per element
            values = onnx_sub_byte.carrier_array(values)
        return adopted_tensor(values.reshape(tuple(tensor_proto.dims)))

    def from_onnx(self, graph: onnx.GraphProto, opset: int) -> tvm.IRModule:
        self._top_graph = graph
        self._bounded: dict[relax.Expr, tuple[int, relax.Expr]] = {}
        self.bounded_outputs: dict[str, int] = {}
        self.packed_outputs: dict[str, tuple[str, tuple[int, ...]]] = {}
        declared = len(graph.output)
        try:
            return super().from_onnx(graph, opset)
        finally:
            del graph.output[declared:]  # the caller's model stays as it was

    def _construct_nodes(self, graph):
        top = graph is self._top_graph
        if top:
            self._unpack_inputs(graph)
        super()._construct_nodes(graph)
        if not top:
            return
        self._pack_outputs(graph)
        outputs = {o.name: self._nodes[o.name] for o in graph.output}
        self._nodes.update(onnx_settled_inputs.guarded_outputs(self.bb, self._inputs, outputs))
        # TVM's from_onnx returns graph.output in order; extents ride along as extra outputs.
        for output in list(graph.output):
            value = self._nodes[output.name]
            if value in self._bounded:
                axis, count = self._bounded[value]
                self.bounded_outputs[output.name] = axis
                self._nodes[output.name + COUNT_SUFFIX] = count
                graph.output.add().name = output.name + COUNT_SUFFIX

    def _unpack_inputs(self, graph):
        """A sub-byte input arrives as its packed bytes (``main``'s parameter): the nodes
        read it unpacked, one element per carrier slot (onnx_sub_byte)."""
        for vi in graph.input:
            dtype = self.sub_byte_values.get(vi.name)
            if dtype is not None and vi.name in self._inputs:
                shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
                self._nodes[vi.name] = onnx_sub_byte.unpacked(self.bb, self._inputs[vi.name], dtype, shape)

    def _pack_outputs(self, graph):
        for output in graph.output:
            dtype = self.sub_byte_values.get(output.name)
            if dtype is None:
                continue
            value = self._nodes[output.name]
            if value in self._bounded:
                raise NotImplementedError(f"Output {output.name!r} of type {dtype} has a data-dependent size")
            self.packed_outputs[output.name] = (dtype, tuple(_static_shape(value)))
            self._nodes[output.name] = onnx_sub_byte.packed(self.bb, value, dtype)

    def _check_for_unsupported_ops(self, graph):
        missing = {n.op_type for n in graph.node if n.op_type not in known_operators() | {"Constant"}}
        if missing:
            raise NotImplementedError(
                "The following operators are not supported: " + ", ".join(sorted(missing))
            )

    def _convert_subgraph(self, bb, graph):
        # A branch's nodes are not announced through _parse_value_proto: without this, they
        # would be settled against the enclosing If's declared outputs.
        enclosing, self._node = getattr(self, "_node", None), None
        try:
            return super()._convert_subgraph(bb, graph)
        finally:
            self._node = enclosing

    def _parse_value_proto(self, value_proto):
        # TVM's node loop asks for each node's name just before converting it: the node's
        # output names are what a settled parameter is checked against (onnx_settled).
        if isinstance(value_proto, onnx.NodeProto):
            self._node = value_proto
        return super()._parse_value_proto(value_proto)

    def _convert_operator(self, op_name, inputs, attrs, opset):
        if any(i is not None and i in self._bounded for i in inputs):
            raise onnx_bounded.consumer_error(op_name)
        node = getattr(self, "_node", None)
        declared = onnx_settled.DECLARED_SHAPES.get() or {}
        shapes_token = onnx_settled.NODE_OUTPUT_SHAPES.set(
            [declared.get(n) for n in node.output] if node else None
        )
        inputs_token = onnx_settled.MODEL_INPUTS.set(list(self._inputs.values()))
        types_token = onnx_sub_byte.NODE_INPUT_TYPES.set(
            tuple(self.sub_byte_values.get(n) for n in node.input) if node else ()
        )
        try:
            return self._settled_or_converted(node, op_name, inputs, attrs, opset)
        finally:
            onnx_settled.NODE_OUTPUT_SHAPES.reset(shapes_token)
            onnx_settled.MODEL_INPUTS.reset(inputs_token)
            onnx_sub_byte.NODE_INPUT_TYPES.reset(types_token)

    def _settled_or_converted(self, node, op_name, inputs, attrs, opset):
        plan = (
            onnx_settled.settlement(op_name, opset, list(inputs), attrs, list(node.output)) if node else None
        )
        if plan is not None:
            self._node = None  # what the node's conversion calls must not settle it again

            def convert(constant_inputs):
                given = onnx_input()
                for value in constant_inputs:
                    given.append(value)
                # the next run-time parameter of the node, if any (Loop: count, then condition)
                return self._settled_or_converted(node, op_name, given, dict(attrs), opset)

            return onnx_settled.settle(self.bb, op_name, node.name, list(inputs), plan, convert)
        return self._converted(op_name, inputs, attrs, opset)

    def _converted(self, op_name, inputs, attrs, opset):
        if op_name in onnx_bounded.CONVERTERS:
            result, marks = onnx_bounded.CONVERTERS[op_name](self.bb, inputs, attrs)
            self._bounded.update(marks)
            return result
        if op_name == "Scan":
            return self._unrolled_scan(inputs, attrs, opset)
        if op_name == "Loop":
            return self._unrolled_loop(inputs, attrs)
        if op_name not in CONVERTERS:
            return super()._convert_operator(op_name, inputs, attrs, opset)
        converter = CONVERTERS[op_name].get_converter(opset)
        token = OPSET.set(opset)
        try:
            result = converter(self.bb, inputs, attrs, [self._nodes, self._params])
        finally:
            OPSET.reset(token)
        return self.bb.normalize(result) if isinstance(result, relax.Expr) else result

    def _unrolled_scan(self, inputs, attrs, opset):
        if opset < 9:
            return self._unrolled_batched_scan(inputs, attrs)
        body = attrs["body"]
        num_scan = int(attrs["num_scan_inputs"])
        states, scanned = list(inputs[: len(inputs) - num_scan]), list(inputs[len(inputs) - num_scan :])
        num_out = len(body.output) - len(states)
        directions = {
            "in_axes": [int(a) for a in attrs.get("scan_input_axes", [0] * num_scan)],
            "in_reverse": [bool(d) for d in attrs.get("scan_input_directions", [0] * num_scan)],
            "out_axes": [int(a) for a in attrs.get("scan_output_axes", [0] * num_out)],
            "out_reverse": [bool(d) for d in attrs.get("scan_output_directions", [0] * num_out)],
        }
        results = self._scan_steps(body, states, scanned, **directions)
        return results[0] if len(results) == 1 else relax.Tuple(results)

    def _unrolled_batched_scan(self, inputs, attrs):
        """Scan-8: every state and scan input has a batch axis first (scan inputs then their
        sequence axis); each batch entry is scanned on its own and the results stacked. Only
        full-length sequences: sequence_lens absent, or constant and all the full length."""
        body = attrs["body"]
        num_scan = int(attrs["num_scan_inputs"])
        lengths, rest = inputs[0], list(inputs[1:])
        states, scanned = rest[: len(rest) - num_scan], rest[len(rest) - num_scan :]
        steps = {_static_shape(x)[1] for x in scanned}
        batches = {_static_shape(x)[0] for x in states + scanned}
        if len(steps) != 1 or len(batches) != 1:
            raise ValueError("Scan-8 inputs disagree on the batch or sequence length")
        batch, full = batches.pop(), steps.pop()
        if lengths is not None:
            given = self._constant_value(lengths)
            if given is None or np.any(given.reshape(-1) != full):
                raise NotImplementedError(
                    "Scan-8 with sequence_lens given at run time or below its sequence length is unsupported"
                )
        num_out = len(body.output) - len(states)
        reverse = [bool(d) for d in attrs.get("directions", [0] * num_scan)]
        per_batch = []
        for b in range(batch):
            index = relax.const(b, "int64")
            entry = [self.bb.emit(relax.op.take(x, index, axis=0)) for x in states + scanned]
            per_batch.append(
                self._scan_steps(
                    body,
                    entry[: len(states)],
                    entry[len(states) :],
                    in_axes=[0] * num_scan,
                    in_reverse=reverse,
                    out_axes=[0] * num_out,
                    out_reverse=[False] * num_out,
                )
            )
        results = [
            self.bb.emit(relax.op.stack([r[k] for r in per_batch], axis=0)) for k in range(len(per_batch[0]))
        ]
        return results[0] if len(results) == 1 else relax.Tuple(results)

    def _scan_steps(self, body, states, scanned, in_axes, in_reverse, out_axes, out_reverse) -> list:
        """The body unrolled over the sequence: the final states, then the scan outputs."""
        num_out = len(body.output) - len(states)
        lengths = {_static_shape(x)[a] for x, a in zip(scanned, in_axes, strict=True)}
        if len(lengths) != 1:
            raise ValueError(f"Scan inputs disagree on the sequence length: {sorted(lengths)}")
        steps = lengths.pop()
        body_inputs = [i.name for i in body.input]
        elements: list[list[relax.Expr]] = [[None] * steps for _ in range(num_out)]
        for t in range(steps):
            for name, value in zip(body_inputs, states, strict=False):
                self._nodes[name] = value
            for j, (x, axis) in enumerate(zip(scanned, in_axes, strict=True)):
                index = steps - 1 - t if in_reverse[j] else t
                rank = len(_static_shape(x))
                axis = axis % rank
                element = relax.op.take(x, relax.const(index, "int64"), axis=axis)
                self._nodes[body_inputs[len(states) + j]] = self.bb.emit(element)
            values = self._body_outputs(body)
            states = values[: len(states)]
            for k in range(num_out):
                elements[k][steps - 1 - t if out_reverse[k] else t] = values[len(states) + k]
        for name in body_inputs:
            self._nodes.pop(name, None)
        scan_outputs = []
        for k in range(num_out):
            rank = len(_static_shape(elements[k][0])) + 1
            scan_outputs.append(self.bb.emit(relax.op.stack(elements[k], axis=out_axes[k] % rank)))
        return list(states) + scan_outputs

    def _constant_value(self, expr):
        expr = get_constant(expr, [self._nodes, self._params]) if expr is not None else None
        return expr.value.numpy() if isinstance(expr, tvm.ir.GenericConst) else None

    def _body_outputs(self, body):
        result = self._convert_subgraph(self.bb, body)
        values = [result[i] for i in range(len(body.output))] if len(body.output) > 1 else [result]
        return [v if isinstance(v, relax.Var | tvm.ir.GenericConst) else self.bb.emit(v) for v in values]

    def _unrolled_loop(self, inputs, attrs):
        body = attrs["body"]
        trip_count = self._constant_value(inputs[0])
        condition = self._constant_value(inputs[1]) if inputs[1] is not None else np.array(True)
        if trip_count is None:
            raise NotImplementedError("Loop needs a constant trip count (freeze it with --constant-input)")
        if condition is None:
            raise NotImplementedError("Loop with a run-time start condition is not supported")
        carried = list(inputs[2:])
        names = [i.name for i in body.input]
        scans: list[list[relax.Expr]] = []
        for step in range(int(trip_count) if bool(condition) else 0):
            self._nodes[names[0]] = relax.const(step, "int64")
            self._nodes[names[1]] = relax.const(True, "bool")
            for name, value in zip(names[2:], carried, strict=True):
                self._nodes[name] = value
            values = self._body_outputs(body)
            go_on = self._constant_value(values[0])
            if go_on is None or not bool(go_on):
                raise NotImplementedError("Loop whose condition depends on data is not supported")
            carried = values[1 : 1 + len(carried)]
            scans.append(values[1 + len(carried) :])
        for name in names:
            self._nodes.pop(name, None)
        num_scans = len(body.output) - 1 - len(carried)
        if num_scans and not scans:
            raise NotImplementedError("Loop that runs zero times with scan outputs is not supported")
        stacked = [self.bb.emit(relax.op.stack([s[k] for s in scans], axis=0)) for k in range(num_scans)]
        results = carried + stacked
        return results[0] if len(results) == 1 else relax.Tuple(results)


def from_onnx(
    model: onnx.ModelProto,
    shape_dict: dict[str, list[int]],
    dtype_dict: dict[str, str],
    opset: int,
    weights_folder: Path | None = None,
) -> tuple[tvm.IRModule, dict[str, int], dict[str, tuple[str, tuple[int, ...]]]]:
    """``tvm.relax.frontend.onnx.from_onnx`` with our converters (same arguments, checker
    left to the caller; ``weights_folder``: where external data is; a sub-byte input's shape
    and dtype are its packed bytes'). Returns the module, ``Importer.bounded_outputs`` and
    ``Importer.packed_outputs``."""
    importer = Importer(shape_dict, dtype_dict, keep_params_in_input=False, sanitize=True)
    importer.weights_folder = weights_folder
    importer.sub_byte_values = onnx_sub_byte.value_types(model)
    module = importer.from_onnx(model.graph, opset)
    return module, importer.bounded_outputs, importer.packed_outputs
