#include "schedules/ir/tensor_intrin.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "schedules/ir/stmt_functor.h"

namespace tessel::schedules {

namespace {
constexpr char kTensorizePrefix[] = "tensorize.";
constexpr size_t kTensorizePrefixSize = sizeof(kTensorizePrefix) - 1;
}  // namespace

const std::vector<TensorIntrinInfo>& TensorIntrins() {
  static const std::vector<TensorIntrinInfo>* const kTable = [] {
    std::vector<std::vector<int64_t>> wgmma, accumulator;
    for (int64_t n = 8; n <= kWgmmaMaxN; n += 8) {
      wgmma.push_back({16, n, 16});
      accumulator.push_back({16, n});
    }
    return new std::vector<TensorIntrinInfo>{
        {TensorIntrin::kMma, "mma_m16n8k16", {{16, 8, 16}}},
        {TensorIntrin::kLdmatrix, "ldmatrix", {{16, 16}, {16, 8}, {8, 16}}},
        {TensorIntrin::kAccumulator, "mma_accumulator", accumulator},
        {TensorIntrin::kWgmma, "wgmma_m64nNk16", wgmma},
    };
  }();
  return *kTable;
}

const TensorIntrinInfo* FindTensorIntrin(std::string_view name) {
  for (const TensorIntrinInfo& i : TensorIntrins()) {
    if (name == i.name) return &i;
  }
  return nullptr;
}

std::string TensorIntrinNames() {
  std::string out;
  for (const TensorIntrinInfo& i : TensorIntrins()) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", i.name);
  }
  return out;
}

std::string TensorizeAnnotation(const TensorIntrinInfo& intrin) {
  return absl::StrCat(kTensorizePrefix, intrin.name);
}

const TensorIntrinInfo* TensorizedBy(std::string_view annotation_key) {
  if (annotation_key.substr(0, kTensorizePrefixSize) != kTensorizePrefix) return nullptr;
  return FindTensorIntrin(annotation_key.substr(kTensorizePrefixSize));
}

const TensorIntrinInfo* TensorizedBy(
    const std::vector<std::pair<std::string, int64_t>>& annotations) {
  for (const auto& [key, value] : annotations) {
    if (const TensorIntrinInfo* i = TensorizedBy(key)) return i;
  }
  return nullptr;
}

namespace {

int64_t AnnotationValue(const std::vector<std::pair<std::string, int64_t>>& annotations,
                        std::string_view key) {
  for (const auto& [k, value] : annotations) {
    if (k == key) return value;
  }
  return 0;
}

}  // namespace

int64_t SoftwarePipelineStages(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kSoftwarePipeline);
}

int64_t PipelineFetchSpread(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kPipelineFetchSpread);
}

int64_t PipelineFragmentsAcross(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kPipelineFragmentsAcross);
}

int64_t PipelineProducer(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kPipelineProducer);
}

int64_t BulkCopy(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kBulkCopy);
}

int64_t PipelineTurns(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kPipelineTurns);
}

int64_t BulkStore(const std::vector<std::pair<std::string, int64_t>>& annotations) {
  return AnnotationValue(annotations, kBulkStore);
}

