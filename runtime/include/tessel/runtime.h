/* libtessel_runtime: load and launch the kernels Tessel tuned, from a tuning log or a kernel
 * pack, on the caller's buffers (and, for CUDA, the caller's stream).
 *
 *   tessel_db* db;
 *   if (tessel_open("kernels.pack", NULL, &db) != TESSEL_OK) die(tessel_last_error());
 *   tessel_kernel* k;
 *   if (tessel_find(db, "matmul(M=256, N=256, K=256)", TESSEL_TARGET_HOST, &k) != TESSEL_OK)
 *     die(tessel_last_error());
 *   int64_t shape[2] = {256, 256};
 *   tessel_tensor args[3] = {{a, "f32", 2, shape}, {b, "f32", 2, shape}, {c, "f32", 2, shape}};
 *   if (tessel_launch(k, args, 3, NULL) != TESSEL_OK) die(tessel_last_error());
 *   tessel_kernel_release(k);
 *   tessel_close(db);
 *
 * Lookup: the fastest ok record of the workload measured on this device (by name), else the
 * fastest of the same architecture (target), else TESSEL_ERROR_NOT_FOUND with a message naming
 * the targets and devices the file has records of. tessel_kernel_match says which answered. A
 * GPU of compute capability 9.0 runs the records of two targets, cuda -arch=sm_90 and
 * cuda -arch=sm_90a (Hopper's architecture-specific instructions), and gets the best of both; a
 * GPU of another architecture never gets an sm_90a record.
 *
 * Loading: CUDA loads the stored cubin through the driver API into the device's primary context,
 * or compiles the stored source with NVRTC when the cubin was built for another architecture.
 * The host compiles the stored C++ once with the system compiler (the flags it was measured
 * with) into a shared object in the cache directory, and loads it with dlopen; a later process
 * finds it there. A record stored without its source (a log from before Tessel kept it) is
 * regenerated from its trace, and tessel_kernel_regenerated says so.
 *
 * A tuning log or pack is code: the runtime compiles and runs what it holds, with the compiler
 * flags it records. Open only files from a source you trust, as you would a shared library.
 *
 * Errors: every function that can fail returns a tessel_status; tessel_last_error() is the
 * calling thread's message for its last failure (names the problem and the fix).
 *
 * Threads: every function may be called from any thread. A tessel_db may be shared by threads
 * (lookups are serialized, loaded kernels are cached per db); a tessel_kernel may be launched
 * from several threads at once. Kernels stay valid after tessel_close until released. */
#ifndef TESSEL_RUNTIME_H_
#define TESSEL_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TESSEL_RUNTIME_API __attribute__((visibility("default")))
#else
#define TESSEL_RUNTIME_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_RUNTIME_VERSION_MAJOR 0
#define TESSEL_RUNTIME_VERSION_MINOR 1

typedef enum tessel_status {
  TESSEL_OK = 0,
  TESSEL_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, wrong tensors (count, dtype, shape) */
  TESSEL_ERROR_NOT_FOUND = 2,        /* no such file, workload unknown to it, no kernel for it */
  TESSEL_ERROR_BAD_FILE = 3,         /* not a tuning log or pack, damaged, or of another schema */
  TESSEL_ERROR_UNSUPPORTED = 4,      /* a target this build or machine cannot run (no GPU) */
  TESSEL_ERROR_COMPILE = 5,          /* the stored source did not compile here */
  TESSEL_ERROR_LAUNCH = 6,           /* the driver refused to load or launch the kernel */
  TESSEL_ERROR_INTERNAL = 7
} tessel_status;

typedef enum tessel_target { TESSEL_TARGET_HOST = 0, TESSEL_TARGET_CUDA = 1 } tessel_target;

typedef enum tessel_match {
  TESSEL_MATCH_DEVICE = 0,      /* measured on a device of this one's name */
  TESSEL_MATCH_ARCHITECTURE = 1 /* measured on another device of the same architecture */
} tessel_match;

typedef struct tessel_db tessel_db;         /* an open tuning log or kernel pack */
typedef struct tessel_kernel tessel_kernel; /* a found and loaded kernel */

/* One argument of a launch: the program's inputs, then its outputs, in the order
 * tessel_kernel_arg lists them. Compact row-major. `data` is a host pointer for the host target
 * and a device pointer (CUdeviceptr) for CUDA. */
