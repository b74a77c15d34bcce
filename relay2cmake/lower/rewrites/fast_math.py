"""Relax rewrite: float32 ``erf`` (GELU's core) and softmax's ``exp`` as TVM's vectorizable
approximations.

The math library's ``erff`` is scalar: inside a vectorized matmul epilogue it costs as much
as the matmul (measured: the transformer block's FFN 0.8 ms → 1.6 ms). ``topi.fast_erf``
is the polynomial Eigen uses, exact to float32 rounding on the clamped range [-4, 4]
(|erf| is 1 to float32 precision beyond it), and vectorizes. Applied to every kernel set so
that all of them compute the same numbers.

Softmax over the last axis of a static shape becomes ``_softmax`` (elsewhere TVM's
``fast_softmax``): its ``exp`` is ``_fast_exp``, a range reduction and a degree-5 polynomial,
within 4.0e-7 relative error of ``exp`` over float32's normal range (measured).
Scalar ``expf`` made the transformer block's softmax run at 1.3 GFLOPS.

Both use ``_fast_exp``: ``topi.fast_exp``'s method with a shorter polynomial, its last step a
select that x86 does in one instruction (SiLU's epilogue: 29 -> 24 instructions a vector;
EfficientNet-B0's kernels 6.07 -> 5.48 ms, MobileViT-XS's 9.40 -> 8.77 ms), its rounding done
by a float addition.

Sigmoid (SiLU's and squeeze-excite's core) becomes ``1 / (1 + fast_exp(-x))`` as plain Relax
arithmetic, so that it still fuses into the convolution's epilogue; tanh becomes
``topi.fast_tanh`` (Eigen's rational approximation, clamped to [-9, 9] where tanh is +-1 in
float32). EfficientNet-B0 spent 34% of its time in scalar ``expf`` calls from SiLU.

The fused activations (the dynamo exporter's single ``Gelu`` node, PyTorch's ``silu``) are
spelt out in TVM's own formulas with the approximations above: fused ``gelu`` kept the scalar
``erff`` and made ConvNeXt's MLPs run at 7-25 GFLOPS against 60-83 for the decomposed GELU of
the TorchScript export.

``pow(x, 2)`` and ``pow(x, 3)`` with a constant exponent (GPT-2's GELU: x + 0.044715 x^3)
become multiplications: ``powf`` is scalar too, and the products are exact to a rounding;
exponents 1/4, 1/2, 3/4 and 3/2 (LRN's 0.75) become square roots and products.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import rewrite_functions

if TYPE_CHECKING:
    from tvm.ir import IRModule


def _erf_within_one(x):
    """``fast_erf``, whose polynomial gives -1.0000001 at its clamp (-4), held to [-1, 1]: so
    that GELU's ``0.5 + 0.5 erf`` is exactly 0 far left, as with ``erff`` (gelu(-inf) NaN and
    gelu(-3e38) -0, like ONNX Runtime). Comparisons, not min/max, so that NaN stays NaN.

    The value is bound once (``Let``) and the comparisons read the binding: comparisons of
    the value itself copied the polynomial into each (three polynomials in ConvNeXt's GELU
    epilogues, 1 thread 184 against 137 ms), and comparisons of the input instead (exact
    +-1 from |x| >= 3.6) read the inlined input three times, which with the NaN-propagating
    clamps inside ``fast_erf`` grew ViT's GELU matmul sevenfold in LLVM (a 479-line parallel
    body became 3,427; the package 43 -> 56 ms)."""
    from tvm import te, tirx, topi

    erf = topi.fast_erf(x)
    one = tirx.const(1.0, x.dtype)

    def within_one(*i):
        value = tirx.Var("erf", x.dtype)
        clamped = tirx.Select(value > one, one, tirx.Select(value < -one, -one, value))
        return tirx.Let(value, erf(*i), clamped)

    return te.compute(x.shape, within_one, name="erf_within_one", tag="elemwise")


def _tanh_with_exact_tails(x):
    """``fast_tanh``, which gives +-0.99999994 at its clamp (+-9), exactly +-1 beyond it, where
    ``tanhf`` is +-1: GELU's ``1 + tanh`` is then exactly 0 far left, as with ``tanhf``."""
    from tvm import te, tirx, topi

    tanh = topi.fast_tanh(x)
    one, tail = tirx.const(1.0, x.dtype), tirx.const(9.0, x.dtype)
    return te.compute(
        x.shape,
        lambda *i: tirx.Select(x(*i) >= tail, one, tirx.Select(x(*i) <= -tail, -one, tanh(*i))),
        name="tanh_with_exact_tails",
        tag="elemwise",
    )


