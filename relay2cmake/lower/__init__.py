"""Stage 2, all of the TVM code: Relax rewrites (``rewrites/``), TVM's CPU pipeline and the
kernel sets it builds (``pipeline.py``: C source, one LLVM object per target, per-kernel
fallbacks), the default schedules, the tuning database, and facts about TVM's C and LLVM
output. The result is a ``pipeline.LoweredModel``, whose kernel code is plain data
(``kernel_sets.KernelCode``) the later stages use without importing this package."""
