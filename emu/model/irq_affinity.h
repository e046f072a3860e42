// emu/model/irq_affinity.h: which CPU takes the completion interrupt of each device
// queue, and which queue a submitting CPU uses.
//
// blk-mq maps every CPU to one hardware queue (the queue whose affinity mask
// holds it); the queue's MSI-X vector fires on one CPU of that mask (the
// "effective" CPU). Completion work (nvme_irq -> blk_mq_complete_request ->
// dma_unmap) therefore runs on the effective CPU, which may be another CPU, or
// the submitting CPU itself (seed 002: CPU 4 both submits and services the
// interrupt of queue 0-5).
//
// Syntax of --param irq_affinity: queues separated by ';' or whitespace, each
// "<cpu list>@<effective cpu>", e.g. "0-5@4;6-11@6;32-38@35".
// ParseProcText reads the listing seed 002 prints:
//   -eirq 316, cpu list 0-5, effective list 4
// Pure value type; thread-safe when const.
#ifndef EMU_MODEL_IRQ_AFFINITY_H_
#define EMU_MODEL_IRQ_AFFINITY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/engine/engine.h"

namespace farm::emu {

//! "0,4,32-35" -> {0,4,32,33,34,35} (the kernel's cpulist syntax).
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

class IrqAffinity {
 public:
  struct Queue {
    std::vector<int> cpus;
    int effective = 0;
  };

  static absl::StatusOr<IrqAffinity> Parse(const std::string& spec);
  // `skip_first`: NVMe lists its admin vector first (pre_vectors = 1); it
  // carries no I/O and is dropped.
  static absl::StatusOr<IrqAffinity> ParseProcText(const std::string& text, bool skip_first);
  // Linux-like default: `queues` vectors spread over the nodes, each node's
  // CPUs cut into consecutive groups; the effective CPU is a group's first.
  static IrqAffinity Spread(const Topology& topo, int queues);

  const std::vector<Queue>& queues() const { return queues_; }
  // Queue index serving CPU `cpu`, or -1 when no mask holds it.
  int QueueOf(int cpu) const;
  // Effective IRQ CPU for submissions from `cpu` (itself when unmapped).
  int IrqCpuFor(int cpu) const;
  std::string ToString() const;

 private:
  std::vector<Queue> queues_;
};

}  // namespace farm::emu

#endif  // EMU_MODEL_IRQ_AFFINITY_H_