# A row's maximum and sum go in vectors of this many partial results (``schedules``); a row
# that it does not divide (ViT's 197 tokens, Swin's 49) reduces its last ``L % 16`` apart.
ROW_VECTOR = 16


# exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2, exp(r) = 1 + r + r^2 p(r); arguments
# clamped to where float32's exponent holds 2^n. p is of degree 3 (five multiply-adds in all),
# fitted here to the least maximum relative error of exp(r) on that interval (1.05e-7; iteratively
# reweighted least squares on Chebyshev nodes, float64). TVM's fast_exp takes Cephes' expf
# polynomial, p of degree 5 (seven multiply-adds, 3.0e-7 against 4.0e-7 over float32's normal
# range, the range reduction's error at large |x| most of both). Two fewer: kernels alone,
# interleaved, Intel Xeon, AVX-512: ViT's and MobileViT's softmax 1.32x, the kernels with an
# exponential of MobileViT 5.64 -> 5.25 ms, of EfficientNet-B0 4.34 -> 4.18; AVX2: ViT's softmax
# 1.10x, EfficientNet-B0's four largest SiLU kernels 1.05-1.12x.
_EXP_LIMIT = 88.3762626647950
_EXP_POLYNOMIAL = (0.008312525227665901, 0.041890114545822144, 0.16667114198207855, 0.499992311000824)


# The sigmoid's largest exponential: 1 / (1 + exp(87)) = 1.65e-38 is still a normal float. Up to
# exp's own limit the sigmoid of x < -87 was a subnormal (4e-39 at -88.4), which the division
# made and SiLU's multiply read through microcode assists: MixNet-S's concat + BN + SiLU kernel
# alone, AVX-512, 0.154 ms on normal inputs, 0.93-1.0 ms on inputs scaled 30-1000x; now 0.151
# at any scale. (Subnormal *inputs* still cost as much: 1.2 ms on inputs of 1e-39; a package can
# flush them, <P>_FLUSH_SUBNORMALS. MixNet-S's package does not need it: its inputs there hold
# none, and its slow concat was AVX2 code building vectors across inputs, since fixed.)
SIGMOID_EXP_LIMIT = 87.0

# Added to x / ln 2, rounds it to n and leaves n + 127 in the sum's low bits (see _fast_exp).
_ROUNDING = 1.5 * 2**23 + 127


