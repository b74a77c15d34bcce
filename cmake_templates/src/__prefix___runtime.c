/*__banner__*/
/*
 * How to run a model described by the tables in __prefix___model.c: contexts, input
 * checks, the kernel calls, and the backend functions the kernels need (scratch memory
 * from the arena, error messages). This file is the same for every model.
 */
#if defined(__PREFIX___PROFILE) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include <string.h>
#ifndef __PREFIX___NO_MALLOC
#include <stdlib.h>
#endif
#ifdef __PREFIX___PROFILE
#include <time.h>
#endif

#include "__prefix___internal.h"

/* Thread-local: the context whose kernels run on this thread (kernels call back without one). */
#if defined(__PREFIX___SINGLE_THREADED)
#define __PREFIX___THREAD_LOCAL
#elif defined(_MSC_VER)
#define __PREFIX___THREAD_LOCAL __declspec(thread)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_THREADS__)
#define __PREFIX___THREAD_LOCAL _Thread_local
#else
#define __PREFIX___THREAD_LOCAL __thread
#endif

#define __PREFIX___MESSAGE_BYTES 256

struct __prefix___context {
  const __prefix___kernel_fn* step_kernels;  /* a twin set's, or NULL: the step table's */
  const char* twin_name;  /* that twin set's label */
  unsigned char* arena;
  void* owned_block;  /* what context_create allocated, or NULL */
  unsigned char* scratch_top;
  unsigned char* scratch_end;
  double* step_seconds;  /* __prefix___profile_attach's array, or NULL */
  char message[__PREFIX___MESSAGE_BYTES];
  int64_t extents[__PREFIX___NUM_OUTPUTS + 1];  /* bounded outputs: extent in the last run */
  DLTensor tensors[__PREFIX___NUM_BUFFERS + 1];
  /* Dimensions chosen at run time (__prefix___set_dims) and the extents computed from them,
   * which the tensors of shapes that depend on them point into; the scratch copy is checked
   * before it replaces them. */
  int64_t dims[__PREFIX___NUM_DIMS + 1];
  int64_t shape_values[__PREFIX___NUM_SHAPE_VALUES + 1];
  int64_t shape_scratch[__PREFIX___NUM_SHAPE_VALUES + 1];
  TVMFFIAny args[__PREFIX___NUM_ARGS + 1];
  __prefix___pool pool;
};

/* Compile-time check that the size promised in the public header holds on this platform. */
typedef char __prefix___context_fits[(sizeof(struct __prefix___context) <= __PREFIX___CONTEXT_BYTES) ? 1 : -1];

static __PREFIX___THREAD_LOCAL __prefix___context* __prefix___current;

