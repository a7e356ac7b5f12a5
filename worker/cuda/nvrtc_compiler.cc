#include "worker/cuda/nvrtc_compiler.h"

#include <nvrtc.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "measure/measurement.h"

#ifndef TESSEL_CUDA_INCLUDE_DIR
#define TESSEL_CUDA_INCLUDE_DIR ""
#endif

namespace tessel::worker {
namespace {

absl::Status NvrtcError(nvrtcResult r, const char* call) {
  return absl::InternalError(absl::StrCat(call, " failed: ", nvrtcGetErrorString(r)));
}

// "sm_" followed by digits and an optional feature suffix ("a", "f").
bool IsRealArch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) return false;
  size_t i = 3;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i]))) ++i;
  if (i < 5) return false;
  return i == arch.size() || (i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f'));
}

// NVRTC programs are released on every path.
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (prog_ != nullptr) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram* ptr() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
};

bool HasSymbol(const std::string& cubin, const std::string& entry) {
  const std::string needle = std::string("\0", 1) + entry + std::string("\0", 1);
  return cubin.find(needle) != std::string::npos;
}

}  // namespace

std::string NvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "NVRTC (unknown version)";
  return absl::StrCat("NVRTC ", major, ".", minor);
}

absl::StatusOr<std::string> FindCudaIncludeDir() {
  std::vector<std::string> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && v[0] != '\0') candidates.push_back(absl::StrCat(v, "/include"));
  }
  candidates.push_back("/usr/local/cuda/include");
  if (TESSEL_CUDA_INCLUDE_DIR[0] != '\0') candidates.push_back(TESSEL_CUDA_INCLUDE_DIR);
  std::error_code ec;
  for (const std::string& dir : candidates) {
    if (std::filesystem::exists(std::filesystem::path(dir) / "cuda_fp16.h", ec)) return dir;
  }
  return absl::NotFoundError(absl::StrCat("no CUDA include directory with cuda_fp16.h among ",
                                          absl::StrJoin(candidates, ", "),
                                          ": install the CUDA toolkit headers or set CUDA_HOME"));
}

absl::StatusOr<CudaBinary> CompileCudaSource(const std::string& code, const NvrtcOptions& options,
                                             const std::string& name) {
  if (options.arch.empty()) {
    return absl::InvalidArgumentError(
        "no GPU architecture given to NVRTC: set NvrtcOptions::arch (sm_80, sm_90, sm_90a)");
  }
  if (!IsRealArch(options.arch)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU architecture '", options.arch,
                     "' is not a real architecture: use sm_80, sm_90 or "
                     "sm_90a (a CUBIN needs machine code, not compute_XX)"));
  }
  const auto start = std::chrono::steady_clock::now();
  CudaBinary out;
  out.arch = options.arch;
  out.options = {absl::StrCat("--gpu-architecture=", options.arch), "--std=c++17"};
  std::string include_dir = options.include_dir;
  if (include_dir.empty()) {
    absl::StatusOr<std::string> found = FindCudaIncludeDir();
    // Without it, NVRTC's built-in headers still serve; a missing include shows in the log.
    if (found.ok()) include_dir = *found;
  }
  if (!include_dir.empty()) out.options.push_back(absl::StrCat("-I", include_dir));
  if (options.fast_math) out.options.push_back("--use_fast_math");
  if (options.line_info) out.options.push_back("-lineinfo");
  if (options.max_registers > 0) {
    out.options.push_back(absl::StrCat("--maxrregcount=", options.max_registers));
  }
  out.options.insert(out.options.end(), options.extra_options.begin(), options.extra_options.end());

  Program prog;
  nvrtcResult r = nvrtcCreateProgram(prog.ptr(), code.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcCreateProgram");
  std::vector<const char*> opts;
  for (const std::string& o : out.options) opts.push_back(o.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
    std::string log(log_size, '\0');
    if (nvrtcGetProgramLog(prog.get(), log.data()) == NVRTC_SUCCESS) {
      log.resize(log_size - 1);  // drop the terminating NUL
      out.log = std::move(log);
    }
  }
  if (compiled != NVRTC_SUCCESS) {
    absl::Status s = absl::InvalidArgumentError(
        absl::StrCat(NvrtcVersionString(), " could not compile ", name, " for ", options.arch, " (",
                     nvrtcGetErrorString(compiled), ", options: ", absl::StrJoin(out.options, " "),
                     "); log:\n", out.log.empty() ? "(empty)" : out.log));
    return measure::WithMeasureStatus(std::move(s), measure::MeasureStatus::kCompileError);
  }
  size_t cubin_size = 0;
  r = nvrtcGetCUBINSize(prog.get(), &cubin_size);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetCUBINSize");
  out.cubin.resize(cubin_size);
  r = nvrtcGetCUBIN(prog.get(), out.cubin.data());
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetCUBIN");
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

absl::StatusOr<CudaBinary> CompileCuda(const schedules::GeneratedSource& source,
                                       const NvrtcOptions& options) {
  if (source.target != schedules::TargetKind::kCuda) {
    return absl::InvalidArgumentError(
        "CompileCuda got a host GeneratedSource: compile it with CompileHost instead");
  }
  if (source.kernels.empty()) {
    return absl::InvalidArgumentError(
        "a CUDA GeneratedSource has no kernels: the code generator must emit at least one");
  }
  const std::string name = absl::StrCat(
      source.kernels.front().entry.empty() ? "tessel_kernel" : source.kernels.front().entry, ".cu");
  absl::StatusOr<CudaBinary> bin = CompileCudaSource(source.code, options, name);
  if (!bin.ok()) return bin;
  for (const schedules::KernelSource& k : source.kernels) {
    if (!HasSymbol(bin->cubin, k.entry)) {
      return measure::WithMeasureStatus(
          absl::InvalidArgumentError(
              absl::StrCat("kernel '", k.entry, "' is not in the compiled CUBIN of ", name,
                           ": declare it extern \"C\" __global__ so that its name is not mangled")),
          measure::MeasureStatus::kCompileError);
    }
  }
  return bin;
}

}  // namespace tessel::worker
