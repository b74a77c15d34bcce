"""TfIdfVectorizer over integer tokens: for each n-gram of the pool, how often it occurs in
each row (unigrams counted once; longer n-grams also with up to ``max_skip_count`` tokens
skipped between their items), weighted as TF, IDF or TF-IDF. The pool is an attribute, so
every match is a fixed comparison: one kernel gives per row, n-gram, skip and start whether
the n-gram is there, a second sums them, and a constant matrix places the counts at the
n-grams' output indices. (String tokens have no C type here.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _static_shape

if TYPE_CHECKING:
    from tvm import te


def _pool(attr) -> list[tuple[int, ...]]:
    """The pool's n-grams in order: ``ngram_counts[n - 1]`` is where the n-grams of n start."""
    tokens = [int(t) for t in attr.get("pool_int64s", ())]
    starts = [int(c) for c in attr.get("ngram_counts", ())]
    grams = []
    for size, start in enumerate(starts, start=1):
        end = starts[size] if size < len(starts) else len(tokens)
        grams += [tuple(tokens[i : i + size]) for i in range(start, end, size)]
    return grams


def _matches_te(x: te.Tensor, grams, low: int, high: int, skips: int) -> te.Tensor:
    from tvm import te, tirx

    rows, length = (int(d) for d in x.shape)

    def found(row, gram, skip, start):
        result = tirx.const(0, "int32")
        for index in reversed(range(len(grams))):
            tokens = grams[index]
            size = len(tokens)
            hit = tirx.const(low <= size <= high, "bool")  # a size outside the range never counts
            if size == 1:
                hit = tirx.And(hit, skip == 0)  # a unigram does not depend on the skip
            last = start + (size - 1) * (skip + 1)
            hit = tirx.And(hit, last < length)
            for i, token in enumerate(tokens):
                position = tirx.min(start + i * (skip + 1), length - 1)
                hit = tirx.And(hit, x[row, position] == tirx.const(token, x.dtype))
            value = tirx.Select(hit, tirx.const(1, "int32"), tirx.const(0, "int32"))
            result = tirx.Select(gram == index, value, result)
        return result

    return te.compute((rows, len(grams), skips + 1, length), found, name="tfidf_matches")


def _counts_te(matches: te.Tensor) -> te.Tensor:
    from tvm import te

    rows, grams, skips, length = (int(d) for d in matches.shape)
    skip = te.reduce_axis((0, skips), name="skip")
    start = te.reduce_axis((0, length), name="start")
    return te.compute(
        (rows, grams),
        lambda r, g: te.sum(matches[r, g, skip, start].astype("float32"), axis=[skip, start]),
        name="tfidf_counts",
    )


class TfIdfVectorizer(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        x = inputs[0]
        if not str(x.ty.dtype).startswith("int"):
            raise NotImplementedError("TfIdfVectorizer over string tokens")
        shape = _static_shape(x)
        grams = _pool(attr)
        indexes = [int(i) for i in attr.get("ngram_indexes", ())]
        width = max(indexes, default=-1) + 1
        rows = bb.emit(relax.op.reshape(x, [1, shape[0]] if len(shape) == 1 else shape))
        low, high = int(attr.get("min_gram_length", 1)), int(attr.get("max_gram_length", 1))
        if not grams or width == 0:
            counts = relax.const(np.zeros((_static_shape(rows)[0], max(width, 0)), np.float32), "float32")
        else:
            matches = bb.emit_te(
                _matches_te, rows, grams, low, high, int(attr.get("max_skip_count", 0)),
                primfunc_name_hint="tfidf_matches",
            )  # fmt: skip
            per_gram = bb.emit_te(_counts_te, matches, primfunc_name_hint="tfidf_counts")
            placement = np.zeros((len(grams), width), np.float32)
            for gram, index in enumerate(indexes[: len(grams)]):
                placement[gram, index] = 1.0
            counts = bb.emit(relax.op.matmul(per_gram, relax.const(placement, "float32")))
        mode = _attr_text(attr.get("mode"), "TF")
        weights = attr.get("weights")
        weight = relax.const(np.asarray(weights, np.float32), "float32") if weights else None
        if mode == "IDF":
            present = relax.op.astype(relax.op.greater(counts, relax.const(0.0, "float32")), "float32")
            counts = relax.op.multiply(present, weight) if weight is not None else present
        elif mode == "TFIDF" and weight is not None:
            counts = relax.op.multiply(counts, weight)
        counts = bb.emit(counts)
        return relax.op.reshape(counts, [width]) if len(shape) == 1 else counts


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"TfIdfVectorizer": TfIdfVectorizer}