def _fast_exp(x, at_most_zero: bool = False, upper: float = _EXP_LIMIT):
    """``topi.fast_exp``'s approximation, in fewer instructions: TVM takes ``max(2^n exp(r),
    x)`` so that +inf gives +inf; the NaN-propagating max that becomes was six instructions a
    vector on x86 (of about 29 for SiLU's epilogue). A select, ``result > x ? result : x``,
    gives the same numbers (x itself for NaN and +inf) in one ``vmaxps`` (EfficientNet-B0's
    first SiLU conv 0.446 -> 0.377 ms).

    n = round(x / ln 2) without a rounding instruction: x / ln 2 + (1.5 * 2^23 + 127) is a float
    whose spacing is 1, so the addition rounds (to nearest even: ``floor(y + 0.5)`` differs
    only on exact halves, where either n keeps |r| <= ln 2 / 2), and the sum's low bits hold
    n + 127, 2^n's exponent field. Its bits shifted left 23 are 2^n; read back as a float,
    minus the constant, n: one subtraction, where the integer difference converted to float was
    two instructions (SiLU kernels 1.01-1.07x, softmax 1.03x). (Not ``sum - constant`` itself:
    TVM folds ``(a + c) - c`` to ``a``; it does not see through the reinterpretations.) The
    polynomial is one Horner chain: ``1 + r (1 + r p(r))``. Past the clamp (exp
    overflows float32 at 88.72) the value is 2^127 exp(0.35), about 2.4e38, not inf (the floor
    gave inf there by rounding 127.49999 + 0.5 up); +inf itself stays +inf.

    ``at_most_zero``: every argument is at most 0 or NaN (softmax's ``x - max``), so only the
    lower clamp is kept (NaN still comes out NaN, through the select): ViT's and MobileViT's
    softmax 1.04-1.05x, kernels alone, AVX-512. ``upper``: the largest argument, where less than
    exp's own limit (the sigmoid's, ``SIGMOID_EXP_LIMIT``)."""
    from tvm import te, tirx

    def exp(*index):
        value = x(*index)
        limit = tirx.const(_EXP_LIMIT, "float32")
        clamped = tirx.max(value if at_most_zero else tirx.min(value, tirx.const(upper, "float32")), -limit)
        rounded = clamped * tirx.const(1.4426950408889634, "float32") + tirx.const(_ROUNDING, "float32")
        bits = tirx.reinterpret("uint32", rounded)  # unsigned: the shift below wraps (C: no UB)
        n = tirx.reinterpret("float32", bits) - tirx.const(_ROUNDING, "float32")
        r = clamped - n * tirx.const(0.6931471805599453, "float32")
        poly = tirx.const(_EXP_POLYNOMIAL[0], "float32")
        for coefficient in (*_EXP_POLYNOMIAL[1:], 1.0, 1.0):
            poly = poly * r + tirx.const(coefficient, "float32")
        power = tirx.reinterpret("float32", bits << tirx.const(23, "uint32"))
        result = tirx.Var("exp_result", "float32")  # bound once: the select reads it twice
        select = tirx.Select(result > value, result, value)
        return tirx.Let(result, power * poly, select)

    return te.compute(x.shape, exp, name="T_exp", tag="elemwise")


def _softmax(x, axis: int):
    """Softmax with ``fast_exp``. Over the last axis of a static shape: each exponential
    computed once (TVM's ``fast_softmax`` computes it for the sum and again for the output
    when a mask's ``where`` follows), the row scaled by one reciprocal of its sum (a division
    per element cost a vector divide per 16), and a row that 16 does not divide reduced as
    its whole 16s plus a tail, so that both reductions still split into vector lanes."""
    import tvm
    from tvm import te, topi

    rank = len(x.shape)
    axis = axis % rank
    if axis != rank - 1 or not all(isinstance(d, tvm.tirx.IntImm) for d in x.shape):
        return topi.nn.fast_softmax(x, axis)
    length = int(x.shape[-1])
    whole = length - length % ROW_VECTOR if length > ROW_VECTOR else length
    rows = tuple(x.shape[:-1])

    def reduced(values, reducer, combine, name):
        """``reducer`` over the row of ``values``: its whole 16s, then the tail combined in."""
        k = te.reduce_axis((0, whole), name="k")
        head = te.compute(rows, lambda *i: reducer(values(*i, k), axis=k), name=name)
        if whole == length:
            return head
        t = te.reduce_axis((0, length - whole), name="k_tail")
        tail = te.compute(rows, lambda *i: reducer(values(*i, whole + t), axis=t), name=f"{name}_tail")
        return te.compute(rows, lambda *i: combine(head(*i), tail(*i)), name=f"{name}_row")

    maximum = reduced(x, te.max, tvm.tirx.max, "T_softmax_maxelem")
    delta = te.compute(x.shape, lambda *i: x(*i) - maximum(*i[:-1]), name="T_softmax_delta")
    exp = _fast_exp(delta, at_most_zero=True)
    total = reduced(exp, te.sum, lambda a, b: a + b, "T_softmax_expsum")
    one = tvm.tirx.const(1.0, x.dtype)
    scale = te.compute(rows, lambda *i: one / total(*i), name="T_softmax_scale")
    return te.compute(
        x.shape, lambda *i: exp(*i) * scale(*i[:-1]), name="T_softmax_norm", attrs={"axis": axis}
    )


