// emu/model/platform.h: the emulated machines.
//
// A Platform is a CPU/NUMA topology, the IOMMU it has, its DMA devices (with
// where they sit and how their interrupts are spread), the interrupt
// controller that places managed vectors, and one cost table (model-key settings
// applied over the registry defaults). Every workload and kernel on a platform uses the same table:
// there are no per-workload or per-scenario factors. docs/emulator.md says where each number comes
// from. Thread-safety: the registry is immutable after first use.
#ifndef EMU_MODEL_PLATFORM_H_
#define EMU_MODEL_PLATFORM_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/engine/engine.h"
#include "emu/model/irq_affinity.h"

namespace farm::emu {

//! How a device reaches memory: its IOMMU group's default domain type
//! (/sys/kernel/iommu_groups/N/type, writable since v5.11) or no IOMMU.
enum class DeviceAttach {
  kAuto,        // model keys only: the platform's fact for the device
  kTranslated,  // a DMA domain: "DMA" (strict) or "DMA-FQ" (lazy), following the mode
  kIdentity,    // "identity": passthrough, dma-direct
  kNone,        // not behind an IOMMU (its root complex has none): dma-direct
};

//! A DMA-capable device of a platform.
struct DeviceSpec {
  std::string name;
  std::string description;
  int node = 0;
  bool pci = true;
  int dma_bits = 64;  // the driver's DMA mask
  //! Effective IRQ CPU of each of the device's I/O queues as the machine
  //! assigns them, in the `--param irq_affinity` syntax (irq_affinity.h);
  //! empty = Linux's default spread over the nodes (IrqAffinity::Spread).
  std::string irq_affinity;
  //! A network device's line rate, Gb/s (0: not a network device). The
  //! network workloads' link_gbps defaults to it.
  double link_gbps = 0;
  //! The platform's fact; never kAuto.
  DeviceAttach attach = DeviceAttach::kTranslated;
};

struct Platform {
  std::string name;
  std::string description;
  Topology topology;
  std::vector<DeviceSpec> devices;
  //! Picks the effective CPU of a second or later device's queue vectors
  //! (PerDeviceAffinity): the x86 vector domain or the GICv3 ITS.
  IrqChip irq_chip = IrqChip::kX86Vector;
  //! Model keys this platform sets: iommu.type, coherency, and every cost.
  std::map<std::string, std::string> settings;
};

const std::vector<Platform>& AllPlatforms();
//! The named platform; NotFound lists the valid names.
absl::StatusOr<const Platform*> FindPlatform(const std::string& name);

}  // namespace farm::emu

#endif  // EMU_MODEL_PLATFORM_H_
