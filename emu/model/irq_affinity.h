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
//
// Several devices of one model (PerDeviceAffinity) each have their own
// vectors: managed affinity (irq_create_affinity_masks -> group_cpus_evenly)
// gives every device the same masks, and the interrupt controller picks each
// vector's effective CPU as the least-loaded CPU of its mask, so the devices'
// vectors spread over a mask's CPUs instead of piling onto one.
// Pure value type; thread-safe when const.
#ifndef EMU_MODEL_IRQ_AFFINITY_H_
#define EMU_MODEL_IRQ_AFFINITY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/engine/engine.h"

namespace farm::emu {

//! The interrupt controller that picks a managed vector's effective CPU.
enum class IrqChip {
  kX86Vector,  // x86 vector domain: irq_matrix_alloc_managed (kernel/irq/matrix.c)
  kGicIts,     // GICv3 ITS: its_select_cpu (drivers/irqchip/irq-gic-v3-its.c)
};
//! "x86-vector" or "gic-its".
const char* IrqChipName(IrqChip chip);

//! "0,4,32-35" -> {0,4,32,33,34,35} (the kernel's cpulist syntax).
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

class IrqAffinity {
 public:
  struct Queue {
    std::vector<int> cpus;
    int effective = 0;
  };

  IrqAffinity() = default;
  explicit IrqAffinity(std::vector<Queue> queues) : queues_(std::move(queues)) {}

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

//! One map per device for `devices` devices of one model, in probe order.
//! Device 0's map is `first` unchanged (the platform's measured map or the
//! user's); every later device has the same masks, and each of its vectors
//! goes to the CPU `chip` would pick given every vector placed before it.
//! REQUIRES: devices >= 1.
std::vector<IrqAffinity> PerDeviceAffinity(const IrqAffinity& first, int devices, IrqChip chip);

}  // namespace farm::emu

#endif  // EMU_MODEL_IRQ_AFFINITY_H_