#ifdef __PREFIX___PROFILE
static double __prefix___seconds_now(void) {
  struct timespec t;
#if defined(_WIN32)
  timespec_get(&t, TIME_UTC);
#else
  clock_gettime(CLOCK_MONOTONIC, &t);
#endif
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#endif

static void __prefix___set_message(__prefix___context* context, const char* text) {
  if (context != NULL) {
    size_t n = strlen(text);
    if (n >= __PREFIX___MESSAGE_BYTES) n = __PREFIX___MESSAGE_BYTES - 1;
    memcpy(context->message, text, n);
    context->message[n] = '\0';
  }
}

/* ---- backend functions the kernels call ---------------------------------------------- */

void* __prefix___backend_alloc_workspace(int device_type, int device_id, uint64_t nbytes,
                                  int dtype_code_hint, int dtype_bits_hint) {
  __prefix___context* context = __prefix___current;
  uint64_t rounded = (nbytes + 63u) & ~(uint64_t)63u;
  unsigned char* at;
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (context == NULL) return NULL;
  at = context->scratch_top;
  if (rounded > (uint64_t)(context->scratch_end - at)) {
    __prefix___set_message(context, "kernel scratch exceeds the planned size");
    return NULL;
  }
  context->scratch_top = at + rounded;
  return at;
}

int __prefix___backend_free_workspace(int device_type, int device_id, void* ptr) {
  __prefix___context* context = __prefix___current;
  (void)device_type;
  (void)device_id;
  /* Scratch is released in LIFO order: freeing a block frees everything above it. */
  if (context != NULL && ptr != NULL) context->scratch_top = (unsigned char*)ptr;
  return 0;
}

void __prefix___backend_set_error(const char* kind, const char** message_parts, int32_t num_parts) {
  __prefix___context* context = __prefix___current;
  size_t used;
  int32_t i;
  if (context == NULL) return;
  __prefix___set_message(context, kind != NULL ? kind : "Error");
  used = strlen(context->message);
  for (i = 0; i < num_parts && used + 2 < __PREFIX___MESSAGE_BYTES; ++i) {
    const char* part = message_parts[i];
    size_t n;
    if (part == NULL) continue;
    if (i == 0) context->message[used++] = ':', context->message[used++] = ' ';
    n = strlen(part);
    if (used + n >= __PREFIX___MESSAGE_BYTES) n = __PREFIX___MESSAGE_BYTES - 1 - used;
    memcpy(context->message + used, part, n);
    used += n;
    context->message[used] = '\0';
  }
}

int __prefix___backend_parallel_launch(FTVMParallelLambda lambda, void* cdata, int num_task) {
  __prefix___context* context = __prefix___current;
  if (context == NULL) {
    TVMParallelGroupEnv env;
    env.sync_handle = NULL;
    env.num_task = 1;
    return lambda(0, &env, cdata);
  }
  return __prefix___pool_run(&context->pool, lambda, cdata, num_task);
}

int __prefix___backend_parallel_barrier(int task_id, TVMParallelGroupEnv* penv) {
  /* The default schedules never synchronise inside a parallel loop. */
  (void)task_id;
  return penv != NULL && penv->num_task > 1 ? -1 : 0;
}

/* LLVM objects reach the backend through these pointers (TVM's loader would fill them);
 * the C kernels call the functions directly. Prefixed, so packages do not collide. */
void* (*__prefix____TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = __prefix___backend_alloc_workspace;
int (*__prefix____TVMBackendFreeWorkspace)(int, int, void*) = __prefix___backend_free_workspace;
int (*__prefix____TVMBackendParallelLaunch)(FTVMParallelLambda, void*, int) = __prefix___backend_parallel_launch;
int (*__prefix____TVMBackendParallelBarrier)(int, TVMParallelGroupEnv*) = __prefix___backend_parallel_barrier;

/* ---- public API ----------------------------------------------------------------------- */

static const __prefix___tensor_info* __prefix___table_entry(const __prefix___tensor_info* table, size_t index) {
  size_t i;
  for (i = 0; i < index; ++i) {
    if (table[i].name == NULL) return NULL;
  }
  return table[index].name != NULL ? &table[index] : NULL;
}

const __prefix___tensor_info* __prefix___input_info(size_t index) {
  return __prefix___table_entry(__prefix___input_table, index);
}

const __prefix___tensor_info* __prefix___output_info(size_t index) {
  return __prefix___table_entry(__prefix___output_table, index);
}

size_t __prefix___workspace_size(void) { return __PREFIX___WORKSPACE_BYTES; }

__prefix___status __prefix___context_init(void* workspace, size_t workspace_bytes,
                                     __prefix___context** out_context) {
  __prefix___context* context;
  size_t i;
  if (out_context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  *out_context = NULL;
  if (workspace == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  if ((uintptr_t)workspace % __PREFIX___WORKSPACE_ALIGNMENT != 0) return __PREFIX___ERROR_WORKSPACE_MISALIGNED;
  if (workspace_bytes < __PREFIX___WORKSPACE_BYTES) return __PREFIX___ERROR_WORKSPACE_TOO_SMALL;
#if defined(__PREFIX___OBJECTS_X86_64) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  /* The x86-64 objects use vector instructions this CPU may lack: an error, not SIGILL. */
  if (!__PREFIX___OBJECTS_CPU_SUPPORTED()) return __PREFIX___ERROR_UNSUPPORTED_CPU;
#endif
#if defined(__PREFIX___OBJECTS_AARCH64) && defined(__aarch64__) && defined(__linux__)
  if (!__PREFIX___AARCH64_OBJECTS_CPU_SUPPORTED()) return __PREFIX___ERROR_UNSUPPORTED_CPU;
#endif
#ifdef __PREFIX___EXTERNAL_WEIGHTS
  if (__PREFIX___WEIGHTS_FILE_BYTES > 0 && __prefix___attached_weights == NULL) return __PREFIX___ERROR_WEIGHTS_NOT_LOADED;
#endif
  context = (__prefix___context*)workspace;
  memset(context, 0, sizeof(*context));
#if defined(__PREFIX___WIDE_KERNELS_LINKED)
  context->step_kernels = __prefix___twin_step_kernels(&context->twin_name);
#endif
  context->arena = (unsigned char*)workspace + __PREFIX___CONTEXT_BYTES;
  context->pool.threads = 1;
  for (i = 0; i < __PREFIX___NUM_BUFFERS; ++i) {
    const __prefix___buffer_desc* desc = &__prefix___buffer_table[i];
    DLTensor* tensor = &context->tensors[i];
    if (desc->home == __PREFIX___HOME_ARENA) {
      tensor->data = context->arena + desc->slot;
    } else if (desc->home == __PREFIX___HOME_CONSTANT) {
      /* Kernels never write their inputs; the cast only satisfies DLTensor's type. */
      tensor->data = (void*)(uintptr_t)(__PREFIX___WEIGHTS_BASE + __prefix___constant_offsets[desc->slot]);
    }
    tensor->device.device_type = __PREFIX___DL_CPU;
    tensor->device.device_id = 0;
    tensor->ndim = desc->ndim;
    tensor->dtype.code = desc->dtype_code;
    tensor->dtype.bits = desc->dtype_bits;
    tensor->dtype.lanes = 1;
    tensor->shape = desc->dynamic_shape >= 0 ? &context->shape_values[desc->dynamic_shape]
                                             : (int64_t*)(uintptr_t)desc->shape;
    tensor->strides = NULL;
    tensor->byte_offset = 0;
  }
  /* Loops run to the tables' NULL sentinels: a count of 0 would trip -Wtype-limits. */
  for (i = 0; __prefix___step_table[i].kernel != NULL; ++i) {
    uint32_t a;
    for (a = __prefix___step_table[i].first_arg; a < __prefix___step_table[i].first_arg + __prefix___step_table[i].num_args; ++a) {
      const __prefix___arg_desc* desc = &__prefix___arg_table[a];
      if (desc->kind == __PREFIX___ARG_TENSOR) {
        context->args[a].type_index = __PREFIX___FFI_DLTENSOR_PTR;
        context->args[a].v_ptr = &context->tensors[desc->value];
      } else {
        context->args[a].type_index = __PREFIX___FFI_INT;
        context->args[a].v_int64 = desc->value;  /* a run-time size: set by set_dims below */
      }
    }
  }
#if __PREFIX___NUM_DIMS > 0
  {
    /* Until the caller chooses, every dimension is at its largest (the header's shapes). */
    int64_t largest[__PREFIX___NUM_DIMS];
    for (i = 0; i < __PREFIX___NUM_DIMS; ++i) largest[i] = __prefix___dim_table[i].max;
    if (__prefix___set_dims(context, largest) != __PREFIX___OK) return __PREFIX___ERROR_DIMS;
  }
#endif
  *out_context = context;
  return __PREFIX___OK;
}

#ifndef __PREFIX___NO_MALLOC
__prefix___status __prefix___context_create(__prefix___context** out_context) {
  unsigned char* block;
  unsigned char* aligned;
  __prefix___status status;
  if (out_context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  *out_context = NULL;
  block = (unsigned char*)malloc(__PREFIX___WORKSPACE_BYTES + __PREFIX___WORKSPACE_ALIGNMENT);
  if (block == NULL) return __PREFIX___ERROR_OUT_OF_MEMORY;
  aligned = block + (__PREFIX___WORKSPACE_ALIGNMENT - (uintptr_t)block % __PREFIX___WORKSPACE_ALIGNMENT) % __PREFIX___WORKSPACE_ALIGNMENT;
  status = __prefix___context_init(aligned, __PREFIX___WORKSPACE_BYTES, out_context);
  if (status != __PREFIX___OK) {
    free(block);
    return status;
  }
  (*out_context)->owned_block = block;
  return __PREFIX___OK;
}
#endif

void __prefix___context_destroy(__prefix___context* context) {
  if (context == NULL) return;
  __prefix___pool_stop(&context->pool);
#ifndef __PREFIX___NO_MALLOC
  if (context->owned_block != NULL) free(context->owned_block);
#endif
}

__prefix___status __prefix___context_set_threads(__prefix___context* context, int threads) {
  __prefix___status status;
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  if (threads < 1 || threads > __PREFIX___MAX_THREADS) {
    __prefix___set_message(context, "thread count must be 1 to " __PREFIX___TEXT(__PREFIX___MAX_THREADS));
    return __PREFIX___ERROR_THREADS;
  }
  status = __prefix___pool_set_threads(&context->pool, threads);
  if (status != __PREFIX___OK) {
    __prefix___set_message(context, __PREFIX___THREADS ? "could not start worker threads"
                                                   : "this build has no threads (__PREFIX___THREADS off)");
  }
  return status;
}

int __prefix___context_threads(const __prefix___context* context) {
  return context != NULL ? context->pool.threads : 0;
}

int __prefix___context_threads_used(const __prefix___context* context) {
  return context != NULL ? context->pool.threads_used : 0;
}

const char* __prefix___last_error(const __prefix___context* context) {
  return context != NULL ? context->message : "no context (NULL)";
}

int __prefix___profiling(void) {
#ifdef __PREFIX___PROFILE
  return 1;
#else
  return 0;
#endif
}

__prefix___status __prefix___profile_attach(__prefix___context* context, double* seconds) {
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->step_seconds = seconds;
  return __PREFIX___OK;
}

const char* __prefix___step_kernel(size_t step) {
  const size_t steps = __PREFIX___NUM_STEPS;  /* a variable: "step < 0" would warn for a model of none */
  return step < steps ? __prefix___step_table[step].name : NULL;
}

const char* __prefix___kernel_set(const __prefix___context* context) {
  if (context == NULL) return "";
  if (context->step_kernels != NULL) return context->twin_name;
  return __PREFIX___KERNEL_SET_NAME;
}

const char* __prefix___status_string(__prefix___status status) {
  switch (status) {
    case __PREFIX___OK: return "ok";
    case __PREFIX___ERROR_NULL_ARGUMENT: return "a required pointer is NULL";
    case __PREFIX___ERROR_COUNT_MISMATCH: return "wrong number of inputs or outputs";
    case __PREFIX___ERROR_SIZE_MISMATCH: return "a buffer has the wrong byte size";
    case __PREFIX___ERROR_WORKSPACE_TOO_SMALL: return "workspace smaller than __PREFIX___WORKSPACE_BYTES";
    case __PREFIX___ERROR_WORKSPACE_MISALIGNED: return "workspace not aligned to __PREFIX___WORKSPACE_ALIGNMENT";
    case __PREFIX___ERROR_OUT_OF_MEMORY: return "out of memory";
    case __PREFIX___ERROR_KERNEL_FAILED: return "a kernel failed";
    case __PREFIX___ERROR_INVALID_INPUT: return "input data the model cannot take (an index out of range)";
    case __PREFIX___ERROR_DIMS: return "a dimension outside its range, or inputs that disagree on a dimension";
    case __PREFIX___ERROR_THREADS: return "threads unavailable or thread count out of range";
    case __PREFIX___ERROR_UNSUPPORTED_CPU:
      return "this CPU lacks the instructions of the kernels built in; rebuild with __PREFIX___PORTABLE_KERNELS=ON";
    case __PREFIX___ERROR_WEIGHTS_NOT_LOADED:
      return "this build keeps its weights in a file: call __prefix___weights_load() or __prefix___weights_attach() first";
    case __PREFIX___ERROR_WEIGHTS_UNREADABLE: return "the weights file cannot be opened or read";
    case __PREFIX___ERROR_WEIGHTS_MISMATCH:
      return "the weights are not this model's (their size or SHA-256 differs from the generated code's)";
  }
  return "unknown status";
}

/* The message becomes the parts joined, cut to fit; a part may be the message itself.
 * (No snprintf: the library needs no stdio, which bare-metal builds would pay for.) */
static void __prefix___set_message_parts(__prefix___context* context, const char* const* parts, int num_parts) {
  char text[__PREFIX___MESSAGE_BYTES];
  size_t used = 0;
  int i;
  for (i = 0; i < num_parts; ++i) {
    const char* part = parts[i];
    while (part != NULL && *part != '\0' && used + 1 < sizeof(text)) text[used++] = *part++;
  }
  text[used] = '\0';
  __prefix___set_message(context, text);
}

static __prefix___status __prefix___fail(__prefix___context* context, __prefix___status status,
                                   const char* what, const char* name) {
  const char* parts[3];
  parts[0] = what;
  parts[1] = name;
  parts[2] = name != NULL ? "'" : NULL;
  __prefix___set_message_parts(context, parts, 3);
  return status;
}

static int __prefix___overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + b_bytes && y < x + a_bytes;
}

/* ---- dimensions chosen at run time ---------------------------------------------------- */

/* Extent d of an input or output: its tensor's (which follows the dimensions set) when the
 * model has run-time dimensions, else the I/O table's. */
static int64_t __prefix___io_extent(const __prefix___context* context, const __prefix___tensor_info* info,
                                  uint32_t buffer, int32_t d) {
#if __PREFIX___NUM_DIMS > 0
  if (context->tensors[buffer].ndim == info->ndim) return context->tensors[buffer].shape[d];
#else
  (void)context;
  (void)buffer;
#endif
  return info->shape[d];
}

static size_t __prefix___io_elements(const __prefix___context* context, const __prefix___tensor_info* info,
                                   uint32_t buffer) {
  size_t count = 1;
  int32_t d;
  if (__PREFIX___NUM_DIMS == 0) return info->num_elements;
  for (d = 0; d < info->ndim; ++d) count *= (size_t)__prefix___io_extent(context, info, buffer, d);
  return count;
}

const __prefix___dim_info* __prefix___dim(size_t index) {
  size_t i;  /* to the sentinel: index < 0 dimensions would trip -Wtype-limits */
  for (i = 0; __prefix___dim_table[i].name != NULL; ++i) {
    if (i == index) return &__prefix___dim_table[i];
  }
  return NULL;
}

__prefix___status __prefix___set_dims(__prefix___context* context, const int64_t* dims) {
#if __PREFIX___NUM_DIMS > 0
  size_t i;
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  if (dims == NULL) return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL dims", NULL);
  for (i = 0; i < __PREFIX___NUM_DIMS; ++i) {
    if (dims[i] < __prefix___dim_table[i].min || dims[i] > __prefix___dim_table[i].max) {
      return __prefix___fail(context, __PREFIX___ERROR_DIMS, "dimension outside its range (see __prefix___dim): '",
                          __prefix___dim_table[i].name);
    }
  }
  __prefix___compute_shapes(dims, context->shape_scratch);
  for (i = 0; i < __PREFIX___NUM_SHAPE_VALUES; ++i) {
    /* The arena holds each tensor at its largest extents; a model whose sizes shrink as a
     * dimension grows could ask for more at other values: refused, never overrun. */
    if (context->shape_scratch[i] < 0 || context->shape_scratch[i] > __prefix___shape_limits[i]) {
      return __prefix___fail(context, __PREFIX___ERROR_DIMS,
                          "these dimensions give a tensor extent beyond what the arena was planned for", NULL);
    }
  }
  memcpy(context->shape_values, context->shape_scratch, sizeof(context->shape_values));
  memcpy(context->dims, dims, sizeof(int64_t) * __PREFIX___NUM_DIMS);
  for (i = 0; __prefix___step_table[i].kernel != NULL; ++i) {
    uint32_t a;
    for (a = __prefix___step_table[i].first_arg; a < __prefix___step_table[i].first_arg + __prefix___step_table[i].num_args; ++a) {
      if (__prefix___arg_table[a].kind == __PREFIX___ARG_SIZE) {
        context->args[a].v_int64 = context->shape_values[__prefix___arg_table[a].value];
      }
    }
  }
  return __PREFIX___OK;
#else
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  (void)dims;
  return __PREFIX___OK;  /* no dimension to set */
#endif
}

__prefix___status __prefix___get_dims(const __prefix___context* context, int64_t* dims) {
  if (context == NULL || (__PREFIX___NUM_DIMS > 0 && dims == NULL)) return __PREFIX___ERROR_NULL_ARGUMENT;
  if (__PREFIX___NUM_DIMS > 0) memcpy(dims, context->dims, sizeof(int64_t) * __PREFIX___NUM_DIMS);
  return __PREFIX___OK;
}

__prefix___status __prefix___set_input_shapes(__prefix___context* context, const int64_t* const* shapes) {
  int64_t dims[__PREFIX___NUM_DIMS + 1];
  unsigned char seen[__PREFIX___NUM_DIMS + 1];
  size_t i;
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  if (shapes == NULL && __PREFIX___NUM_INPUTS > 0) {
    return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL array of shapes", NULL);
  }
  memset(dims, 0, sizeof(dims));
  memset(seen, 0, sizeof(seen));
  for (i = 0; __prefix___input_table[i].name != NULL; ++i) {
    const __prefix___tensor_info* info = &__prefix___input_table[i];
    int32_t d;
    if (shapes[i] == NULL) return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL shape for input '", info->name);
    for (d = 0; d < info->ndim; ++d) {
      int32_t dim = __prefix___input_axis_dims[__prefix___input_axis_first[i] + (uint32_t)d];
      int64_t value = shapes[i][d];
      if (dim < 0) {
        if (value != info->shape[d]) {
          return __prefix___fail(context, __PREFIX___ERROR_SIZE_MISMATCH, "a fixed dimension differs from the model's in input '", info->name);
        }
        continue;
      }
      if (seen[dim] && dims[dim] != value) {
        return __prefix___fail(context, __PREFIX___ERROR_DIMS,
                            "inputs disagree on a dimension they share; the second to give it is input '", info->name);
      }
      dims[dim] = value;
      seen[dim] = 1;
    }
  }
  return __prefix___set_dims(context, dims);
}

__prefix___status __prefix___run_shaped(__prefix___context* context, const int64_t* dims,
                                   const __prefix___inputs* inputs, const __prefix___outputs* outputs) {
  __prefix___status status = __prefix___set_dims(context, dims);
  return status != __PREFIX___OK ? status : __prefix___run(context, inputs, outputs);
}

/* Whether output i can be computed straight into the caller's buffer: the plan allows it,
   the buffer is aligned as the kernels assume, and it overlaps no input and no other output
   (kernels would overwrite what they still read). Otherwise it is copied out of the arena. */
static int __prefix___output_in_place(const __prefix___context* context, const void* const* inputs,
                                       void* const* outputs, size_t index) {
  const __prefix___tensor_info* info = &__prefix___output_table[index];
  size_t j;
  size_t bytes = __prefix___output_capacity(context, index);
  (void)info;
  if (!__prefix___output_direct[index] || (uintptr_t)outputs[index] % __PREFIX___WORKSPACE_ALIGNMENT != 0) return 0;
  for (j = 0; __prefix___input_table[j].name != NULL; ++j) {
    if (__prefix___overlaps(outputs[index], bytes, inputs[j], __prefix___input_num_bytes(context, j))) return 0;
  }
  for (j = 0; __prefix___output_table[j].name != NULL; ++j) {
    if (j != index && __prefix___overlaps(outputs[index], bytes, outputs[j], __prefix___output_capacity(context, j))) return 0;
  }
  return 1;
}

/* Inputs and outputs are checked; now bind, run every kernel in order, and copy out what
   was not computed in place. */
static __prefix___status __prefix___execute(__prefix___context* context, const void* const* inputs,
                                       void* const* outputs) {
  void* input_data[__PREFIX___NUM_INPUTS + 1];
  unsigned char in_place[__PREFIX___NUM_OUTPUTS + 1];
  __prefix___context* outer = __prefix___current;
  __prefix___status status = __PREFIX___OK;
  uint64_t float_mode; /* the caller's, restored after the kernels (subnormals flushed) */
  size_t i;
  for (i = 0; __prefix___input_table[i].name != NULL; ++i) {
    /* Kernels never write their inputs; the cast only satisfies DLTensor's type. */
    input_data[i] = (void*)(uintptr_t)inputs[i];
#if __PREFIX___STAGE_INPUTS
    if ((uintptr_t)inputs[i] % __PREFIX___WORKSPACE_ALIGNMENT != 0) {
      input_data[i] = context->arena + __prefix___input_staging[i];
      memcpy(input_data[i], inputs[i], __prefix___input_num_bytes(context, i));
    }
#endif
  }
  for (i = 0; __prefix___output_table[i].name != NULL; ++i) {
    in_place[i] = (unsigned char)__prefix___output_in_place(context, inputs, outputs, i);
  }
  /* Only the buffers that are (views of) inputs or outputs: a long unroll has thousands. */
  for (i = 0; __prefix___io_buffers[i] >= 0; ++i) {
    int32_t b = __prefix___io_buffers[i];
    const __prefix___buffer_desc* desc = &__prefix___buffer_table[b];
    if (desc->home == __PREFIX___HOME_INPUT) {
      context->tensors[b].data = input_data[desc->slot];
    } else if (desc->output >= 0 && in_place[desc->output]) {
      context->tensors[b].data = outputs[desc->output];
    }
  }
  __prefix___current = context;
  float_mode = __prefix___float_mode_flush();
  __prefix___pool_run_begin(&context->pool);
  for (i = 0; __prefix___step_table[i].kernel != NULL; ++i) {
    const __prefix___step_desc* step = &__prefix___step_table[i];
    __prefix___kernel_fn kernel;
    TVMFFIAny result;
    int32_t rc;
#ifdef __PREFIX___PROFILE
    double started = context->step_seconds != NULL ? __prefix___seconds_now() : 0.0;
#endif
    if (step->guard >= 0 && context->shape_values[step->guard] == 0) {
      i += step->skip;
      continue;
    }
    context->scratch_top = context->arena + step->scratch_offset;
    context->scratch_end = context->scratch_top + step->scratch_bytes;
    result.type_index = 0;
    result.zero_padding = 0;
    result.v_int64 = 0;
    kernel = context->step_kernels != NULL ? context->step_kernels[i] : step->kernel;
    rc = kernel(NULL, &context->args[step->first_arg], (int32_t)step->num_args, &result);
#ifdef __PREFIX___PROFILE
    if (context->step_seconds != NULL) context->step_seconds[i] += __prefix___seconds_now() - started;
#endif
    if (rc == __PREFIX___BUILTIN_INVALID_INPUT) {  /* the builtin's message says what and where */
      status = __PREFIX___ERROR_INVALID_INPUT;
      break;
    }
    if (rc != 0) {
      const char* parts[4];
      parts[0] = "kernel ";
      parts[1] = step->name;
      parts[2] = " failed: ";
      parts[3] = context->message;
      __prefix___set_message_parts(context, parts, 4);
      status = __PREFIX___ERROR_KERNEL_FAILED;
      break;
    }
  }
  __prefix___pool_run_end(&context->pool, status == __PREFIX___OK);
  __prefix___float_mode_restore(float_mode);
  __prefix___current = outer;
  /* The next run's buffers may not allow it: outputs computed in place go back to the arena. */
  for (i = 0; __prefix___io_buffers[i] >= 0; ++i) {
    int32_t b = __prefix___io_buffers[i];
    const __prefix___buffer_desc* desc = &__prefix___buffer_table[b];
    if (desc->output >= 0 && in_place[desc->output]) context->tensors[b].data = context->arena + desc->slot;
  }
  if (status != __PREFIX___OK) return status;
  for (i = 0; __prefix___output_table[i].name != NULL; ++i) {
    const __prefix___tensor_info* info = &__prefix___output_table[i];
    size_t used;
    if (__prefix___output_extent_buffers[i] >= 0) {
      /* A bounded output: dense data for the actual extent, then zeros up to the bound. */
      int64_t bound = info->shape[info->dynamic_axis];
      int64_t extent;
      memcpy(&extent, context->tensors[__prefix___output_extent_buffers[i]].data, sizeof(extent));
      if (extent < 0 || extent > bound) extent = bound;
      context->extents[i] = extent;
    }
    used = __prefix___output_num_bytes(context, i);
    if (in_place[i]) continue;  /* computed there (never a bounded output) */
    /* memmove: an output may be a pass-through of an input the caller also gave as output. */
    memmove(outputs[i], context->tensors[__prefix___output_buffers[i]].data, used);
    memset((unsigned char*)outputs[i] + used, 0, __prefix___output_capacity(context, i) - used);
  }
  return __PREFIX___OK;
}

__prefix___status __prefix___output_shape(const __prefix___context* context, size_t index, int64_t* dims) {
  const __prefix___tensor_info* info = __prefix___output_info(index);
  int32_t d;
  if (context == NULL || dims == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  if (info == NULL) return __PREFIX___ERROR_COUNT_MISMATCH;
  for (d = 0; d < info->ndim; ++d) dims[d] = __prefix___io_extent(context, info, __prefix___output_buffers[index], d);
  if (info->dynamic_axis >= 0) dims[info->dynamic_axis] = context->extents[index];
  return __PREFIX___OK;
}

__prefix___status __prefix___input_shape(const __prefix___context* context, size_t index, int64_t* dims) {
  const __prefix___tensor_info* info = __prefix___input_info(index);
  int32_t d;
  if (context == NULL || dims == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  if (info == NULL) return __PREFIX___ERROR_COUNT_MISMATCH;
  for (d = 0; d < info->ndim; ++d) dims[d] = __prefix___io_extent(context, info, __prefix___input_buffers[index], d);
  return __PREFIX___OK;
}

size_t __prefix___input_num_bytes(const __prefix___context* context, size_t index) {
  const __prefix___tensor_info* info = __prefix___input_info(index);
  if (context == NULL || info == NULL || info->num_elements == 0) return 0u;
  if (__PREFIX___NUM_DIMS == 0) return info->num_bytes;  /* packed sub-byte types: not bytes per element */
  return info->num_bytes / info->num_elements * __prefix___io_elements(context, info, __prefix___input_buffers[index]);
}

size_t __prefix___output_capacity(const __prefix___context* context, size_t index) {
  const __prefix___tensor_info* info = __prefix___output_info(index);
  if (context == NULL || info == NULL || info->num_elements == 0) return 0u;
  if (info->dynamic_axis >= 0 || __PREFIX___NUM_DIMS == 0) return info->num_bytes;  /* a bounded output: its bound */
  return info->num_bytes / info->num_elements * __prefix___io_elements(context, info, __prefix___output_buffers[index]);
}

size_t __prefix___output_num_bytes(const __prefix___context* context, size_t index) {
  const __prefix___tensor_info* info = __prefix___output_info(index);
  if (info == NULL || info->num_elements == 0) return 0u;
  if (__PREFIX___NUM_DIMS == 0 && info->dynamic_axis < 0) return info->num_bytes;
  return info->num_bytes / info->num_elements * __prefix___output_num_elements(context, index);
}

size_t __prefix___output_num_elements(const __prefix___context* context, size_t index) {
  const __prefix___tensor_info* info = __prefix___output_info(index);
  int64_t bound;
  if (context == NULL || info == NULL) return 0u;
  if (info->dynamic_axis < 0) return __prefix___io_elements(context, info, __prefix___output_buffers[index]);
  bound = info->shape[info->dynamic_axis];
  return bound > 0 ? info->num_elements / (size_t)bound * (size_t)context->extents[index] : 0u;
}

__prefix___status __prefix___run_buffers(__prefix___context* context, const void* const* inputs,
                                    const size_t* input_bytes, size_t num_inputs,
                                    void* const* outputs, const size_t* output_bytes,
                                    size_t num_outputs) {
  size_t i;
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  if (num_inputs != __PREFIX___NUM_INPUTS) {
    return __prefix___fail(context, __PREFIX___ERROR_COUNT_MISMATCH, "wrong number of inputs (expected " __PREFIX___TEXT(__PREFIX___NUM_INPUTS) ")", NULL);
  }
  if (num_outputs != __PREFIX___NUM_OUTPUTS) {
    return __prefix___fail(context, __PREFIX___ERROR_COUNT_MISMATCH, "wrong number of outputs (expected " __PREFIX___TEXT(__PREFIX___NUM_OUTPUTS) ")", NULL);
  }
  if ((num_inputs > 0 && (inputs == NULL || input_bytes == NULL)) || outputs == NULL || output_bytes == NULL) {
    return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL array of buffers or sizes", NULL);
  }
  for (i = 0; i < num_inputs; ++i) {
    if (inputs[i] == NULL) {
      return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL buffer for input '", __prefix___input_table[i].name);
    }
    if (input_bytes[i] != __prefix___input_num_bytes(context, i)) {
      return __prefix___fail(context, __PREFIX___ERROR_SIZE_MISMATCH, "wrong byte size for input '", __prefix___input_table[i].name);
    }
  }
  for (i = 0; i < num_outputs; ++i) {
    if (outputs[i] == NULL) {
      return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL buffer for output '", __prefix___output_table[i].name);
    }
    /* Static models: the exact size. With run-time dimensions: room for the output at the
     * dimensions set (a buffer for the largest serves every run). */
    if (__PREFIX___NUM_DIMS > 0 ? output_bytes[i] < __prefix___output_capacity(context, i)
                                : output_bytes[i] != __prefix___output_capacity(context, i)) {
      return __prefix___fail(context, __PREFIX___ERROR_SIZE_MISMATCH, "wrong byte size for output '", __prefix___output_table[i].name);
    }
  }
  return __prefix___execute(context, inputs, outputs);
}

__prefix___status __prefix___run(__prefix___context* context, const __prefix___inputs* inputs,
                            const __prefix___outputs* outputs) {
  const void* input_ptrs[__PREFIX___NUM_INPUTS + 1];
  void* output_ptrs[__PREFIX___NUM_OUTPUTS + 1];
  size_t i;
  if (context == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  context->message[0] = '\0';
  if (inputs == NULL || outputs == NULL) {
    return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL inputs or outputs struct", NULL);
  }
  for (i = 0; __prefix___input_table[i].name != NULL; ++i) {
    memcpy(&input_ptrs[i], (const unsigned char*)inputs + __prefix___input_fields[i], sizeof(void*));
    if (input_ptrs[i] == NULL) {
      return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL buffer for input '", __prefix___input_table[i].name);
    }
  }
  for (i = 0; __prefix___output_table[i].name != NULL; ++i) {
    memcpy(&output_ptrs[i], (const unsigned char*)outputs + __prefix___output_fields[i], sizeof(void*));
    if (output_ptrs[i] == NULL) {
      return __prefix___fail(context, __PREFIX___ERROR_NULL_ARGUMENT, "NULL buffer for output '", __prefix___output_table[i].name);
    }
  }
  return __prefix___execute(context, input_ptrs, output_ptrs);
}
