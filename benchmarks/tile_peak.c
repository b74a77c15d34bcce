/* Measured fp32 rate of a convolution/matmul register tile whose operands come from L1, as
 * the kernels' inner loops load them: per step, 6 broadcast scalars ("pixels") and 2 weight
 * vectors, 12 independent fused multiply-adds. peak.c keeps every operand in registers;
 * the gap between the two is what loads cost on this CPU. Built by benchmarks/run.py with
 * -O2 -ffp-contract=fast and the vector width of a kernel set; prints GFLOPS. */
#include <stdio.h>
#include <time.h>

#ifndef LANES
#define LANES 16
#endif
#define STEPS 50000000L
#define DEPTH 256 /* reduction steps cycled through: 6 KiB of pixels, 32 KiB of weights at most */

typedef float vec __attribute__((vector_size(LANES * 4)));

/* One pixel of the tile: its value broadcast to a vector, times both weight vectors. */
#define TILE_ROW(p)                                     \
  {                                                     \
    vec b;                                              \
    for (l = 0; l < LANES; ++l) b[l] = pixels[p][k];    \
    a[2 * (p)] = b * w0 + a[2 * (p)];                   \
    a[2 * (p) + 1] = b * w1 + a[2 * (p) + 1];           \
  }

static float pixels[6][DEPTH] __attribute__((aligned(64)));
static vec weights[DEPTH][2];

int main(void) {
  vec a[12];
  struct timespec t0, t1;
  float sum = 0.0f;
  long s;
  int i, p, l;
  for (i = 0; i < DEPTH; ++i) {
    for (p = 0; p < 6; ++p) pixels[p][i] = 1e-7f * (float)i;
    for (l = 0; l < LANES; ++l) weights[i][0][l] = weights[i][1][l] = 0.999f;
  }
  for (i = 0; i < 12; ++i) a[i] = weights[0][0] * 0.0f;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (s = 0; s < STEPS; ++s) {
    int k = (int)(s % DEPTH);
    vec w0 = weights[k][0], w1 = weights[k][1];
    TILE_ROW(0) TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5)
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (i = 1; i < 12; ++i) a[0] = a[0] + a[i];
  for (l = 0; l < LANES; ++l) sum += a[0][l];
  {
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.1f %g\n", 2.0 * LANES * 12 * (double)STEPS / seconds / 1e9, (double)sum);
  }
  return 0;
}
