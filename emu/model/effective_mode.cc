#include "emu/model/effective_mode.h"

#include "absl/strings/str_cat.h"

namespace farm::emu {
namespace {

using iommu_mode::Mode;

// A lazy request on AMD-Vi under the era's strictness policy.
EffectiveMode AmdLazy(const Model& m) {
  const bool by_default = m.lazy_by_default;
  switch (m.amd_strict_policy) {
    case AmdStrictPolicy::kDriver:
      // amd_iommu_unmap_flush stays 0 without amd_iommu=fullflush; the
      // driver's own flush queue serves every DMA domain.
      return {Mode::kLazy, "AMD-Vi driver policy: flush queue (no amd_iommu=fullflush)"};
    case AmdStrictPolicy::kLateSet:
      if (!by_default) return {Mode::kLazy, "iommu.strict=0 -> flush queue"};
      return {Mode::kStrict,
              "kernel default: iommu_dma_strict still at its initial true when bus_set_iommu() "
              "allocated the default domain; amd_iommu_init_dma_ops() sets it from "
              "amd_iommu_unmap_flush only afterwards (a250c23f15c2)"};
    case AmdStrictPolicy::kEarlySet:
      if (!by_default) return {Mode::kLazy, "iommu.strict=0 -> flush queue"};
      return {Mode::kLazy,
              "kernel default: iommu_set_dma_strict(amd_iommu_unmap_flush = 0) before "
              "bus_set_iommu() -> flush queue"};
    case AmdStrictPolicy::kDomainType:
      break;
  }
  if (!by_default) return {Mode::kLazy, "iommu.strict=0 -> DMA-FQ"};
  return m.default_dma_lazy
             ? EffectiveMode{Mode::kLazy, "CONFIG_IOMMU_DEFAULT_DMA_LAZY -> DMA-FQ"}
             : EffectiveMode{Mode::kStrict, "CONFIG_IOMMU_DEFAULT_DMA_STRICT -> DMA"};
}

EffectiveMode Lazy(const Model& m) {
  if (m.iommu_type == IommuType::kAmd) return AmdLazy(m);
  if (!m.lazy_by_default) return {Mode::kLazy, "iommu.strict=0 -> flush queue"};
  return m.default_dma_lazy ? EffectiveMode{Mode::kLazy, "kernel default: lazy"}
                            : EffectiveMode{Mode::kStrict, "kernel default: strict"};
}

}  // namespace

EffectiveMode ResolveEffectiveMode(const Model& m, Mode requested) {
  switch (requested) {
    case Mode::kOff:
      return {Mode::kOff, "IOMMU off as requested"};
    case Mode::kPassthrough:
      return {Mode::kPassthrough, "iommu.passthrough=1 -> identity"};
    case Mode::kStrict:
      if (m.iommu_type == IommuType::kAmd && m.amd_strict_policy == AmdStrictPolicy::kDriver) {
        return {Mode::kStrict, "amd_iommu=fullflush (no iommu.strict on x86 before a250c23f15c2)"};
      }
      return {Mode::kStrict, "iommu.strict=1 -> DMA"};
    case Mode::kLazy:
      break;
  }
  EffectiveMode e = Lazy(m);
  if (e.mode == Mode::kLazy && m.fq_init_fails) {
    // iommu_dma_init_fq() failing leaves the domain IOMMU_DOMAIN_DMA.
    return {Mode::kStrict, absl::StrCat(e.decided_by,
                                        "; the flush queue could not be set up "
                                        "(iommu_dma_init_fq) -> strict")};
  }
  return e;
}

}  // namespace farm::emu
