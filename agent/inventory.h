// farm::agent inventory: what a lab host is made of, as its kernel shows it,
// for `farmctl agents` and for every result's host facts (HostFacts.inventory):
// the CPU model, sockets, memory, each IOMMU unit of /sys/class/iommu with
// the attributes its driver exports, and every device or directory the
// agent's jobs may touch with the PCI function, driver and IOMMU group
// behind it. Two hosts that answer to one platform label can then be told
// apart when their figures differ. It also says which kernel counters the
// monitors can read around a real run here (agent/monitors/kernel_counters.h)
// and why each absent one is absent.
//
// All paths are read under a root directory, so tests feed fake trees; a
// fact the tree does not hold is left empty (never an error: a container or
// a VM shows less of sysfs).
//
// Thread-safety: reentrant. No ownership.
#ifndef AGENT_INVENTORY_H_
#define AGENT_INVENTORY_H_

#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

struct InventoryScope {
  std::vector<std::string> allow_dirs;     // --allow-dir
  std::vector<std::string> allow_devices;  // --allow-device, without ":rw"
};

// Reads the inventory under `root` ("/" on a real host).
iommufarm::v1::Inventory DetectInventory(const InventoryScope& scope,
                                         const std::string& root = "/");

}  // namespace farm::agent

#endif  // AGENT_INVENTORY_H_
