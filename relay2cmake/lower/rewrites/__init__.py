"""Relax rewrites run before TVM's pipeline, in the order ``pipeline.relax_rewrites`` lists
them: the required ones (index checks, sorting builtins, numerics, control flow, float16 Mod)
and the optimisations that may be declined (channels-last convolutions with Winograd,
constant transposes, packed matmul weights, fast math). ``common.py`` holds what they share."""
