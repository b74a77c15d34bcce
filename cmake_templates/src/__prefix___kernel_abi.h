/*__banner__*/
/*
 * The few DLPack / TVM-FFI declarations the generated kernels use, written for this
 * package so that no TVM header is needed to build it. The layouts match DLPack 1.x and
 * TVM-FFI's TVMFFIAny. The backend entry points the kernels call are mapped to this
 * package's own prefixed functions, so two packages can be linked into one program.
 */
#ifndef __PREFIX___KERNEL_ABI_H_
#define __PREFIX___KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#define TVM_DLL

typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  };
} TVMFFIAny;

enum { __PREFIX___FFI_INT = 1, __PREFIX___FFI_DLTENSOR_PTR = 7, __PREFIX___DL_CPU = 1 };

#define TVMBackendAllocWorkspace __prefix___backend_alloc_workspace
#define TVMBackendFreeWorkspace __prefix___backend_free_workspace
#define TVMFFIErrorSetRaisedFromCStrParts __prefix___backend_set_error

void* __prefix___backend_alloc_workspace(int device_type, int device_id, uint64_t nbytes,
                                  int dtype_code_hint, int dtype_bits_hint);
int __prefix___backend_free_workspace(int device_type, int device_id, void* ptr);
void __prefix___backend_set_error(const char* kind, const char** message_parts, int32_t num_parts);

/* Parallel loops (LLVM objects only; the C kernels print them as serial loops). */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

int __prefix___backend_parallel_launch(FTVMParallelLambda lambda, void* cdata, int num_task);
int __prefix___backend_parallel_barrier(int task_id, TVMParallelGroupEnv* penv);

#endif /* __PREFIX___KERNEL_ABI_H_ */
