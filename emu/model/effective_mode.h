// emu/model/effective_mode.h: which IOMMU mode a modelled kernel's DMA
// domains really run for the mode a run asks for.
//
// A kernel does not always run the mode it is asked for: before a250c23f15c2
// an AMD-Vi kernel read no iommu.strict on x86 (amd_iommu=fullflush was its
// switch); from a250c23f15c2 until be227f8e99a6 the driver set the core's
// strictness only after its boot-time default domains were allocated, so a
// lazy request left to the kernel's default ran strict (the 2021 ice
// throughput loss Jussi Maki bisected by hand); since v5.15 the default
// domain type (DMA / DMA-FQ) comes from iommu.strict or
// CONFIG_IOMMU_DEFAULT_DMA_{LAZY,STRICT}; and a flush queue that cannot be set
// up leaves the domain strict. ResolveEffectiveMode applies the rules of the
// model's era keys (amd.strict_policy, iommu.default_dma, boot.lazy_request,
// fq.init_fails) and says what decided, as a real run's facts do
// (HostFacts.iommu_mode / iommu_detail). Off and passthrough are run as asked.
//
// Pure function; thread-safe; no ownership.
#ifndef EMU_MODEL_EFFECTIVE_MODE_H_
#define EMU_MODEL_EFFECTIVE_MODE_H_

#include <string>

#include "emu/model/model_config.h"
#include "lib/iommu_mode/iommu_mode.h"

namespace farm::emu {

struct EffectiveMode {
  iommu_mode::Mode mode = iommu_mode::Mode::kOff;
  // What decided it, e.g. "iommu.strict=0 -> DMA-FQ" or "kernel default:
  // iommu_dma_strict still true when bus_set_iommu() allocated the default
  // domain (amd_iommu_init_dma_ops() runs after amd_iommu_init_api())".
  std::string decided_by;
};

//! The mode every default DMA domain of a kernel configured as `m` runs when
//! `requested` is asked for (all modelled devices are probed at boot, so one
//! decision holds for each of their domains).
EffectiveMode ResolveEffectiveMode(const Model& m, iommu_mode::Mode requested);

}  // namespace farm::emu

#endif  // EMU_MODEL_EFFECTIVE_MODE_H_