def _constant_reciprocal(expr):
    """``1 / c`` of a float32 constant divisor as a constant (correctly rounded), or None when
    ``c`` is not one, or holds a zero, a NaN, an infinity or a value whose reciprocal would not
    be a normal float32: ``x / c`` then becomes ``x * (1 / c)``, exact for powers of two and
    otherwise within one unit in the last place. A division is a slow, unpipelined instruction
    (AVX-512: 16 lanes every 10-16 cycles against two multiplies a cycle): GELU's ``x / sqrt 2``
    before the erf, in the epilogue of DeiT's MLP matmul, cost as much as the erf itself."""
    import numpy as np
    import tvm
    from tvm import relax

    if not isinstance(expr, tvm.ir.GenericConst) or str(expr.value.dtype) != "float32":
        return None
    divisor = expr.value.numpy().astype(np.float64)
    smallest, largest = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
    if divisor.size == 0 or not np.all(np.isfinite(divisor)) or np.any(divisor == 0):
        return None
    if np.any(np.abs(divisor) < 1 / largest) or np.any(np.abs(divisor) > 1 / smallest):
        return None
    return relax.const((1.0 / divisor).astype(np.float32), "float32")


# Divisions by a constant worth a multiply by its reciprocal (which can be an ulp off): fewer
# cost nothing, and are often scales, which must stay exact. A dynamically quantized BERT
# computed (max - min) / 255 an ulp off ONNX Runtime's, its activations moved by a quantum and
# its output by 1.6e-3: the golden test failed and the package lost every optimisation (26x
# slower than ONNX Runtime).
MANY_DIVISIONS = 256


def _few_elements(expr) -> bool:
    """Whether ``expr`` has a static shape of fewer than MANY_DIVISIONS elements (a shape
    chosen at run time counts as many)."""
    from relay2cmake.lower.rewrites.common import static_shape

    shape = static_shape(expr)
    return shape is not None and math.prod(shape) < MANY_DIVISIONS


# Constant exponents computed from square roots (``_root_power``).
ROOT_EXPONENTS = (0.25, 0.5, 0.75, 1.5)


def _rounded_divisions(module: IRModule) -> list:
    """The divisions whose quotient is rounded, possibly after adding a zero point or clamping
    (quantization: ``round(x / scale) + zero``, ONNX Runtime's ``nearbyint(y / scale + zero)``,
    ours clamped before rounding).
    They stay divisions: times the reciprocal, a quotient an ulp off lands on the other side
    of a rounding tie from ONNX Runtime, which divides (a quantized 2x2 average pool: 1.4% of its
    values one step apart)."""
    import tvm
    from tvm import relax

    round_op, divide = tvm.ir.Op.get("relax.round"), tvm.ir.Op.get("relax.divide")
    passing = ("add", "subtract", "clip", "maximum", "minimum")  # a zero point, a clamp
    shifts = tuple(tvm.ir.Op.get(f"relax.{name}") for name in passing)
    values: dict = {}
    found: list = []

    @relax.expr_functor.visitor
    class _Bindings(relax.PyExprVisitor):
        def visit_var_binding_(self, binding):
            values[binding.var] = binding.value
            super().visit_var_binding_(binding)

    def bound(expr):
        return values.get(expr, expr) if isinstance(expr, relax.Var) else expr

    for func in module.functions.values():
        if isinstance(func, relax.Function):
            _Bindings().visit_expr(func)
    for value in list(values.values()):
        if not (isinstance(value, relax.Call) and value.op == round_op):
            continue
        inner = bound(value.args[0])
        while isinstance(inner, relax.Call) and inner.op in shifts:
            inner = bound(inner.args[0])
        if isinstance(inner, relax.Call) and inner.op == divide:
            found.append(inner)
    return found


