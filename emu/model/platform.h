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
  //! The PCIe link the device trained at: generation (3, 4, 5) and lanes;
  //! 0 = not behind a PCIe link of its own (an on-chip device) or no figure.
  int pcie_gen = 0;
  int pcie_lanes = 0;
  //! The device's own data rate, bytes/s, per direction as its datasheet
  //! states it: a storage device's sequential read (device to memory) and
  //! write (memory to device); 0 = none stated. A NIC's is its line rate.
  double media_read_bytes_per_s = 0;
  double media_write_bytes_per_s = 0;
};

//! Bytes/s one direction of a PCIe link carries: `gen`'s transfer rate per
//! lane (PCIe 3.0 8 GT/s, 4.0 16 GT/s, 5.0 32 GT/s) x `lanes` x the 128b/130b
//! encoding's 128/130, over 8 bits; TLP headers are not deducted. 0 for an
//! unknown generation or no lanes.
double PcieLinkBytesPerSec(int gen, int lanes);

//! The most device `d` moves in one direction, bytes/s: the smaller of its
//! PCIe link and its own rate for that direction (`to_device`: memory to
//! device, i.e. a storage write or a NIC transmit). A NIC's own rate is its
//! line rate (link_gbps). 0 = no figure on either side: unlimited.
double DeviceDmaBytesPerSec(const DeviceSpec& d, bool to_device);

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
  //! PCIe lanes of the root complexes, all sockets (0: not published): how
  //! many x4 NVMe drives the machine can attach without a switch.
  int pcie_lanes = 0;
};

const std::vector<Platform>& AllPlatforms();
//! The named platform; NotFound lists the valid names.
absl::StatusOr<const Platform*> FindPlatform(const std::string& name);

}  // namespace farm::emu

#endif  // EMU_MODEL_PLATFORM_H_
