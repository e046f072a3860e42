// emu/run/catalog_check.h: the commit catalog's truth check. Every `expect:`
// entry of a catalog (emu/model/catalog.h, docs/catalog.md "Expectations")
// says what a commit's own message, cover letter or testers reported about its
// performance, or, labelled as such, what the catalog comment predicts. The
// check runs the commit and its baseline (the previous entry, or `against`) on
// every platform and mode the entry names, with zero run-to-run noise, and
// compares the model's speedup with the entry's band. `farm-emu
// check-catalog` prints the result; emu/run/catalog_check_test.cc holds the
// shipped catalog to it.
//
// An entry marked `model_todo` is a known disagreement of the model: its rows
// are expected to fail (printed as "known"), and one that passes is itself a
// failure ("fixed"), so the marker goes away with the model's fix.
//
// Thread-safety: CheckCatalog runs the emulations on its own worker threads
// (RunEmulation is reentrant); the functions share no state between calls.
#ifndef EMU_RUN_CATALOG_CHECK_H_
#define EMU_RUN_CATALOG_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace farm::emu {

struct CatalogCheckOptions {
  std::string catalog;  // "": DefaultCatalogPath()
  std::string commit;   // "": every commit; else only this commit's expectations
  int jobs = 0;         // emulations run at once; 0: the host's hardware threads
};

enum class CheckVerdict {
  kPass,       // the model agrees
  kFail,       // the model disagrees and no model_todo says so
  kKnownFail,  // the model disagrees, as the entry's model_todo says
  kFixed,      // a model_todo entry the model now agrees with: remove the marker
  kError,      // a run failed, or a metric was zero
  kUnchecked,  // a commit that sets model keys but records no expectation
};

const char* CheckVerdictName(CheckVerdict v);  // "PASS", "FAIL", "known", "FIXED", ...

// One platform x mode of one expectation.
struct CatalogCheckRow {
  std::string commit, baseline;
  std::string platform, mode;
  std::string workload;               // with its params: "dma-map-bench threads=32 seconds=0.0005"
  std::string metric;                 // throughput, map_ns, unmap_ns
  std::string expected;               // "faster, x1.01..inf"
  bool from_catalog_comment = false;  // no published source: the catalog's own prediction
  std::string claim, source, model_todo;
  double baseline_value = 0, commit_value = 0;
  double speedup = 0;  // how many times faster the commit is than its baseline
  CheckVerdict verdict = CheckVerdict::kPass;
  std::string note;  // an error's text
};

// Loads the catalog (workload params checked against the registry) and runs
// every expectation. Errors: the catalog's load errors, NotFound for an
// unknown --commit. A failed run is a kError row, not an error.
absl::StatusOr<std::vector<CatalogCheckRow>> CheckCatalog(const CatalogCheckOptions& options);

// True when a row is kFail, kFixed or kError.
bool CatalogCheckFailed(const std::vector<CatalogCheckRow>& rows);

// The rows as one Markdown table (commit, baseline, platform, mode, workload,
// metric, expected, model, verdict), then each expectation's claim, source
// and model_todo once, then the counts.
std::string FormatCatalogCheck(const std::vector<CatalogCheckRow>& rows);

}  // namespace farm::emu

#endif  // EMU_RUN_CATALOG_CHECK_H_
