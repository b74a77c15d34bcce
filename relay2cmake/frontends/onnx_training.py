"""The optimizers of ONNX's preview training domain (``ai.onnx.preview.training``): Adagrad,
Momentum (and Nesterov momentum), Adam. Each updates one or more tensors X with their
gradients G and state from a learning rate R and a step count T (scalars given at run time);
every formula is elementwise (ONNX's operator documentation).

Inputs are R, T, then the n tensors X, their n gradients G, and n (Adam: 2n) state tensors;
outputs are the n new X, then the new states.
"""

from __future__ import annotations

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text

DOMAIN = "ai.onnx.preview.training"


def _scalar(bb, value, like):
    """A scalar input as a 0-d tensor in ``like``'s type."""
    return bb.emit(relax.op.astype(relax.op.reshape(value, []), str(like.ty.dtype)))


def _const(value: float, like) -> relax.Expr:
    return relax.const(value, str(like.ty.dtype))


def _groups(inputs, states: int) -> list[list]:
    """Per updated tensor: [X, G, state...]."""
    tensors = list(inputs[2:])
    n = len(tensors) // (2 + states)
    return [[tensors[i + n * k] for k in range(2 + states)] for i in range(n)]


def _outputs(results: list[list]) -> relax.Expr:
    """The new X of every group, then each state of every group."""
    ordered = [group[k] for k in range(len(results[0])) for group in results]
    return ordered[0] if len(ordered) == 1 else relax.Tuple(ordered)


class Adagrad(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        decay = float(attr.get("decay_factor", 0.0))
        epsilon = float(attr.get("epsilon", 0.0))
        norm = float(attr.get("norm_coefficient", 0.0))
        results = []
        for x, g, h in _groups(inputs, 1):
            r, t = _scalar(bb, inputs[0], x), _scalar(bb, inputs[1], x)
            rate = relax.op.divide(r, relax.op.add(_const(1.0, x), relax.op.multiply(t, _const(decay, x))))
            g = bb.emit(relax.op.add(relax.op.multiply(_const(norm, x), x), g))
            h_new = bb.emit(relax.op.add(h, relax.op.multiply(g, g)))
            scale = relax.op.add(relax.op.sqrt(h_new), _const(epsilon, x))
            x_new = relax.op.subtract(x, relax.op.divide(relax.op.multiply(rate, g), scale))
            results.append([bb.emit(x_new), h_new])
        return _outputs(results)


class Momentum(OnnxOpConverter):
    """Standard momentum, or Nesterov's (``mode`` = "nesterov"); at T = 0 the gradient's
    coefficient is 1, not beta."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        alpha, beta = float(attr["alpha"]), float(attr["beta"])
        norm = float(attr.get("norm_coefficient", 0.0))
        nesterov = _attr_text(attr.get("mode"), "standard") == "nesterov"
        results = []
        for x, g, v in _groups(inputs, 1):
            r, t = _scalar(bb, inputs[0], x), _scalar(bb, inputs[1], x)
            first = relax.op.greater(t, _const(0.0, x))
            coefficient = relax.op.where(first, _const(beta, x), _const(1.0, x))
            g = bb.emit(relax.op.add(relax.op.multiply(_const(norm, x), x), g))
            v_new = bb.emit(
                relax.op.add(relax.op.multiply(_const(alpha, x), v), relax.op.multiply(coefficient, g))
            )
            step = relax.op.add(g, relax.op.multiply(_const(alpha, x), v_new)) if nesterov else v_new
            results.append([bb.emit(relax.op.subtract(x, relax.op.multiply(r, step))), v_new])
        return _outputs(results)


class Adam(OnnxOpConverter):
    """Adam with bias correction from T = 1 on (none at T = 0) and the optional decay after
    the update (``norm_coefficient_post``)."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        alpha, beta = float(attr.get("alpha", 0.9)), float(attr.get("beta", 0.999))
        epsilon = float(attr.get("epsilon", 0.0))
        norm, post = float(attr.get("norm_coefficient", 0.0)), float(attr.get("norm_coefficient_post", 0.0))
        add, mul, sub = relax.op.add, relax.op.multiply, relax.op.subtract
        results = []
        for x, g, v, h in _groups(inputs, 2):
            r, t = _scalar(bb, inputs[0], x), _scalar(bb, inputs[1], x)
            one = _const(1.0, x)
            g = bb.emit(add(mul(_const(norm, x), x), g))
            v_new = bb.emit(add(mul(_const(alpha, x), v), mul(_const(1 - alpha, x), g)))
            h_new = bb.emit(add(mul(_const(beta, x), h), mul(_const(1 - beta, x), mul(g, g))))
            corrected = relax.op.divide(
                mul(r, relax.op.sqrt(sub(one, relax.op.power(_const(beta, x), t)))),
                sub(one, relax.op.power(_const(alpha, x), t)),
            )
            rate = relax.op.where(relax.op.greater(t, _const(0.0, x)), corrected, r)
            scale = add(relax.op.sqrt(h_new), _const(epsilon, x))
            x_new = sub(x, mul(rate, relax.op.divide(v_new, scale)))
            results.append([bb.emit(mul(_const(1 - post, x), x_new)), v_new, h_new])
        return _outputs(results)


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"Adagrad": Adagrad, "Adam": Adam, "Momentum": Momentum}
