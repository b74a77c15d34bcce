/*__banner__*/
/*
 * __prefix___cli: run the model on .npy files.
 *
 *   __prefix___cli [--output-dir DIR] [--named-outputs] [--quiet] [--bench N] [--warmup N] [--threads T]
 *                  [--profile] [--weights FILE] IN0.npy ...
 *
 * --profile (with --bench, in a library built with __PREFIX___PROFILE=ON): each kernel step's
 * mean time over the bench runs, one line a step in run order ("step INDEX KERNEL MS"), then
 * their sum ("steps_ms"); the run's latency minus that sum is time outside the kernels.
 *
 * --weights: the weights file, for libraries built with __PREFIX___EXTERNAL_WEIGHTS=ON
 * (weights/__prefix___weights.bin in the package, share/__prefix__/ once installed).
 * Inputs are given in model order and must match each input's dtype and shape exactly.
 * Outputs are written to DIR/output_0.npy, DIR/output_1.npy, ... in model order, or with
 * --named-outputs to DIR/<name>.npy, the name being the output's C identifier in the header.
 * One line per output says which model output went to which file (--quiet: none).
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#else
#include <sys/stat.h>
#endif

#include "npy.h"
#include "__prefix__/__prefix__.h"

/* Model names are untrusted text: only printable ASCII reaches the terminal (no escapes). */
static const char* printable(const char* text, char* out, size_t size) {
  size_t n = 0;
  for (; *text != '\0' && n + 1 < size; ++text) {
    unsigned char c = (unsigned char)*text;
    out[n++] = c >= 32 && c < 127 ? (char)c : '?';
  }
  out[n] = '\0';
  return out;
}

static int usage(void) {
  const __prefix___tensor_info* info;
  char name[256];
  size_t i;
  fprintf(stderr,
          "usage: __prefix___cli [--output-dir DIR] [--named-outputs] [--quiet] [--bench N] [--warmup N] [--threads T]\n"
          "                    [--profile] [--weights FILE] IN0.npy ...\n"
          "inputs, in this order:\n");
  for (i = 0; (info = __prefix___input_info(i)) != NULL; ++i) {
    char shape[256];
    npy_shape_text(info->ndim, info->shape, shape, sizeof(shape));
    fprintf(stderr, "  %u: %s %s%s\n", (unsigned)i, printable(info->name, name, sizeof(name)), info->dtype_name, shape);
  }
  return 2;
}

/* A whole number in [low, high]; otherwise says what the option takes. */
static int parse_count(const char* option, const char* text, long low, long high, long* value) {
  char* end;
  errno = 0;
  *value = strtol(text, &end, 10);
  if (errno == 0 && end != text && *end == '\0' && *value >= low && *value <= high) return 1;
  fprintf(stderr, "__prefix___cli: %s takes a whole number from %ld to %ld\n", option, low, high);
  return 0;
}

/* --bench keeps one time per run: bounded so that the array's size cannot overflow. */
#define MAX_BENCH_RUNS 10000000L

