/* Measured copy bandwidth of one core, the yardstick of memory-bound kernels: memcpy of a
 * buffer to another, for working sets (source + destination) from 256 KiB to 64 MiB, each
 * copied for about 0.04 s, best of five rounds. Prints one line per working set:
 * "<bytes> <GB/s>", counting the bytes read and written (a kernel's operand bytes are its
 * inputs plus its outputs, counted the same way). Built by benchmarks/run.py with -O2. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  size_t working_set;
  for (working_set = (size_t)256 << 10; working_set <= (size_t)64 << 20; working_set *= 4) {
    size_t half = working_set / 2;
    unsigned char* source = (unsigned char*)aligned_alloc(64, half);
    unsigned char* target = (unsigned char*)aligned_alloc(64, half);
    double best = 0.0;
    int round;
    if (source == NULL || target == NULL) return 1;
    memset(source, 1, half);
    memset(target, 2, half);
    for (round = 0; round < 5; ++round) {
      double start = now_seconds(), elapsed;
      long copies = 0;
      do {
        memcpy(target, source, half);
        source[copies % half] = (unsigned char)copies; /* the copies cannot be merged */
        ++copies;
        elapsed = now_seconds() - start;
      } while (elapsed < 0.04);
      if ((double)copies * (double)working_set / elapsed / 1e9 > best) {
        best = (double)copies * (double)working_set / elapsed / 1e9;
      }
    }
    printf("%zu %.1f %d\n", working_set, best, target[half - 1]);
    free(source);
    free(target);
  }
  return 0;
}
