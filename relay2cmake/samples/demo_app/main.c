/* Classify a synthetic "7" with the generated Digits package, then time 200 runs. */
#define _POSIX_C_SOURCE 200809L
#include <digits/digits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  static float image[DIGITS_INPUT_IMAGE_NUM_ELEMENTS];
  static float probabilities[DIGITS_OUTPUT_PROBABILITIES_NUM_ELEMENTS];
  static double times[200];
  digits_inputs inputs;
  digits_outputs outputs;
  digits_context* context;
  digits_status status;
  int row, col, best = 0, i;

  /* A crude "7": a bar across the top and a diagonal stroke. */
  for (col = 6; col < 22; ++col) image[5 * 28 + col] = 1.0f;
  for (row = 6; row < 24; ++row) image[row * 28 + (21 - (row - 6) * 2 / 3)] = 1.0f;

  status = digits_context_create(&context);
  if (status != DIGITS_OK) {
    fprintf(stderr, "digits_context_create: %s\n", digits_status_string(status));
    return 1;
  }
  inputs.image = image;
  outputs.probabilities = probabilities;
  status = digits_run(context, &inputs, &outputs);
  if (status != DIGITS_OK) {
    fprintf(stderr, "digits_run: %s (%s)\n", digits_status_string(status), digits_last_error(context));
    return 1;
  }
  for (i = 1; i < 10; ++i) {
    if (probabilities[i] > probabilities[best]) best = i;
  }
  printf("class probabilities:");
  for (i = 0; i < 10; ++i) printf(" %d:%.3f", i, probabilities[i]);
  printf("\npredicted class %d (random weights: the class means nothing, the pipeline does)\n", best);

  for (i = 0; i < 200; ++i) {
    double start = now_ms();
    digits_run(context, &inputs, &outputs);
    times[i] = now_ms() - start;
  }
  qsort(times, 200, sizeof(double), compare);
  printf("latency: median %.4f ms, min %.4f ms over 200 runs (workspace %u bytes, weights %u bytes)\n", times[100],
         times[0], (unsigned)DIGITS_WORKSPACE_BYTES, (unsigned)DIGITS_WEIGHT_BYTES);
  digits_context_destroy(context);
  return 0;
}
