"""Facts about, and adaptations of, the C source TVM emits for the ``c`` target."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from relay2cmake.arena import align_up
from relay2cmake.errors import ModelError

if TYPE_CHECKING:
    from tvm.ir import IRModule

_DEFINITION = re.compile(r"^TVM_DLL int32_t (__tvm_ffi_\w+)\(void\* self_handle, void\* args,.*\{$", re.M)
_ALLOC = re.compile(r"TVMBackendAllocWorkspace\(\d+, \w+, \(uint64_t\)(\d+)ULL, ")
_TVM_INCLUDE = re.compile(r'^#include "tvm/[^"]+"\n', re.M)
_INF = re.compile(r"(?<![\w.])inff?(?![\w.(])")
_NAN = re.compile(r"(?<![\w.])nanf?(?![\w.(])")
# TIR shifts narrow integers within their own width; C promotes them to int first, so the
# bits shifted out on the left would survive. Casting the result back restores TIR's meaning.
_NARROW_SHIFT = re.compile(r"\((\w+(?:\[\w+\])?) << \(((?:u?int8|u?int16)_t)\)(\d+)\)")
# TVM's reinterpretations (bfloat16/float8 lowering, fast_exp's bits) are pointer casts,
# `(*(float *)(&(x)))` in an expression, `= *(int32_t *)(&(x));` binding a variable, which
# break strict aliasing (arm-none-eabi-gcc -Os: -Wstrict-aliasing) and are not C when x is a
# literal. Each cast is matched whatever surrounds it (with its parentheses, if it has them).
_PUN = re.compile(r"(\()?\*\((\w+) \*\)\(&\(([^()]+)\)\)(?(1)\))")
_ANY_PUN = re.compile(r"\*\(\w+ \*\)\(&\(")  # what _PUN leaves, if anything: an operand it cannot read
_LITERAL = re.compile(r"^[-+]?[0-9.][0-9.eE+-]*[fF]?$")
# A float constant ``exact_constants`` set aside, and TVM's declaration of it as a function.
_EXACT = "r2c_exact_constant"
_EXACT_CALL = re.compile(_EXACT + r"\((\d+)\)")
_EXACT_DECLARATION = re.compile(r"^TVM_DLL \w+ " + _EXACT + r"\(int32_t\);\n", re.M)
_EXACT_TYPES = {"float32": np.float32, "float64": np.float64}


def exact_constants(prims: IRModule) -> tuple[IRModule, tuple[str, ...]]:
    """``prims`` with each float32/float64 constant that TVM's C code generator would print
    inexactly replaced by a numbered placeholder call, and the exact C literal of each.

    TVM prints float constants with C++'s default six decimals (``7.071068e-01f``): float32
    needs up to nine significant digits, float64 seventeen. The scales of a quantized model
    then land an ulp off, which moves rounding ties: a ResNet-50 quantized by ONNX Runtime
    had a third of its outputs one or two steps from TVM's VM in the C kernels only (its
    QLinearAdd ratios are float64 constants). ``restore_constants`` puts the literals back."""
    import tvm_ffi
    from tvm import tirx

    literals: list[str] = []
    numbers: dict[tuple[str, str], int] = {}

    def placeholder(constant):
        dtype = str(constant.ty)
        kind = _EXACT_TYPES.get(dtype)
        if kind is None or not np.isfinite(constant.value):
            return constant
        value = kind(constant.value)
        if kind(float(f"{float(value):e}")) == value:  # TVM's own print is exact
            return constant
        literal = np.format_float_scientific(value, unique=True) + ("f" if kind is np.float32 else "")
        number = numbers.setdefault((dtype, literal), len(literals))
        if number == len(literals):
            literals.append(literal)
        return tirx.call_pure_extern(dtype, _EXACT, tirx.IntImm("int32", number))

    return tvm_ffi.structural_map(prims, [(tirx.FloatImm, placeholder)]), tuple(literals)


def restore_constants(source: str, literals: tuple[str, ...]) -> str:
    """TVM's C ``source`` of a module from ``exact_constants``, its placeholders replaced by
    the exact literals (shortest round-trip decimals, which C parses to the same value)."""
    body = _EXACT_DECLARATION.sub("", source)
    body = _EXACT_CALL.sub(lambda match: f"({literals[int(match.group(1))]})", body)
    if _EXACT in body:
        raise ModelError("TVM's C output holds a float constant in an unexpected form; cannot adapt it.")
    return body


def scratch_bytes(source: str, sized_elsewhere: frozenset[str] = frozenset()) -> dict[str, int]:
    """Bytes of ``TVMBackendAllocWorkspace`` scratch each kernel may hold at once.

    TVM moves buffers of 1 KiB or more off the stack into workspace calls with constant
    sizes, released in LIFO order; the sum of one kernel's calls bounds what it holds.
    """
    starts = [(m.start(), m.group(1)) for m in _DEFINITION.finditer(source)]
    result = {symbol: 0 for _, symbol in starts}
    total_calls = source.count("TVMBackendAllocWorkspace(")
    matched = 0
    for match in _ALLOC.finditer(source):
        owner = [symbol for start, symbol in starts if start < match.start()]
        if not owner:
            continue
        result[owner[-1]] += align_up(int(match.group(1)))
        matched += 1
    # Requests of a size known only at run time, in kernels bounded from their TIR instead.
    for call in re.finditer(r"TVMBackendAllocWorkspace\(", source):
        owner = [symbol for start, symbol in starts if start < call.start()]
        if owner and owner[-1] in sized_elsewhere and not _ALLOC.match(source, call.start()):
            matched += 1
    if matched != total_calls:
        raise ModelError(
            "A kernel asks for scratch memory of a size known only at run time; "
            "relay2cmake needs static sizes to plan the arena."
        )
    return result


def adapt(source: str, abi_header: str) -> str:
    """Make TVM's C output a self-contained file of the package (the caller adds its banner).

    TVM's four runtime headers become our own small ABI header (which also maps the
    backend calls to prefixed names), and the per-library context pointer, which would
    clash between two packages, goes away (the kernels never read it).
    """
    if not source:
        # Every output is an input, a constant or a view: the model needs no kernel.
        return "/* This model needs no kernels. */\n" + f'#include "{abi_header}"\n'
    body = source.replace("#define TVM_EXPORTS\n", "")
    # TVM prints float infinity and NaN constants as `inff` / `nanf`, which are not C.
    body = _INF.sub("INFINITY", body)
    body = _NAN.sub("NAN", body)
    body = body.replace("void* __tvm_ffi__library_ctx = NULL;\n", "")
    body = _NARROW_SHIFT.sub(r"((\2)(\1 << \3))", body)
    loaded: set[str] = set()

    def unpun(match: re.Match) -> str:
        ctype, operand = match.group(2), match.group(3)
        if _LITERAL.match(operand.strip()):  # bfloat16 code takes the bits of float literals
            if ctype != "uint32_t":
                raise ModelError(f"TVM's C output reinterprets a literal as {ctype}; not supported yet.")
            return f"r2c_bits_of_float({operand})"
        loaded.add(ctype)
        return f"r2c_load_{ctype}(&({operand}))"

    body, puns = _PUN.subn(unpun, body)
    if _ANY_PUN.search(body):  # the operand is not a name or a literal: never ship the raw pun
        raise ModelError("TVM's C output reinterprets a value in an unexpected form; cannot adapt it.")
    first_include = _TVM_INCLUDE.search(body)
    if first_include is None:
        raise ModelError("TVM's C output has an unexpected layout (no runtime includes); cannot adapt it.")
    body = _TVM_INCLUDE.sub("", body)
    includes = f'#include "{abi_header}"\n' + (_HALF if re.search(r"\bhalf\b", body) else "")
    if re.search(r"\br2c_(max|min)_f(32|64)\(", body):
        includes += _INTEGER_CLAMPS
    if puns:
        includes += _BIT_CASTS + "".join(_LOAD.format(ctype=t) for t in sorted(loaded))
    body = body[: first_include.start()] + includes + body[first_include.start() :]
    if "__tvm_ffi__library_ctx" in body:
        raise ModelError("TVM's C output uses the library context pointer; this is not supported yet.")
    return _QUIET + body


# TVM's C output spells float16 as `half`, a type C does not have; _Float16 is its IEEE
# binary16 (gcc >= 12 and clang on x86-64 and AArch64).
_HALF = """#if defined(__FLT16_MAX__)
typedef _Float16 half;
#else
#error "this model computes in float16: build it with a compiler that has _Float16 (gcc >= 12, clang >= 15)"
#endif
"""

# The max/min of a clamp whose result becomes an integer (numerics.saturating_clamps): a NaN
# ``a`` gives the bound ``b``. Comparisons, not fmaxf/fminf, which are library calls on
# Cortex-M4.
_INTEGER_CLAMPS = """static inline float r2c_max_f32(float a, float b) { return a > b ? a : b; }
static inline float r2c_min_f32(float a, float b) { return a < b ? a : b; }
static inline double r2c_max_f64(double a, double b) { return a > b ? a : b; }
static inline double r2c_min_f64(double a, double b) { return a < b ? a : b; }
"""

# Bit reinterpretation the portable way (compilers turn the memcpy into a register move).
_BIT_CASTS = """#include <string.h>
static inline uint32_t r2c_bits_of_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}
"""
_LOAD = """static inline {ctype} r2c_load_{ctype}(const void* from) {{
  {ctype} value;
  memcpy(&value, from, sizeof value);
  return value;
}}
"""

# TVM's C output declares what it may not use (strides, device ids, unused arguments), and
# initialises reduction accumulators under "if (k == 0)", which gcc cannot prove.
_QUIET = """#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
"""
