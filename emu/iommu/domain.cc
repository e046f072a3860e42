#include "emu/iommu/domain.h"

namespace farm::emu {

DmaDomain::DmaDomain(Sim* sim, int id_, int num_cpus)
    : id(id_),
      iovad(sim, "iovad", 1, num_cpus),
      pt(sim->m().iommu_type == IommuType::kSmmuV3 || sim->m().iommu_type == IommuType::kMmu500
             ? IoPageTable::Format::kArmLpae
             : IoPageTable::Format::kPagesOnly),
      tlb(sim->m().iotlb_entries, sim->m().iotlb_ways),
      pgtbl_lock(sim->engine, "pgtbl_lock"),
      rbtree_only_(sim->m().allocator == IovaAllocator::kRbtree) {
  sim->Register(&pgtbl_lock);
}

Task<void> DmaDomain::FreeIova(Cpu& cpu, uint64_t pfn, uint64_t npages) {
  if (rbtree_only_) {
    co_await iovad.FreeIova(cpu, pfn);  // __free_iova()
  } else {
    co_await iovad.FreeIovaFast(cpu, pfn, npages);
  }
}

}  // namespace farm::emu