def vectorizable_math(module: IRModule) -> IRModule:
    import numpy as np
    import tvm
    from tvm import relax

    erf = tvm.ir.Op.get("relax.erf")
    softmax = tvm.ir.Op.get("relax.nn.softmax")
    sigmoid = tvm.ir.Op.get("relax.sigmoid")
    tanh = tvm.ir.Op.get("relax.tanh")
    power = tvm.ir.Op.get("relax.power")
    silu = tvm.ir.Op.get("relax.nn.silu")
    gelu = tvm.ir.Op.get("relax.nn.gelu")
    gelu_tanh = tvm.ir.Op.get("relax.nn.gelu_tanh")
    divide = tvm.ir.Op.get("relax.divide")
    sqrt = tvm.ir.Op.get("relax.sqrt")

    def constant_exponent(expr) -> float | None:
        if not isinstance(expr, tvm.ir.GenericConst) or expr.value.numpy().size != 1:
            return None
        return float(expr.value.numpy().reshape(()))

    rounded = _rounded_divisions(module)

    @relax.expr_functor.mutator
    class _FastMath(relax.PyExprMutator):
        def visit_call_(self, call):
            quantizing = call.op == divide and any(call.same_as(d) for d in rounded)
            call = super().visit_call_(call)
            if str(getattr(call.ty, "dtype", "")) != "float32":
                return call
            if call.op == silu:  # x * sigmoid(x), TVM's formula
                return relax.op.multiply(call.args[0], self.builder_.emit(self._sigmoid(call.args[0])))
            if call.op == gelu:
                return self._gelu(call.args[0])
            if call.op == gelu_tanh:
                return self._gelu_tanh(call.args[0])
            if call.op == erf:
                return self._erf(call.args[0])
            if call.op == tanh:
                return self._tanh(call.args[0])
            if call.op == sigmoid:
                return self._sigmoid(call.args[0])
            if call.op == power and (exponent := constant_exponent(call.args[1])) in (2.0, 3.0):
                x = call.args[0]
                square = relax.op.multiply(x, x)
                return square if exponent == 2 else relax.op.multiply(self.builder_.emit(square), x)
            if call.op == power and exponent in ROOT_EXPONENTS:
                return self._root_power(call.args[0], exponent)
            if (
                call.op == divide
                and not quantizing
                and not _few_elements(call)
                and not self._from_constants(call.args[0])
                and (reciprocal := _constant_reciprocal(call.args[1])) is not None
            ):
                return relax.op.multiply(call.args[0], reciprocal)
            if call.op == divide and (root := self._broadcast_sqrt(call)) is not None:
                # A layer norm spelt out: x / sqrt(variance + eps), the root one per row.
                return relax.op.multiply(call.args[0], self.builder_.emit(relax.op.rsqrt(root)))
            if call.op == softmax:
                return self.builder_.call_te(
                    _softmax, call.args[0], int(call.attrs.axis), primfunc_name_hint="softmax"
                )
            return call

        def _from_constants(self, expr, depth: int = 8) -> bool:
            """Whether ``expr`` is computed from constants only: a constant divided by a
            constant is folded later, exactly; as a multiply by the reciprocal it could be an
            ulp off (a quantized convolution's requantization scale, x_scale * w_scale /
            y_scale, moved one output in 10^5 of ResNet-18 to the other side of a rounding
            tie from ONNX Runtime)."""
            if isinstance(expr, tvm.ir.GenericConst):
                return True
            bound = self.lookup_binding(expr) if isinstance(expr, relax.Var) else expr
            if depth == 0 or not isinstance(bound, relax.Call) or not bound.args:
                return False
            return all(self._from_constants(arg, depth - 1) for arg in bound.args)

        def _broadcast_sqrt(self, call):
            """The operand of ``sqrt`` when ``call`` divides by the square root of a tensor with
            fewer elements than the dividend (it is broadcast): ``x * rsqrt(v)`` then takes one
            division per root instead of one per element (each a vector divide per 16). The
            same special values: x / sqrt(0) and x * rsqrt(0) are both +-inf, or NaN for 0."""
            divisor = call.args[1]
            bound = self.lookup_binding(divisor) if isinstance(divisor, relax.Var) else divisor
            if not (isinstance(bound, relax.Call) and bound.op == sqrt):
                return None
            sizes = []
            for value in (call.args[0], divisor):
                shape = getattr(value.ty, "shape", None)
                if shape is None or not all(hasattr(d, "value") for d in shape):
                    return None
                sizes.append(math.prod(int(d.value) for d in shape))
            return bound.args[0] if sizes[1] < sizes[0] else None

        def _root_power(self, x, exponent: float):
            """``x ** exponent`` for 1/4, 1/2, 3/4 and 3/2 from square roots (vectorized and
            correctly rounded; powf is a scalar call: LRN's ``(bias + alpha/n sum)^0.75`` ran at
            2.6 GB/s). Every special value as powf has it: only -inf differs (sqrt gives NaN,
            powf +inf), so it is selected."""
            emit = self.builder_.emit
            root = emit(relax.op.sqrt(x))
            if exponent == 0.5:
                value = root
            elif exponent == 1.5:
                value = emit(relax.op.multiply(x, root))
            else:
                fourth = emit(relax.op.sqrt(root))
                value = fourth if exponent == 0.25 else emit(relax.op.multiply(root, fourth))
            minus_infinity = relax.const(-np.inf, "float32")
            return relax.op.where(relax.op.equal(x, minus_infinity), relax.const(np.inf, "float32"), value)

        def _erf(self, x):
            return self.builder_.call_te(_erf_within_one, x, primfunc_name_hint="erf")

        def _tanh(self, x):
            return self.builder_.call_te(_tanh_with_exact_tails, x, primfunc_name_hint="tanh")

        def _gelu(self, x):
            """``x * (0.5 + 0.5 erf(x / sqrt 2))``, TVM's formula, as Relax arithmetic with the erf
            above, so that it fuses into the matmul's epilogue like the decomposed GELU does."""
            emit = self.builder_.emit
            scaled = emit(relax.op.multiply(x, relax.const(0.5**0.5, "float32")))
            half_erf = emit(relax.op.multiply(emit(self._erf(scaled)), relax.const(0.5, "float32")))
            return relax.op.multiply(x, emit(relax.op.add(relax.const(0.5, "float32"), half_erf)))

        def _gelu_tanh(self, x):
            """``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, TVM's formula."""
            emit = self.builder_.emit
            cube = emit(relax.op.multiply(emit(relax.op.multiply(x, x)), x))
            inner = emit(relax.op.add(x, emit(relax.op.multiply(cube, relax.const(0.044715, "float32")))))
            scaled = emit(relax.op.multiply(inner, relax.const(math.sqrt(2.0 / math.pi), "float32")))
            one_plus = emit(relax.op.add(relax.const(1.0, "float32"), emit(self._tanh(scaled))))
            return relax.op.multiply(emit(relax.op.multiply(x, relax.const(0.5, "float32"))), one_plus)

        def _sigmoid(self, x):
            """``1 / (1 + fast_exp(-x))``, the exponential at most exp(SIGMOID_EXP_LIMIT)."""
            one = relax.const(1.0, "float32")
            negated = self.builder_.emit(relax.op.negative(x))
            exp = self.builder_.emit(
                self.builder_.call_te(_fast_exp, negated, upper=SIGMOID_EXP_LIMIT, primfunc_name_hint="exp")
            )
            return relax.op.divide(one, self.builder_.emit(relax.op.add(one, exp)))

    return rewrite_functions(module, _FastMath(module))
