// emu/run/platform_fidelity.h: the current platforms (intel-spr-2s56c,
// amd-genoa-2s96c, nvidia-grace-2s72c) against every published figure of
// their IOMMU DMA path that was found, as one table.
//
// Each row names the published figure and its source, the band the model's
// figure must fall in, and the farm-emu runs that make the model's figure
// (zero noise, seed 1, so the table is the same on every machine). `farm-emu
// fidelity` prints the table; docs/fidelity.md carries it verbatim and
// emu_platforms_today_test checks both the bands and that the document
// matches, so the document's model figures cannot drift from the model.
// Thread-safety: the functions are reentrant; each call runs its own
// emulations.
#ifndef EMU_RUN_PLATFORM_FIDELITY_H_
#define EMU_RUN_PLATFORM_FIDELITY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/run/run.h"

namespace farm::emu {

struct PlatformFidelityRow {
  std::string platform;
  std::string what;       // the workload and the condition compared
  std::string published;  // the figure as published, in its own units
  std::string source;     // where it was published (URL, commit, message id)
  double published_value = 0;
  double band_lo = 0, band_hi = 0;  // the model's figure must fall in [lo, hi]
  //! Empty when the model is expected inside the band; otherwise why it is not
  //! (the test then requires it outside, so a fix shows up as a change).
  std::string known_gap;
  std::vector<RunSpec> runs;  // the emulations the model figure is made of
  std::string model_detail;   // the runs' own figures, in words
  double model_value = 0;
  bool pass = false;
};

//! Runs every row's emulations and fills model_value, model_detail and pass.
absl::StatusOr<std::vector<PlatformFidelityRow>> PlatformsTodayFidelity();

//! The farm-emu command line that performs `spec` (text output).
std::string FarmEmuCommand(const RunSpec& spec);

//! The Markdown table docs/fidelity.md carries, then each row's commands.
std::string FormatPlatformFidelity(const std::vector<PlatformFidelityRow>& rows);

}  // namespace farm::emu

#endif  // EMU_RUN_PLATFORM_FIDELITY_H_
