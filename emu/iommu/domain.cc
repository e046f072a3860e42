#include "emu/iommu/domain.h"

namespace farm::emu {

DmaDomain::DmaDomain(Sim* sim, int id_, int num_cpus, Free free)
    : id(id_),
      iovad(sim, "iovad", 1, num_cpus),
      pt(sim->m().iommu_type == IommuType::kSmmuV3 || sim->m().iommu_type == IommuType::kMmu500
             ? IoPageTable::Format::kArmLpae
             : IoPageTable::Format::kPagesOnly),
      tlb(sim->m().iotlb_entries, sim->m().iotlb_ways),
      pgtbl_lock(sim->engine, "pgtbl_lock"),
      free_(free) {
  sim->Register(&pgtbl_lock);
}

Task<void> DmaDomain::FreeIova(Cpu& cpu, uint64_t pfn, uint64_t npages) {
  switch (free_) {
    case Free::kFreeIovaFast:
      return iovad.FreeIovaFast(cpu, pfn, npages);
    case Free::kFreeIova:
      return iovad.FreeIova(cpu, pfn);
    case Free::kFindAndFreeIova:
      return FindAndFreeIova(cpu, pfn);
  }
  return {};
}

// __iommu_dma_unmap(): find_iova() for the size, then __free_iova().
Task<void> DmaDomain::FindAndFreeIova(Cpu& cpu, uint64_t pfn) {
  co_await iovad.FindIova(cpu, pfn);
  co_await iovad.FreeFoundIova(cpu, pfn);
}

}  // namespace farm::emu
