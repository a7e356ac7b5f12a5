#pragma once

// What a timing run asks for (TimingOptions) and what it returns (Timings, with the hardware
// counters when asked for): the timing vocabulary of every backend of the worker, of the server
// that sets the options of a job, and of everything that reads a measurement back.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::measure {

// How to time a program. Each repeat is timed alone (device events on the GPU, a steady clock on
// the host) with the caches flushed before it; repeats go on (EnoughRepeats) until `min_repeats`
// are done and either the median is known to `median_precision` or the repeats add up to
// `min_total_ms` of measured time; never beyond `max_repeats`.
struct TimingOptions {
  int warmup_runs = 2;        // untimed runs first (module load, first-touch, clocks ramping up)
  int min_repeats = 5;        // at least this many timed repeats
  int max_repeats = 1000;     // at most this many, even when min_total_ms is not reached
  double min_total_ms = 200;  // repeat until the repeats add up to this much, unless precise
  // Stop as soon as the median is this precise: the half-width of its distribution-free 95%
  // confidence interval (MedianHalfWidth) relative to it. A stable kernel is done after a few
  // dozen repeats instead of 200 ms; a noisy one still runs to min_total_ms. 0: off (repeat until
  // min_total_ms, the rule before issue 21).
  double median_precision = 0.005;
  bool flush_cache = true;  // flush L2 (GPU) or the last-level cache (host) before each repeat
  // Host: once min_repeats are done, stop when this much wall time (flushes included) has passed,
  // even if min_total_ms is not reached (a microsecond kernel would otherwise run max_repeats
  // cache flushes, each far longer than the kernel).
  double max_wall_ms = 5000;
  // CUDA: also collect each repeat's kernel time from CUPTI activity records (Timings::
  // kernel_repeats_ms). Without CUPTI the event times are measured all the same.
  bool kernel_times = true;
  // CUDA: after the timed repeats, one more (untimed) run under the CUPTI range profiler for the
  // hardware counters (Timings::counters). Profiling changes timing, so it never overlaps it.
  bool hardware_counters = false;
};

// Hardware counters of one run of a program (CUDA, CUPTI range profiler).
struct HardwareCounters {
  double dram_read_bytes = 0;
  double dram_write_bytes = 0;
  double achieved_occupancy = 0;  // percent of the peak sustained warps, 0..100
};

// How a timing was made (DESIGN.md section 6). Stored as its number in the tuning log: keep them.
enum class TimingKind : int {
  kConfirmed = 1,  // the full measurement (TimingOptions as the job asks): what a best relies on
  kScreened = 2,   // a short screening measurement, to decide whether the full one is worth it
};
// "confirmed", "screened".
const char* TimingKindName(TimingKind kind);
// The kind of a TimingKindName, or nullopt.
std::optional<TimingKind> ParseTimingKind(const std::string& name);
// The kind of its stored number (1, 2), or nullopt.
std::optional<TimingKind> TimingKindOfNumber(int64_t number);

// What state the GPU was in when a program was timed (CUDA: read from NVML right after the timed
// repeats): clocks throttle with temperature and power, and a time means little without them.
// 0 when unknown (the host, or NVML could not be read; Timings::note says why).
struct DeviceState {
  int sm_clock_mhz = 0;
  int memory_clock_mhz = 0;
  int temperature_c = 0;

  bool known() const { return sm_clock_mhz != 0 || memory_clock_mhz != 0 || temperature_c != 0; }
};

// Every repeat's time, in the order measured, and summaries.
struct Timings {
  std::vector<double> repeats_ms;  // CUDA: between events around the launches; host: steady clock
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  // CUDA: the same repeats' kernel time from CUPTI activity records (the GPU's start and end
  // stamps of each kernel, summed over the program's kernels), in the same order; empty when
  // there are none, and then `note` says why.
  std::vector<double> kernel_repeats_ms;
  double kernel_median_ms = 0;
  // When TimingOptions::hardware_counters asked for them and they could be collected; otherwise
  // `note` says why not.
  std::optional<HardwareCounters> counters;
  // CUDA: clocks and temperature right after the timed repeats; all 0 on the host.
  DeviceState device_state;
  // Confirmed unless a screening measurement made it.
  TimingKind kind = TimingKind::kConfirmed;
  // Why a figure above is missing (no CUPTI kernel times, no counters, no clocks), "; "-joined.
  std::string note;
  // Screening (ScreenOptions): the screening measurement's latency (its latency_ms) and repeats,
  // also for a confirmed candidate (whose repeats above are the full measurement's): the pairs of
  // screened and confirmed latencies are what the server derives its screening margin from. 0
  // when the candidate was not screened.
  double screen_median_ms = 0;
  int screen_repeats = 0;

  // What a search, a cost model and a task's best rank by: the CUPTI kernel median when there is
  // one (the GPU's own clock of the kernels, without the microseconds of launch and event
  // overhead whose noise would rank microsecond kernels by chance), else the event median. The
  // tuning log ranks by the same rule (its latency_ms column).
  double latency_ms() const { return kernel_median_ms > 0 ? kernel_median_ms : median_ms; }
};

// Screening (DESIGN.md section 6): every candidate is first timed with the short `timing`; the
// full TimingOptions follow only when the screened median is within `margin` of the task's best
// confirmed latency `best_ms` (ShouldConfirm), so that the slow majority of candidates costs a few
// milliseconds instead of the full measurement.
struct ScreenOptions {
  bool enabled = false;  // false: every candidate gets the full measurement only
  TimingOptions timing;  // the screening measurement (a few repeats, caches flushed as usual)
  double best_ms = 0;  // the task's best confirmed latency; 0: none yet (every candidate confirms)
  double margin = 0;   // relative: confirm at or below best_ms * (1 + margin)
  bool confirm = false;  // confirm whatever the screen says (the server samples the noise)
};

// Whether a candidate screened at `screened_median_ms` gets the full measurement.
bool ShouldConfirm(const ScreenOptions& screen, double screened_median_ms);

// The relative half-width of a distribution-free 95% confidence interval of the median of
// `values`: the order statistics at ranks n/2 -+ 0.98 sqrt(n) (the normal approximation of the
// binomial), half their distance over the median. Infinity for fewer than 8 values (the interval
// would reach past the smallest or the largest) or a median of 0.
double MedianHalfWidth(std::vector<double> values);

// Whether `p` can be a TimingOptions::median_precision: 0 (off) or a fraction in (0, 1).
bool ValidMedianPrecision(double p);

// Whether timed repeats `repeats_ms` (adding up to `total_ms`) are enough by `options`'s rule:
// max_repeats reached, or min_repeats reached and either min_total_ms reached or the median
// precise to median_precision.
bool EnoughRepeats(const TimingOptions& options, const std::vector<double>& repeats_ms,
                   double total_ms);

// Fills median (the mean of the two middle values for an even count), min and max.
Timings MakeTimings(std::vector<double> repeats_ms);
// The median as MakeTimings computes it; 0 for none.
double MedianOf(std::vector<double> values);

}  // namespace tessel::measure
