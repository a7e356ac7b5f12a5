// The C API of runtime/include/tessel/runtime.h over KernelDatabase and Kernel. No exception
// crosses it: every entry point catches, and reports through tessel_last_error.

#include <exception>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "runtime/include/tessel/runtime.h"
#include "runtime/kernel.h"
#include "runtime/kernel_database.h"
#include "runtime/runtime_status.h"

struct tessel_db {
  std::unique_ptr<tessel::runtime::KernelDatabase> db;
};

struct tessel_kernel {
  std::shared_ptr<const tessel::runtime::Kernel> kernel;
};

namespace {

using tessel::runtime::RuntimeCodeOf;

std::string& LastError() {
  thread_local std::string error;
  return error;
}

tessel_status Fail(tessel_status code, std::string message) {
  LastError() = std::move(message);
  return code;
}

tessel_status Report(const absl::Status& s) {
  if (s.ok()) return TESSEL_OK;
  return Fail(RuntimeCodeOf(s), std::string(s.message()));
}

// Runs `fn` (returning a tessel_status), turning an escaping exception into an internal error.
template <typename Fn>
tessel_status Guarded(const char* function, Fn&& fn) {
  LastError().clear();
  try {
    return fn();
  } catch (const std::exception& e) {
    return Fail(TESSEL_ERROR_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return Fail(TESSEL_ERROR_INTERNAL, std::string(function) + ": unknown exception");
  }
}

const tessel::store::DeployedKernel& Deployed(const tessel_kernel* k) {
  return k->kernel->deployed();
}

}  // namespace

extern "C" {

const char* tessel_last_error(void) { return LastError().c_str(); }

const char* tessel_status_name(tessel_status status) {
  switch (status) {
    case TESSEL_OK:
      return "TESSEL_OK";
    case TESSEL_ERROR_INVALID_ARGUMENT:
      return "TESSEL_ERROR_INVALID_ARGUMENT";
    case TESSEL_ERROR_NOT_FOUND:
      return "TESSEL_ERROR_NOT_FOUND";
    case TESSEL_ERROR_BAD_FILE:
      return "TESSEL_ERROR_BAD_FILE";
    case TESSEL_ERROR_UNSUPPORTED:
      return "TESSEL_ERROR_UNSUPPORTED";
    case TESSEL_ERROR_COMPILE:
      return "TESSEL_ERROR_COMPILE";
    case TESSEL_ERROR_LAUNCH:
      return "TESSEL_ERROR_LAUNCH";
    case TESSEL_ERROR_INTERNAL:
      return "TESSEL_ERROR_INTERNAL";
  }
  return "TESSEL_ERROR_UNKNOWN";
}

tessel_status tessel_open(const char* path, const tessel_open_options* options, tessel_db** out) {
  return Guarded("tessel_open", [&]() {
    if (out == nullptr) return Fail(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_open: out is NULL");
    *out = nullptr;
    if (path == nullptr) {
      return Fail(TESSEL_ERROR_INVALID_ARGUMENT,
                  "tessel_open: path is NULL; pass a tuning log or kernel pack");
    }
    tessel::runtime::DatabaseOptions o;
    if (options != nullptr) {
      if (options->cache_dir != nullptr) o.cache_dir = options->cache_dir;
      o.cuda_device = options->cuda_device;
    }
    auto db = tessel::runtime::KernelDatabase::Open(path, o);
    if (!db.ok()) return Report(db.status());
    *out = new tessel_db{*std::move(db)};
    return TESSEL_OK;
  });
}

void tessel_close(tessel_db* db) { delete db; }

tessel_status tessel_find(tessel_db* db, const char* workload, tessel_target target,
                          tessel_kernel** out) {
  return Guarded("tessel_find", [&]() {
    if (out == nullptr) return Fail(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_find: out is NULL");
    *out = nullptr;
    if (db == nullptr || workload == nullptr) {
      return Fail(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_find: db and workload must not be NULL");
    }
    auto k = db->db->Find(workload, target);
    if (!k.ok()) return Report(k.status());
    *out = new tessel_kernel{*std::move(k)};
    return TESSEL_OK;
  });
}

void tessel_kernel_release(tessel_kernel* kernel) { delete kernel; }

tessel_status tessel_launch(tessel_kernel* kernel, const tessel_tensor* args, int num_args,
                            void* stream) {
  return Guarded("tessel_launch", [&]() {
    if (kernel == nullptr) {
      return Fail(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_launch: kernel is NULL");
    }
    return Report(kernel->kernel->Launch(args, num_args, stream));
  });
}

tessel_match tessel_kernel_match(const tessel_kernel* k) {
  return Deployed(k).match == tessel::store::DeployMatch::kDevice ? TESSEL_MATCH_DEVICE
                                                                  : TESSEL_MATCH_ARCHITECTURE;
}

const char* tessel_kernel_match_description(const tessel_kernel* k) {
  return k->kernel->match_description().c_str();
}

const char* tessel_kernel_workload_key(const tessel_kernel* k) {
  return Deployed(k).record.workload_key.c_str();
}

const char* tessel_kernel_record_uid(const tessel_kernel* k) {
  return Deployed(k).record.uid.c_str();
}

const char* tessel_kernel_measured_on(const tessel_kernel* k) {
  return Deployed(k).record.measurement.device_name.c_str();
}

double tessel_kernel_median_ms(const tessel_kernel* k) {
  return Deployed(k).record.measurement.timings.median_ms;
}

int tessel_kernel_codegen_version(const tessel_kernel* k) {
  return Deployed(k).artifact.codegen_version;
}

int tessel_kernel_regenerated(const tessel_kernel* k) { return Deployed(k).regenerated ? 1 : 0; }

int tessel_kernel_compiled_here(const tessel_kernel* k) {
  return k->kernel->compiled_here() ? 1 : 0;
}

const char* tessel_kernel_source(const tessel_kernel* k, size_t* size) {
  const std::string& s = Deployed(k).artifact.source;
  if (size != nullptr) *size = s.size();
  return s.c_str();
}

const void* tessel_kernel_binary(const tessel_kernel* k, size_t* size) {
  const std::string& b = Deployed(k).artifact.binary;
  if (size != nullptr) *size = b.size();
  return b.data();
}

int tessel_kernel_num_args(const tessel_kernel* k) {
  return static_cast<int>(k->kernel->args().size());
}

tessel_status tessel_kernel_arg(const tessel_kernel* k, int index, const char** name,
                                const char** dtype, int* ndim, const int64_t** shape,
                                int* is_output) {
  return Guarded("tessel_kernel_arg", [&]() {
    if (k == nullptr)
      return Fail(TESSEL_ERROR_INVALID_ARGUMENT, "tessel_kernel_arg: kernel is NULL");
    const auto& args = k->kernel->args();
    if (index < 0 || index >= static_cast<int>(args.size())) {
      return Fail(TESSEL_ERROR_INVALID_ARGUMENT,
                  "tessel_kernel_arg: index " + std::to_string(index) + " is not below " +
                      std::to_string(args.size()) + ", the kernel's number of tensors");
    }
    const auto& a = args[static_cast<size_t>(index)];
    if (name != nullptr) *name = a.name.c_str();
    if (dtype != nullptr) *dtype = a.dtype.c_str();
    if (ndim != nullptr) *ndim = static_cast<int>(a.shape.size());
    if (shape != nullptr) *shape = a.shape.data();
    if (is_output != nullptr) *is_output = a.is_output ? 1 : 0;
    return TESSEL_OK;
  });
}

}  // extern "C"