typedef struct tessel_tensor {
  void* data;
  const char* dtype; /* "f32", "f16", "bf16", "f64", "i32", "i64", "bool" */
  int ndim;
  const int64_t* shape;
} tessel_tensor;

typedef struct tessel_open_options {
  /* Where the host target's compiled kernels are cached. NULL: $TESSEL_RUNTIME_CACHE, else
   * $XDG_CACHE_HOME/tessel/runtime, else ~/.cache/tessel/runtime. */
  const char* cache_dir;
  int cuda_device; /* the CUDA device ordinal kernels are found for and loaded on */
} tessel_open_options;

/* The calling thread's message for its last failed call ("" when none). Valid until the thread's
 * next call into the runtime. */
TESSEL_RUNTIME_API const char* tessel_last_error(void);
/* "TESSEL_OK", "TESSEL_ERROR_NOT_FOUND", ... */
TESSEL_RUNTIME_API const char* tessel_status_name(tessel_status status);

/* Opens a tuning log or kernel pack read-only (`options` may be NULL). */
TESSEL_RUNTIME_API tessel_status tessel_open(const char* path, const tessel_open_options* options,
                                             tessel_db** out);
TESSEL_RUNTIME_API void tessel_close(tessel_db* db);

/* Finds and loads the kernel of `workload` (a spec such as "matmul(M=256, N=256, K=256)", a
 * workload definition, or a workload key of the file) for `target` on this machine's device. */
TESSEL_RUNTIME_API tessel_status tessel_find(tessel_db* db, const char* workload,
                                             tessel_target target, tessel_kernel** out);
TESSEL_RUNTIME_API void tessel_kernel_release(tessel_kernel* kernel);

/* Launches the kernel on `args` (inputs then outputs; see tessel_tensor). CUDA: on `stream` (a
 * CUstream or cudaStream_t; NULL is the legacy default stream), asynchronously unless the
 * program needs scratch memory or a grid barrier, which the runtime allocates and frees around
 * the launch (it then waits for the stream). Host: runs to completion; `stream` must be NULL. */
TESSEL_RUNTIME_API tessel_status tessel_launch(tessel_kernel* kernel, const tessel_tensor* args,
                                               int num_args, void* stream);

/* What was found (`kernel` must not be NULL). Strings live as long as the kernel. */
TESSEL_RUNTIME_API tessel_match tessel_kernel_match(const tessel_kernel* kernel);
/* "same device (NVIDIA H100 80GB HBM3)" or "same architecture (cuda -arch=sm_90), measured on
 * ...; no record of ..." */
TESSEL_RUNTIME_API const char* tessel_kernel_match_description(const tessel_kernel* kernel);
TESSEL_RUNTIME_API const char* tessel_kernel_workload_key(const tessel_kernel* kernel);
TESSEL_RUNTIME_API const char* tessel_kernel_record_uid(const tessel_kernel* kernel);
TESSEL_RUNTIME_API const char* tessel_kernel_measured_on(const tessel_kernel* kernel);
TESSEL_RUNTIME_API double tessel_kernel_median_ms(const tessel_kernel* kernel);
/* The code generator version that printed the source; 1 when the source was regenerated here. */
TESSEL_RUNTIME_API int tessel_kernel_codegen_version(const tessel_kernel* kernel);
/* 1 when the record had no stored source and it was regenerated from its trace. */
TESSEL_RUNTIME_API int tessel_kernel_regenerated(const tessel_kernel* kernel);
/* 1 when the loaded module was compiled here (NVRTC, or the host compiler) rather than loaded
 * from the stored binary. Always 1 for the host target, which stores no binary. */
TESSEL_RUNTIME_API int tessel_kernel_compiled_here(const tessel_kernel* kernel);
/* The stored source and binary, byte for byte (the binary is empty for the host target). */
TESSEL_RUNTIME_API const char* tessel_kernel_source(const tessel_kernel* kernel, size_t* size);
TESSEL_RUNTIME_API const void* tessel_kernel_binary(const tessel_kernel* kernel, size_t* size);
/* The launch arguments: their number, and each one's name, dtype, shape and direction. */
TESSEL_RUNTIME_API int tessel_kernel_num_args(const tessel_kernel* kernel);
TESSEL_RUNTIME_API tessel_status tessel_kernel_arg(const tessel_kernel* kernel, int index,
                                                   const char** name, const char** dtype, int* ndim,
                                                   const int64_t** shape, int* is_output);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSEL_RUNTIME_H_ */
