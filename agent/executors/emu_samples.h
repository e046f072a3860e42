// farm::agent emulator samples: the numbers of one emulator RunResult as the
// Samples an agent reports.
//
// Metrics (unit in brackets):
//   throughput [result unit], throughput_per_cpu [unit/cpu], operations,
//   errors, map_latency_{mean,p50,p99,max} [ns], unmap_latency_{...} [ns],
//   cpu_busy [%], rcache_hit_rate [ratio], lock_wait [ns],
//   iotlb_miss_rate [ratio], virtual_time [ns], events, and every workload
//   extra under its own name. An extra named "<metric>.<phase>" (e.g.
//   "throughput.write" from iozone) becomes metric <metric> with that phase.
// The throughput sample carries the run's throughput per interval of virtual
// time (Sample.intervals, interval_seconds) when the workload keeps one.
// The analyzer reads "throughput" as the main metric.
//
// Thread-safety: pure function.
#ifndef AGENT_EXECUTORS_EMU_SAMPLES_H_
#define AGENT_EXECUTORS_EMU_SAMPLES_H_

#include <vector>

#include "emu/run/result.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

std::vector<iommufarm::v1::Sample> SamplesFromEmuResult(const farm::emu::RunResult& result);

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_EMU_SAMPLES_H_
