/*
 * Runs a relay2cmake package on raw tensors:
 *   c_consumer IN_DIR OUT_DIR
 * reads IN_DIR/input_<i>.bin (raw little-endian bytes, model order), runs the model with a
 * caller-owned workspace (no malloc inside the library), writes OUT_DIR/output_<i>.bin.
 *
 * The package's prefix comes from the build (MODEL_PREFIX) so that this one program works
 * with any generated package; an application for one model simply writes the names out,
 * e.g. #include <mymodel/mymodel.h> and mymodel_run(...).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(name) CAT(MODEL_PREFIX, CAT(_, name))

#include STR(MODEL_PREFIX/MODEL_PREFIX.h)

static void* read_file(const char* path, size_t expected) {
  FILE* file = fopen(path, "rb");
  void* data;
  long size;
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  size = ftell(file);
  fseek(file, 0, SEEK_SET);
  if (size < 0 || (size_t)size != expected) {
    fprintf(stderr, "%s: %ld bytes, the model needs %u\n", path, size, (unsigned)expected);
    fclose(file);
    return NULL;
  }
  data = malloc(expected + 1);
  if (data != NULL && fread(data, 1, expected, file) != expected) {
    free(data);
    data = NULL;
  }
  fclose(file);
  return data;
}

int main(int argc, char** argv) {
  const void* inputs[64];
  size_t input_bytes[64];
  void* outputs[64];
  size_t output_bytes[64];
  char path[4096];
  const API(tensor_info) * info;
  API(context) * context;
  API(status) status;
  void* workspace;
  size_t i, num_inputs = 0, num_outputs = 0;

  if (argc != 3) {
    fprintf(stderr, "usage: %s IN_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  for (i = 0; (info = API(input_info)(i)) != NULL && i < 64; ++i, ++num_inputs) {
    snprintf(path, sizeof(path), "%s/input_%u.bin", argv[1], (unsigned)i);
    inputs[i] = read_file(path, info->num_bytes);
    input_bytes[i] = info->num_bytes;
    if (inputs[i] == NULL) {
      fprintf(stderr, "cannot read input %u ('%s') from %s\n", (unsigned)i, info->name, path);
      return 1;
    }
  }
  for (i = 0; (info = API(output_info)(i)) != NULL && i < 64; ++i, ++num_outputs) {
    output_bytes[i] = info->num_bytes;
    outputs[i] = malloc(info->num_bytes + 1);
  }

  /* The no-malloc path: the application owns the workspace. */
  workspace = malloc(API(workspace_size)() + 64);
  {
    unsigned char* aligned = (unsigned char*)workspace + (64 - (size_t)workspace % 64) % 64;
    status = API(context_init)(aligned, API(workspace_size)(), &context);
  }
  if (status != 0) {
    fprintf(stderr, "context_init: %s\n", API(status_string)(status));
    return 1;
  }
  status = API(run_buffers)(context, inputs, input_bytes, num_inputs, outputs, output_bytes, num_outputs);
  if (status != 0) {
    fprintf(stderr, "run: %s: %s\n", API(status_string)(status), API(last_error)(context));
    return 1;
  }
  for (i = 0; i < num_outputs; ++i) {
    FILE* file;
    size_t bytes;
    info = API(output_info)(i);
    /* A bounded output (dynamic_axis >= 0) fills only part of its buffer: write what it holds. */
    bytes = API(output_num_bytes)(context, i);
    snprintf(path, sizeof(path), "%s/output_%u.bin", argv[2], (unsigned)i);
    file = fopen(path, "wb");
    if (file == NULL || fwrite(outputs[i], 1, bytes, file) != bytes) {
      fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
    fclose(file);
    printf("output %u '%s': %u bytes -> %s\n", (unsigned)i, info->name, (unsigned)bytes, path);
  }
  API(context_destroy)(context);
  free(workspace);
  for (i = 0; i < num_inputs; ++i) free((void*)inputs[i]);
  for (i = 0; i < num_outputs; ++i) free(outputs[i]);
  return 0;
}
