"""Relax rewrite: an inference batch norm with constant statistics as ``x * scale + shift``.

TVM legalizes ``relax.nn.batch_norm`` as its own kernel: it returns a tuple (the output and
the running statistics), so fusion never folds it into the convolution before it, and the
kernel recomputes ``(x - mean) / sqrt(var + eps) * gamma + beta`` per element. ``torch.export``
and the dynamo ONNX exporter keep every BatchNorm of a CNN (the TorchScript exporter folds
them into the convolutions): MobileNet v2 from a ``.pt2`` had 58 kernels against the ONNX
export's 34 and took 1.85x its time. With constant per-channel ``scale = gamma / sqrt(var +
eps)`` and ``shift = beta - mean * scale`` (computed in float64, rounded once) the multiply
and add are elementwise and fuse into the convolution's epilogue like a bias. Batch norms in
training mode, with computed statistics or of another dtype than float32 stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_calls, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule


def inference_batch_norm_as_affine(module: IRModule) -> IRModule:
    from tvm import relax

    # The consumers read the output through the tuple (``bn[0]``); canonicalized, they read
    # the add itself, which fusion then joins to the convolution and what follows it.
    return relax.transform.CanonicalizeBindings()(rewrite_calls(module, "relax.nn.batch_norm", _as_affine))


def _as_affine(mutator, call):
    import numpy as np
    import tvm
    from tvm import relax

    def constant(expr):
        value = constant_or_self(mutator, expr)
        return value.value.numpy().astype(np.float64) if isinstance(value, tvm.ir.GenericConst) else None

    if bool(call.attrs.training):
        return call
    data, *params = call.args
    shape = static_shape(data)
    values = [constant(p) for p in params]
    if shape is None or str(data.ty.dtype) != "float32" or any(v is None for v in values):
        return call
    gamma, beta, mean, var = values
    axis = int(call.attrs.axis) % len(shape)
    if any(v.shape != (shape[axis],) for v in values):
        return call
    scale = 1.0 / np.sqrt(var + float(call.attrs.epsilon))
    scale = scale * gamma if call.attrs.scale else scale
    shift = (beta if call.attrs.center else 0.0) - mean * scale
    broadcast = [1] * len(shape)
    broadcast[axis] = shape[axis]
    out = mutator.builder_.emit(
        relax.op.add(
            relax.op.multiply(data, relax.const(scale.astype(np.float32).reshape(broadcast))),
            relax.const(shift.astype(np.float32).reshape(broadcast)),
        )
    )
    # The running statistics, as an inference batch norm returns them unchanged.
    return relax.Tuple([out, params[2], params[3]])
