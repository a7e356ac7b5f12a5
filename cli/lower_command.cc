#include "cli/lower_command.h"

#include <iostream>

#include "cli/exit_code.h"
#include "schedules/lower/lower.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"

namespace tessel::cli {

namespace {

// Lowers the schedule (the reference lowering without a trace) printing the program after every
// pass (--print-after-all).
absl::Status PrintAfterEachPass(const schedules::Workload& workload,
                                const schedules::Target& target,
                                const std::optional<schedules::Trace>& trace) {
  auto print = [](const schedules::LoweringPass& pass, const schedules::Program& p) {
    std::cout << "// after " << pass.name << ": " << pass.summary << "\n" << schedules::ToString(p);
  };
  if (!trace) return schedules::LowerReference(workload, target, print).status();
  auto sch = schedules::Replay(workload, *trace);
  if (!sch.ok()) return sch.status();
  return schedules::Lower(*sch, target, print).status();
}

}  // namespace

void AddLowerCommand(CLI::App& app) {
  auto opts = std::make_shared<LowerOptions>();
  CLI::App* cmd = app.add_subcommand(
      "lower", "Print the lowered program or generated source of a workload and schedule");
  cmd->add_option("--workload,-w", opts->workload,
                  "Built-in spec such as 'matmul(M=64, N=64, K=64)', a definition, or a file")
      ->required();
  cmd->add_option("--target,-t", opts->target, "host or cuda")->capture_default_str();
  cmd->add_option("--arch", opts->arch, "CUDA architecture: " + schedules::KnownCudaArchsText())
      ->capture_default_str();
  cmd->add_option("--trace", opts->trace_file,
                  "Trace JSON file (the schedule); the reference lowering when omitted");
  cmd->add_flag("--template", opts->use_template,
                "Use the hand-written template schedule of the workload's family");
  cmd->add_option("--emit", opts->emit,
                  "ir, cuda, cpp, json or trace (default: the target's source)");
  cmd->add_flag("--print-after-all", opts->print_after_all,
                "Before the output, print the program after every lowering pass, each headed by "
                "'// after PASS: what it does' (stage passes print the program without kernels)");
  cmd->callback([opts]() { SetExitCode(RunLower(*opts)); });
}

int RunLower(const LowerOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel lower: " << s.message() << "\n";
    return 1;
  };
  auto workload = schedules::LoadWorkload(o.workload);
  if (!workload.ok()) return fail(workload.status());
  auto target = schedules::MakeTarget(o.target, o.arch);
  if (!target.ok()) return fail(target.status());
  std::string emit = o.emit.empty() ? (target->is_cuda() ? "cuda" : "cpp") : o.emit;
  if (emit != "ir" && emit != "cuda" && emit != "cpp" && emit != "json" && emit != "trace") {
    return fail(absl::InvalidArgumentError("unknown --emit '" + emit +
                                           "'; use ir, cuda, cpp, json or trace"));
  }
  if (o.use_template && !o.trace_file.empty()) {
    return fail(
        absl::InvalidArgumentError("--trace and --template both give a schedule; use one of them"));
  }
  if ((emit == "cuda" && !target->is_cuda()) || (emit == "cpp" && target->is_cuda())) {
    return fail(absl::InvalidArgumentError("--emit " + emit + " does not match --target " +
                                           o.target + "; use --emit " +
                                           (target->is_cuda() ? "cuda" : "cpp")));
  }
  std::optional<schedules::Trace> trace;
  if (!o.trace_file.empty()) {
    auto t = schedules::ReadTraceFile(o.trace_file);
    if (!t.ok()) return fail(t.status());
    trace = std::move(*t);
  }
  if (o.use_template) {
    auto sch = schedules::HandwrittenSchedule(*workload, *target);
    if (!sch.ok()) return fail(sch.status());
    trace = sch->trace();
  }
  if (o.print_after_all) {
    if (absl::Status st = PrintAfterEachPass(*workload, *target, trace); !st.ok()) return fail(st);
  }
  auto c = schedules::BuildCandidate(*workload, *target, trace);
  if (!c.ok()) return fail(c.status());
  if (emit == "trace") {
    if (!trace) {
      return fail(
          absl::InvalidArgumentError("--emit trace needs a schedule: give --template or --trace"));
    }
    std::cout << trace->ToJsonString(1) << "\n";
  } else if (emit == "ir") {
    std::cout << "// workload " << workload->spec << "  key " << schedules::WorkloadKey(*workload)
              << "  target " << target->ToString() << "\n"
              << schedules::ToString(c->program);
  } else if (emit == "json") {
    // The candidate file's format (schedules/space/candidate.h), with the source inline.
    std::cout << schedules::CandidateToJson(*c, "").dump(2) << "\n";
  } else {
    std::cout << c->source.code;
  }
  return 0;
}

}  // namespace tessel::cli
