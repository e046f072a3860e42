// emu/workloads/io_adapter.h: registry entries of the part-2 workloads
// (fio-nvme, iozone-nfsrdma, tcp-stream, nvmf-target) for farm::emu::AllWorkloads().
// Each entry's factory makes an farm::emu::Workload that runs the workload of
// workloads_io.h on the run's engine and DmaApi; `--format kernel` (and the
// CLI's fio-json / iozone formats) print RunResult::kernel_output, the real
// tool's output (fio JSON or the iozone report).
// Thread-safety: the returned list is a fresh value; entries are immutable.
#ifndef EMU_WORKLOADS_IO_ADAPTER_H_
#define EMU_WORKLOADS_IO_ADAPTER_H_

#include <vector>

#include "emu/workloads/workload.h"

namespace farm::emu {

std::vector<WorkloadInfo> IoWorkloadInfos();

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_IO_ADAPTER_H_
