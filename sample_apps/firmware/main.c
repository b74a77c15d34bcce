/*
 * A minimal firmware image around a relay2cmake package: everything static, one inference.
 * The context and arena live in one 64-byte-aligned array (context_init never allocates);
 * inputs and outputs are carved from a static pool by the package's tensor table.
 * main() returns the run's status (0 = ok); a real board would feed sensor data in and act
 * on the outputs.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(name) CAT(MODEL_PREFIX, CAT(_, name))
#define MACRO(name) CAT(MODEL_UPPER, CAT(_, name))

#include STR(MODEL_PREFIX/MODEL_PREFIX.h)

#define MAX_TENSORS 32

/* C11's _Alignas: the workspace must be MODEL_WORKSPACE_ALIGNMENT (64) aligned. */
static _Alignas(64) unsigned char workspace[MACRO(WORKSPACE_BYTES)];
static _Alignas(64) unsigned char io_pool[FIRMWARE_IO_BYTES];

int main(void) {
  const void* inputs[MAX_TENSORS];
  size_t input_bytes[MAX_TENSORS];
  void* outputs[MAX_TENSORS];
  size_t output_bytes[MAX_TENSORS];
  const API(tensor_info) * info;
  API(context) * context;
  size_t used = 0, num_inputs, num_outputs;

  if ((uintptr_t)workspace % MACRO(WORKSPACE_ALIGNMENT) != 0) return 100;
  if (API(context_init)(workspace, sizeof(workspace), &context) != MACRO(OK)) return 101;
  for (num_inputs = 0; (info = API(input_info)(num_inputs)) != NULL && num_inputs < MAX_TENSORS; ++num_inputs) {
    if (used + info->num_bytes > sizeof(io_pool)) return 102;
    memset(io_pool + used, 0, info->num_bytes); /* your sensor data goes here */
    inputs[num_inputs] = io_pool + used;
    input_bytes[num_inputs] = info->num_bytes;
    used += (info->num_bytes + 63u) & ~(size_t)63u;
  }
  for (num_outputs = 0; (info = API(output_info)(num_outputs)) != NULL && num_outputs < MAX_TENSORS; ++num_outputs) {
    if (used + info->num_bytes > sizeof(io_pool)) return 102;
    outputs[num_outputs] = io_pool + used;
    output_bytes[num_outputs] = info->num_bytes;
    used += (info->num_bytes + 63u) & ~(size_t)63u;
  }
  return (int)API(run_buffers)(context, inputs, input_bytes, num_inputs, outputs, output_bytes, num_outputs);
}
