/* Measured fp32 peak of one core: twelve independent chains of vector fused multiply-adds
 * (enough to cover FMA latency x throughput). Built by benchmarks/run.py with
 * -O2 -march=native -ffp-contract=fast; prints GFLOPS.
 * Every chain starts from a different value: chains that start equal compute equal values,
 * and gcc's value numbering then keeps one chain and runs one latency-bound FMA per step,
 * which, counted as twelve, overstated the peak threefold. */
#include <stdio.h>
#include <time.h>

/* The register's width: 16 lanes where AVX-512 exists; elsewhere 8 (AVX2), since 12 chains
 * of 16 lanes in 256-bit registers spill (a Zen 3 measured 6.8 GFLOPS against 89). */
#ifndef LANES
#if defined(__AVX512F__)
#define LANES 16
#else
#define LANES 8
#endif
#endif
#define STEPS 50000000L

typedef float vec __attribute__((vector_size(LANES * 4)));

int main(void) {
  vec a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, m, b;
  struct timespec t0, t1;
  float sum = 0.0f;
  long i;
  int l;
  for (l = 0; l < LANES; ++l) {
    m[l] = 0.9999999f;
    b[l] = 1e-7f;
  }
  a0 = b;
  a1 = a0 + b; a2 = a1 + b; a3 = a2 + b; a4 = a3 + b; a5 = a4 + b;
  a6 = a5 + b; a7 = a6 + b; a8 = a7 + b; a9 = a8 + b; a10 = a9 + b; a11 = a10 + b;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < STEPS; ++i) {
    a0 = a0 * m + b; a1 = a1 * m + b; a2 = a2 * m + b; a3 = a3 * m + b;
    a4 = a4 * m + b; a5 = a5 * m + b; a6 = a6 * m + b; a7 = a7 * m + b;
    a8 = a8 * m + b; a9 = a9 * m + b; a10 = a10 * m + b; a11 = a11 * m + b;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  a0 = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  for (l = 0; l < LANES; ++l) sum += a0[l];
  {
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.1f %g\n", 2.0 * LANES * 12 * (double)STEPS / seconds / 1e9, (double)sum);
  }
  return 0;
}
