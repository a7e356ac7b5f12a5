// A thin C++ wrapper over libtessel_runtime's C API (tessel/runtime.h): RAII handles, and
// failures thrown as tessel::Error (the status and tessel_last_error's message). Header only; it
// needs nothing beyond the C API.
//
//   tessel::Database db("kernels.pack");
//   tessel::Kernel k = db.Find("matmul(M=256, N=256, K=256)", TESSEL_TARGET_HOST);
//   k.Launch({{a, "f32", shape}, {b, "f32", shape}, {c, "f32", shape}});
//
// Threads: as the C API (a Database may be shared; a Kernel launched from several threads).
#ifndef TESSEL_RUNTIME_HPP_
#define TESSEL_RUNTIME_HPP_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/runtime.h"

namespace tessel {

class Error : public std::runtime_error {
 public:
  Error(tessel_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  tessel_status status() const { return status_; }

 private:
  tessel_status status_;
};

inline void Check(tessel_status s) {
  if (s != TESSEL_OK) throw Error(s, tessel_last_error());
}

// One launch argument: `data` (a host pointer, or a device pointer for CUDA), its dtype and shape.
struct Tensor {
  void* data;
  std::string dtype;
  std::vector<int64_t> shape;
};

class Kernel {
 public:
  explicit Kernel(tessel_kernel* k) : k_(k, &tessel_kernel_release) {}

  void Launch(const std::vector<Tensor>& args, void* stream = nullptr) const {
    std::vector<tessel_tensor> c;
    c.reserve(args.size());
    for (const Tensor& t : args) {
      c.push_back({t.data, t.dtype.c_str(), static_cast<int>(t.shape.size()), t.shape.data()});
    }
    Check(tessel_launch(k_.get(), c.data(), static_cast<int>(c.size()), stream));
  }

  tessel_match match() const { return tessel_kernel_match(k_.get()); }
  std::string match_description() const { return tessel_kernel_match_description(k_.get()); }
  std::string record_uid() const { return tessel_kernel_record_uid(k_.get()); }
  std::string workload_key() const { return tessel_kernel_workload_key(k_.get()); }
  std::string measured_on() const { return tessel_kernel_measured_on(k_.get()); }
  double median_ms() const { return tessel_kernel_median_ms(k_.get()); }
  bool regenerated() const { return tessel_kernel_regenerated(k_.get()) != 0; }
  bool compiled_here() const { return tessel_kernel_compiled_here(k_.get()) != 0; }
  int codegen_version() const { return tessel_kernel_codegen_version(k_.get()); }
  std::string_view source() const {
    size_t n = 0;
    const char* s = tessel_kernel_source(k_.get(), &n);
    return {s, n};
  }
  std::string_view binary() const {
    size_t n = 0;
    const void* b = tessel_kernel_binary(k_.get(), &n);
    return {static_cast<const char*>(b), n};
  }
  // The launch arguments, inputs then outputs.
  struct Arg {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    bool is_output;
  };
  std::vector<Arg> args() const {
    std::vector<Arg> out;
    for (int i = 0; i < tessel_kernel_num_args(k_.get()); ++i) {
      const char* name = nullptr;
      const char* dtype = nullptr;
      int ndim = 0, is_output = 0;
      const int64_t* shape = nullptr;
      Check(tessel_kernel_arg(k_.get(), i, &name, &dtype, &ndim, &shape, &is_output));
      out.push_back({name, dtype, std::vector<int64_t>(shape, shape + ndim), is_output != 0});
    }
    return out;
  }
  tessel_kernel* get() const { return k_.get(); }

 private:
  std::shared_ptr<tessel_kernel> k_;
};

class Database {
 public:
  explicit Database(const std::string& path, const std::string& cache_dir = "",
                    int cuda_device = 0) {
    tessel_open_options o{cache_dir.empty() ? nullptr : cache_dir.c_str(), cuda_device};
    tessel_db* db = nullptr;
    Check(tessel_open(path.c_str(), &o, &db));
    db_.reset(db, &tessel_close);
  }

  Kernel Find(const std::string& workload, tessel_target target) const {
    tessel_kernel* k = nullptr;
    Check(tessel_find(db_.get(), workload.c_str(), target, &k));
    return Kernel(k);
  }
  tessel_db* get() const { return db_.get(); }

 private:
  std::shared_ptr<tessel_db> db_;
};

}  // namespace tessel

#endif  // TESSEL_RUNTIME_HPP_
