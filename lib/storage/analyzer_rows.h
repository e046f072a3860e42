// The analyzer's plain rows that both its store (analyzer_store.h) and its
// pure core (services/analyzer: series, bisect planner) speak: a stored
// sample as the analyzer reads it, and a bisect's step and culprit as the
// planner records them and the store writes them (bisect_steps,
// bisect_culprits). Here, below both, so the store needs nothing of the
// analyzer and the core nothing of a database.
//
// Plain value types: no shared state, thread-compatible, copyable.
#ifndef LIB_STORAGE_ANALYZER_ROWS_H_
#define LIB_STORAGE_ANALYZER_ROWS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace farm::storage {

// The sample every result that states the IOMMU mode its kernel really ran
// for the job's mode (HostFacts.iommu_mode with guest.requested_mode set: a
// guest's or the emulator's kernel) carries besides its own: that mode's
// iommufarm.v1.IommuMode number. A categorical metric (no direction): the
// analyzer's mode-change findings read it, its performance detection does
// not.
inline constexpr char kEffectiveModeMetric[] = "effective_mode";

// One stored sample as the analyzer reads it: a value of an accepted result
// with its job's cell.
struct SampleRow {
  int64_t sample_id = 0;  // the result's job id
  int64_t matrix_id = 0;
  std::string catalog;
  std::string commit_id;
  int commit_index = 0;
  std::string platform;
  std::string workload;
  // The job's workload params as canonical JSON (keys sorted, values as
  // given): `threads: 1` and `threads: 16` of one workload are two series.
  std::string params = "{}";
  std::string mode;    // "off", "passthrough", "strict", "lazy"
  std::string metric;  // Sample.metric
  std::string phase;   // Sample.phase, may be empty
  std::string unit;    // Sample.unit, may be empty
  // How the figures were timed (ResultTiming below): a guest's clock
  // ("tcg-icount shift 7", "tcg", "kvm"), or a real host run's hygiene
  // ("governor=performance turbo=off smt=on cpus=0-15 mems=0"), then a real
  // run's IOMMU environment ("iommu-env=3f2a9c01d4e7"); empty for the
  // emulator. Figures of different timings never share a series.
  std::string timing;
  int repeat = 0;
  double value = 0;
  // Sample.intervals: the metric over the run, one value per equal interval
  // (the emulator's throughput per interval of virtual time); empty when
  // the tool reports none.
  std::vector<double> intervals;
};

// A guest result's timing from its guest facts (accel, icount shift): the
// shift counts only under icount, where it sets the guest's clock.
inline std::string GuestTiming(const std::string& accel, const std::string& icount_shift) {
  if (accel == "tcg-icount") return accel + " shift " + icount_shift;
  return accel;
}

// How a real run on the host itself was measured (its HostFacts.hygiene):
// "governor=performance turbo=off smt=on cpus=0-15 mems=0", the parts the
// host told; "" when it told none.
struct HostHygiene {
  std::string governor, turbo, smt, cpus, mems;
  std::string counters;  // Hygiene.kernel_counters
};
inline std::string HygieneTiming(const HostHygiene& h) {
  std::string out;
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"governor", &h.governor},
        {"turbo", &h.turbo},
        {"smt", &h.smt},
        {"cpus", &h.cpus},
        {"mems", &h.mems},
        {"kernel-counters", &h.counters}}) {
    if (value->empty()) continue;
    if (!out.empty()) out += ' ';
    out += std::string(key) + "=" + *value;
  }
  return out;
}

// A result's timing: a guest's clock (GuestTiming) when it ran in a guest
// (and whether the kernel's event counters were on), else for a real run the
// host's hygiene; "" for the emulator, whose figures
// do not depend on the agent's host. A real run's IOMMU environment
// (HostFacts.iommu_environment.digest, "" for results that carry none)
// follows as "iommu-env=<its first 12 hex digits>": a kernel under other
// firmware, IOMMU registers or domain types is another series.
inline std::string ResultTiming(bool real, const std::string& accel,
                                const std::string& icount_shift, const HostHygiene& h,
                                const std::string& environment_digest) {
  std::string timing = !accel.empty() ? GuestTiming(accel, icount_shift)
                       : real         ? HygieneTiming(h)
                                      : "";
  // A guest's run counted with the kernel's event counters on did more
  // work on the measured path (hygiene's own parts are the host's).
  if (!accel.empty() && !h.counters.empty()) timing += " kernel-counters=" + h.counters;
  if (real && !environment_digest.empty()) {
    if (!timing.empty()) timing += ' ';
    timing += "iommu-env=" + environment_digest.substr(0, 12);
  }
  return timing;
}

// One judgement of a bisect (a bisect_steps row); step 0 is the
// confirmation.
struct BisectStepRecord {
  int step = 0;  // 1-based
  int commit_index = 0;
  std::string commit_id;
  // "pending", "good", "bad", "weak-good", "weak-bad", "split", "skip"
  std::string verdict;
  int repeats = 0;  // samples the verdict rests on
  double mean = 0;
  double p_value = 1;          // against the reference it was judged closer to the other of
  double relative_change = 0;  // against the last good reference mean
};

// One first bad commit of a bisected range, with the change it brings:
// measured between the references of the part of the range it was bisected
// in.
struct Culprit {
  int last_good_index = 0;
  int index = 0;  // the first bad commit
  std::string commit_id;
  double relative_change = 0;  // its part's change, relative to the range's last good mean
  double share = 0;            // its part's change over the whole range's change
  // Skipped commits between last_good_index and index, in order: when there
  // are any, the first bad is one of them or `index`, which could not be told
  // apart. Not stored (the subject the analyzer writes names them).
  std::vector<int> skipped;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_ANALYZER_ROWS_H_