static double now_ms(void) {
#ifdef _WIN32
  return (double)clock() * 1000.0 / CLOCKS_PER_SEC;
#else
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
#endif
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int takes_value(const char* option) {
  static const char* const options[] = {"--output-dir", "--bench", "--warmup", "--threads", "--weights"};
  size_t i;
  for (i = 0; i < sizeof(options) / sizeof(options[0]); ++i) {
    if (strcmp(option, options[i]) == 0) return 1;
  }
  return 0;
}

static int make_directory(const char* path) {
#ifdef _WIN32
  return _mkdir(path) == 0 || errno == EEXIST ? 0 : -1;
#else
  return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
#endif
}

int main(int argc, char** argv) {
  const char* output_dir = ".";
  const char* weights_path = NULL;
  npy_blob weights;
  long bench = 0, warmup = 1, threads = 1;
  int quiet = 0, named_outputs = 0, profile = 0;
  const char* paths[__PREFIX___NUM_INPUTS + 1];
  size_t num_paths = 0;
  npy_array arrays[__PREFIX___NUM_INPUTS + 1];
  const void* inputs[__PREFIX___NUM_INPUTS + 1];
  size_t input_bytes[__PREFIX___NUM_INPUTS + 1];
  const int64_t* input_shapes[__PREFIX___NUM_INPUTS + 1];
  void* outputs[__PREFIX___NUM_OUTPUTS];
  unsigned char* output_blocks[__PREFIX___NUM_OUTPUTS];
  size_t output_bytes[__PREFIX___NUM_OUTPUTS];
  char error[512], name[256];
  __prefix___context* context = NULL;
  void* workspace = NULL;
  __prefix___status status;
  int exit_code = 1;
  int i;
  size_t k;

  memset(arrays, 0, sizeof(arrays));
  memset(outputs, 0, sizeof(outputs));
  memset(output_blocks, 0, sizeof(output_blocks));
  memset(&weights, 0, sizeof(weights));
  for (i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage();
      return 0;
    } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
      quiet = 1;
    } else if (strcmp(arg, "--named-outputs") == 0) {
      named_outputs = 1;
    } else if (strcmp(arg, "--profile") == 0) {
      profile = 1;
    } else if (strcmp(arg, "--output-dir") == 0 && i + 1 < argc) {
      output_dir = argv[++i];
    } else if (strcmp(arg, "--bench") == 0 && i + 1 < argc) {
      if (!parse_count("--bench", argv[++i], 0, MAX_BENCH_RUNS, &bench)) return 2;
    } else if (strcmp(arg, "--warmup") == 0 && i + 1 < argc) {
      if (!parse_count("--warmup", argv[++i], 0, MAX_BENCH_RUNS, &warmup)) return 2;
    } else if (strcmp(arg, "--threads") == 0 && i + 1 < argc) {
      if (!parse_count("--threads", argv[++i], 1, __PREFIX___MAX_THREADS, &threads)) return 2;
    } else if (strcmp(arg, "--weights") == 0 && i + 1 < argc) {
      weights_path = argv[++i];
    } else if (takes_value(arg)) {
      fprintf(stderr, "__prefix___cli: %s needs a value\n", arg);
      return usage();
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "__prefix___cli: unknown option %s\n", printable(arg, name, sizeof(name)));
      return usage();
    } else {
      if (num_paths == __PREFIX___NUM_INPUTS) {
        fprintf(stderr, "__prefix___cli: too many inputs: the model takes %u\n", (unsigned)__PREFIX___NUM_INPUTS);
        return usage();
      }
      paths[num_paths++] = arg;
    }
  }
  if (num_paths != __PREFIX___NUM_INPUTS) {
    fprintf(stderr, "__prefix___cli: the model takes %u input(s), got %u\n", (unsigned)__PREFIX___NUM_INPUTS,
            (unsigned)num_paths);
    return usage();
  }
  if (profile && (bench == 0 || !__prefix___profiling())) {
    fprintf(stderr, "__prefix___cli: --profile needs --bench N and a library built with __PREFIX___PROFILE=ON\n");
    return 2;
  }

  for (k = 0; k < num_paths; ++k) {
    const __prefix___tensor_info* info = __prefix___input_info(k);
    int same_shape = 1, d;
    if (npy_read(paths[k], &arrays[k], error, sizeof(error)) != 0) {
      fprintf(stderr, "__prefix___cli: input %u ('%s'): %s\n", (unsigned)k, printable(info->name, name, sizeof(name)),
              error);
      goto done;
    }
    if (arrays[k].ndim != info->ndim) same_shape = 0;
    /* With run-time dimensions the shapes choose them (checked when the context is made). */
    for (d = 0; same_shape && __PREFIX___NUM_DIMS == 0 && d < info->ndim; ++d) same_shape = arrays[k].shape[d] == info->shape[d];
    if (!same_shape || !npy_descr_accepted(info->npy_descr, arrays[k].descr, __PREFIX___DTYPE_IS_RAW_BITS(info->dtype))) {
      char want[256], got[256], descr[64];
      npy_shape_text(info->ndim, info->shape, want, sizeof(want));
      npy_shape_text(arrays[k].ndim, arrays[k].shape, got, sizeof(got));
      fprintf(stderr, "__prefix___cli: input %u ('%s') must be %s%s ('%s'); %s holds '%s'%s\n", (unsigned)k,
              printable(info->name, name, sizeof(name)), info->dtype_name, want, info->npy_descr, paths[k],
              printable(arrays[k].descr, descr, sizeof(descr)), got);
      goto done;
    }
    inputs[k] = arrays[k].data;
    input_bytes[k] = arrays[k].data_bytes;
    if (info->element_bits < 8) input_bytes[k] = npy_pack_bits(arrays[k].data, arrays[k].num_elements, info->element_bits);
    input_shapes[k] = arrays[k].shape;
  }
  for (k = 0; k < __PREFIX___NUM_OUTPUTS; ++k) {
    output_bytes[k] = __prefix___output_info(k)->num_bytes;
    /* Aligned as the kernels want their buffers, so that run computes outputs in place. */
    /* Room to unpack a sub-byte output to one element per byte for its .npy file. */
    output_blocks[k] = (unsigned char*)malloc(output_bytes[k] + __PREFIX___WORKSPACE_ALIGNMENT +
                                              (__prefix___output_info(k)->element_bits < 8 ? __prefix___output_info(k)->num_elements : 0u));
    if (output_blocks[k] == NULL) {
      fprintf(stderr, "__prefix___cli: out of memory\n");
      goto done;
    }
    outputs[k] = output_blocks[k] + (__PREFIX___WORKSPACE_ALIGNMENT - (uintptr_t)output_blocks[k] % __PREFIX___WORKSPACE_ALIGNMENT) % __PREFIX___WORKSPACE_ALIGNMENT;
  }
  if (__prefix___weights_external()) {
    /* Read by the cli (not __prefix___weights_load) so that no_malloc builds work too. */
    if (weights_path == NULL) {
      fprintf(stderr, "__prefix___cli: this library reads its weights from a file: pass --weights "
                      "weights/__prefix___weights.bin (share/__prefix__/__prefix___weights.bin once installed)\n");
      goto done;
    }
    if (npy_read_blob(weights_path, &weights, error, sizeof(error)) != 0) {
      fprintf(stderr, "__prefix___cli: --weights: %s\n", error);
      goto done;
    }
    status = __prefix___weights_attach(weights.data, weights.bytes);
    if (status != __PREFIX___OK) {
      fprintf(stderr, "__prefix___cli: --weights %s: %s\n", weights_path, __prefix___status_string(status));
      goto done;
    }
  }
  /* The cli owns the workspace, so it also works with libraries built without malloc. */
  workspace = malloc(__PREFIX___WORKSPACE_BYTES + __PREFIX___WORKSPACE_ALIGNMENT);
  if (workspace == NULL) {
    fprintf(stderr, "__prefix___cli: out of memory\n");
    goto done;
  }
  status = __prefix___context_init((unsigned char*)workspace + (__PREFIX___WORKSPACE_ALIGNMENT - (size_t)((uintptr_t)workspace % __PREFIX___WORKSPACE_ALIGNMENT)) % __PREFIX___WORKSPACE_ALIGNMENT,
                                __PREFIX___WORKSPACE_BYTES, &context);
  if (status != __PREFIX___OK) {
    fprintf(stderr, "__prefix___cli: cannot create a context: %s\n", __prefix___status_string(status));
    goto done;
  }
  status = __prefix___set_input_shapes(context, input_shapes);
  if (status != __PREFIX___OK) {
    char message[512];
    fprintf(stderr, "__prefix___cli: the inputs' shapes: %s (%s)\n", __prefix___status_string(status),
            printable(__prefix___last_error(context), message, sizeof(message)));
    goto done;
  }
  status = __prefix___context_set_threads(context, threads > __PREFIX___MAX_THREADS ? -1 : (int)threads);
  if (status != __PREFIX___OK) {
    fprintf(stderr, "__prefix___cli: --threads %ld: %s\n", threads, __prefix___last_error(context));
    goto done;
  }
  status = __prefix___run_buffers(context, inputs, input_bytes, num_paths, outputs, output_bytes, __PREFIX___NUM_OUTPUTS);
  if (status != __PREFIX___OK) {
    char message[512];
    fprintf(stderr, "__prefix___cli: run failed: %s (%s)\n", __prefix___status_string(status),
            printable(__prefix___last_error(context), message, sizeof(message)));
    goto done;
  }
  if (bench > 0) {
    double* times = (double*)malloc((size_t)bench * sizeof(double));
    /* one more than the steps: a model of none still gets an array */
    double* step_seconds = profile ? (double*)calloc(__PREFIX___NUM_STEPS + 1, sizeof(double)) : NULL;
    long r, runs_with_workers = 0;
    if (times == NULL || (profile && step_seconds == NULL)) {
      free(times);
      goto done;
    }
    for (r = 0; r < warmup; ++r) {
      __prefix___run_buffers(context, inputs, input_bytes, num_paths, outputs, output_bytes, __PREFIX___NUM_OUTPUTS);
    }
    __prefix___profile_attach(context, step_seconds);
    for (r = 0; r < bench; ++r) {
      double start = now_ms();
      __prefix___run_buffers(context, inputs, input_bytes, num_paths, outputs, output_bytes, __PREFIX___NUM_OUTPUTS);
      times[r] = now_ms() - start;
      if (__prefix___context_threads_used(context) > 1) ++runs_with_workers;
    }
    qsort(times, (size_t)bench, sizeof(double), compare_doubles);
    printf("latency_ms min=%.6f median=%.6f max=%.6f\n", times[0],
           bench % 2 ? times[bench / 2] : 0.5 * (times[bench / 2 - 1] + times[bench / 2]), times[bench - 1]);
    printf("kernels %s\n", __prefix___kernel_set(context));
    /* A context with workers goes without them when that is faster (a busy machine). */
    if (threads > 1) printf("threads %ld used in %ld of %ld runs\n", threads, runs_with_workers, bench);
    if (profile) {
      double total = 0.0;
      for (k = 0; __prefix___step_kernel(k) != NULL; ++k) {
        double ms = step_seconds[k] * 1e3 / (double)bench;
        total += ms;
        printf("step %u %s %.6f\n", (unsigned)k, __prefix___step_kernel(k), ms);
      }
      printf("steps_ms %.6f\n", total);
    }
    __prefix___profile_attach(context, NULL);
    free(step_seconds);
    free(times);
  }
  if (make_directory(output_dir) != 0) {
    fprintf(stderr, "__prefix___cli: cannot create the output directory %s\n", output_dir);
    goto done;
  }
  for (k = 0; k < __PREFIX___NUM_OUTPUTS; ++k) {
    const __prefix___tensor_info* info = __prefix___output_info(k);
    /* The actual shape: a bounded output (NonZero, Unique, ...) may fill less than its buffer. */
    int64_t dims[__PREFIX___MAX_OUTPUT_NDIM + 1];
    size_t bytes = __prefix___output_num_bytes(context, k);
    char path[4096];
    int length;
    __prefix___output_shape(context, k, dims);
    length = named_outputs ? snprintf(path, sizeof(path), "%s/%s.npy", output_dir, info->c_name)
                           : snprintf(path, sizeof(path), "%s/output_%u.npy", output_dir, (unsigned)k);
    if (length < 0 || (size_t)length >= sizeof(path)) {
      fprintf(stderr, "__prefix___cli: the output directory's path is too long\n");
      goto done;
    }
    if (info->element_bits < 8) {
      /* .npy holds one element per byte: unpacked from the end, so that it fits in place */
      size_t elements = __prefix___output_num_elements(context, k), e;
      unsigned char* data = (unsigned char*)outputs[k];
      for (e = elements; e-- > 0;) data[e] = (unsigned char)npy_packed_element(data, e, info->element_bits);
      bytes = elements;
    }
    if (npy_write(path, info->npy_descr, info->ndim, dims, outputs[k], bytes, error, sizeof(error)) != 0) {
      fprintf(stderr, "__prefix___cli: output %u ('%s'): %s\n", (unsigned)k, printable(info->name, name, sizeof(name)),
              error);
      goto done;
    }
    if (!quiet) {
      char shape[256], file[256];
      npy_shape_text(info->ndim, dims, shape, sizeof(shape));
      printf("output %u '%s' %s%s -> %s\n", (unsigned)k, printable(info->name, name, sizeof(name)), info->dtype_name,
             shape, printable(path, file, sizeof(file)));
    }
  }
  exit_code = 0;

done:
  __prefix___context_destroy(context);
  free(workspace);
  for (k = 0; k < num_paths; ++k) npy_free(&arrays[k]);
  /* The weights stay attached to the library until exit; freeing them is the last step. */
  npy_free_blob(&weights);
  for (k = 0; k < __PREFIX___NUM_OUTPUTS; ++k) free(output_blocks[k]);
  return exit_code;
}