namespace {

// The number after `prefix` + "_" in `name`, or -1.
int64_t NumberAfter(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() + 1 || name.substr(0, prefix.size()) != prefix ||
      name[prefix.size()] != '_') {
    return -1;
  }
  int64_t n = 0;
  for (char c : name.substr(prefix.size() + 1)) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

std::string CpAsyncCall(int64_t bytes) { return absl::StrCat(kCallCpAsync, "_", bytes); }
std::string CpAsyncWaitCall(int64_t groups) { return absl::StrCat(kCallCpAsyncWait, "_", groups); }
int64_t CpAsyncCallBytes(std::string_view name) { return NumberAfter(name, kCallCpAsync); }
int64_t CpAsyncWaitGroups(std::string_view name) { return NumberAfter(name, kCallCpAsyncWait); }

std::string SetmaxnregCall(bool increase, int64_t registers) {
  return absl::StrCat(kCallSetmaxnreg, increase ? "_inc_" : "_dec_", registers);
}

std::string TmaLoadCall(int64_t rank) { return absl::StrCat(kCallTmaLoad, "_", rank, "d"); }
std::string QuadStoreCall(DType t) { return absl::StrCat(kCallQuadStore, "_", DTypeName(t)); }
bool IsQuadStoreCall(std::string_view name) {
  return name == QuadStoreCall(DType::kFloat16) || name == QuadStoreCall(DType::kBFloat16);
}
std::string TmaMulticastCall(int64_t rank) {
  return absl::StrCat(kCallTmaMulticast, "_", rank, "d");
}
namespace {
// The rank R of a name `prefix`_<R>d (-1 for any other name).
int64_t RankAfter(std::string_view name, const char* prefix) {
  if (name.size() < 2 || name.back() != 'd') return -1;
  return NumberAfter(name.substr(0, name.size() - 1), prefix);
}
}  // namespace
bool IsTmaMulticastCall(std::string_view name) { return RankAfter(name, kCallTmaMulticast) > 0; }
int64_t TmaLoadRank(std::string_view name) {
  const int64_t rank = RankAfter(name, kCallTmaLoad);
  return rank > 0 ? rank : RankAfter(name, kCallTmaMulticast);
}
std::string TmaStoreCall(int64_t rank) { return absl::StrCat(kCallTmaStore, "_", rank, "d"); }
int64_t TmaStoreRank(std::string_view name) { return RankAfter(name, kCallTmaStore); }
std::string BulkWaitReadCall(int64_t groups) {
  return absl::StrCat(kCallBulkWaitRead, "_", groups);
}
int64_t BulkWaitReadGroups(std::string_view name) { return NumberAfter(name, kCallBulkWaitRead); }

std::string WgmmaWaitCall(int64_t groups) { return absl::StrCat(kCallWgmmaWait, "_", groups); }
int64_t WgmmaWaitGroups(std::string_view name) { return NumberAfter(name, kCallWgmmaWait); }
bool IsWgmmaCall(std::string_view name) {
  return name.substr(0, sizeof(kCallWgmma) - 1) == kCallWgmma && name != kCallWgmmaFence &&
         name != kCallWgmmaCommit && WgmmaWaitGroups(name) < 0;
}

std::string WgmmaCall(int64_t n, DType ab, bool a_mn_major, bool b_mn_major, bool a_registers) {
  return absl::StrCat(kCallWgmma, "_m64n", n, "k16_f32_", DTypeName(ab), "_",
                      a_registers ? "r" : (a_mn_major ? "1" : "0"), b_mn_major ? 1 : 0);
}

bool WgmmaReadsRegisters(std::string_view name) {
  return IsWgmmaCall(name) && name.size() >= 2 && name[name.size() - 2] == 'r';
}

int64_t WgmmaCallN(std::string_view name) {
  const size_t at = name.find("_m64n"), end = name.find("k16_");
  int64_t n = 0;
  if (!IsWgmmaCall(name) || at == std::string_view::npos || end == std::string_view::npos ||
      end < at + 5 || !absl::SimpleAtoi(std::string(name.substr(at + 5, end - at - 5)), &n)) {
    return -1;
  }
  return n;
}

bool CallsWhere(const Stmt& s, const std::function<bool(std::string_view)>& pred) {
  bool found = false;
  WalkStmt(s, [&](const Stmt& x) {
    const auto* ev = As<EvaluateNode>(x);
    const auto* c = ev ? As<CallNode>(ev->value) : nullptr;
    found = found || (c && pred(c->name));
  });
  return found;
}

bool CallsWgmma(const Stmt& s) { return CallsWhere(s, IsWgmmaCall); }
bool CallsCpAsync(const Stmt& s) {
  return CallsWhere(s, [](std::string_view name) { return CpAsyncCallBytes(name) > 0; });
}

Stmt TensorCallStmt(const std::string& name, std::vector<Expr> args) {
  return MakeEvaluate(MakeCall(name, std::move(args), DType::kInt32));
}

bool IsTensorCall(std::string_view name) { return name.substr(0, 7) == "tessel_"; }

bool IsMmaOperandType(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

const LoadNode* LoadUnderCast(const Expr& e) {
  if (const auto* c = As<CastNode>(e)) return As<LoadNode>(c->value);
  return As<LoadNode>(e);
}

}  // namespace tessel::schedules
