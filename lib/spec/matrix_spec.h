// lib/spec/matrix_spec: a matrix spec once checked (lib/spec/spec_check.h):
// defaults filled in, names and ids as the spec gives them (commits are
// still unresolved: the scheduler resolves them against its catalogs), and
// the caps a spec is checked against.
//
// Contract: plain values, no invariants beyond what CheckMatrixSpec
// guarantees for the ones it returns.
#ifndef LIB_SPEC_MATRIX_SPEC_H_
#define LIB_SPEC_MATRIX_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::spec {

namespace pb = ::iommufarm::v1;

struct SpecLimits {
  int64_t max_jobs_per_matrix = 100000;
  size_t max_spec_bytes = 1 << 20;
};

// One workload as it runs: a sweep (pb::Workload.sweep) is expanded into one
// WorkloadSpec per combination of its values.
struct WorkloadSpec {
  std::string name;
  std::map<std::string, std::string> params;  // lists comma-joined
  std::string path;  // the spec field it came from ("workloads[1]"), for errors
};

// The most runs one workload's sweep may expand into.
inline constexpr size_t kMaxSweepCombinations = 1000;

// `analysis.confirm`: the confirmation step of the emulator's findings run
// as real jobs (docs/analyzer.md "Confirmation on real kernels").
struct ConfirmSpec {
  bool enabled = false;
  pb::Executor executor = pb::EXECUTOR_UNSPECIFIED;  // fio or iozone
  WorkloadSpec workload;
  std::string catalog;   // "": the matrix's
  std::string platform;  // "": the finding's
  int repeats = 3;       // per commit
  int max_repeats = 3;   // doubling cap of a suggestive result
  std::string metric;    // "metric/phase", e.g. "iops/read"
};

struct MatrixSpec {
  std::string name;
  std::string catalog;
  std::vector<std::string> platforms;
  // Either a range (inclusive, catalog order) or an explicit list.
  bool commit_range = false;
  std::string range_from, range_to;
  std::vector<std::string> commit_ids;
  std::vector<pb::IommuMode> modes;
  std::vector<WorkloadSpec> workloads;
  int repeats = 1;
  pb::Executor executor = pb::EXECUTOR_EMULATOR;
  bool bisect = false;
  ConfirmSpec confirm;
  // Extension: "kind: bulk|confirm|bisect" (default bulk). The analyzer
  // submits confirm and bisect matrices; kind sets the priority band.
  pb::JobKind kind = pb::JOB_KIND_BULK;
  int priority = 0;  // within the kind's band, -999..999
  uint64_t seed = 0;
  std::map<std::string, std::string> model_set;  // "set:" keys
  // Agent labels every job needs (`labels:`, proto/labels.h).
  std::map<std::string, std::string> labels;
  // A try job's patch (`patch:`): a unified diff built on the one listed
  // commit; the matrix measures that commit and its try commit
  // (proto/try_commit.h).
  std::string patch;
  // The kernel config (`kernel_config:`, proto/kernel_config.h) and its id;
  // both empty for the default.
  pb::KernelConfig kernel_config;
  std::string kernel_config_id;
  // The QEMU accelerator (`accel:`, proto/kernel_offers.h); "" for any.
  std::string accel;
  std::vector<std::string> warnings;
};

}  // namespace farm::spec

#endif  // LIB_SPEC_MATRIX_SPEC_H_
