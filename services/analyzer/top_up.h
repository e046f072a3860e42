// top_up: the bulk's adaptive repeats, as the matrices the analyzer submits
// for them.
//
// Where the bulk scan of a matrix is suggestive but nothing is significant
// (detect.h TopUpRequests), the commits around the split are measured again
// before a candidate is opened: five runs a commit leave a 3% change under
// 2% noise, or a 5% change under 5%, undecided as often as not, and a
// two-commit confirmation cannot find a change the scan never opened. One
// bulk matrix per (cell, mode), each commit with as many repeats as it
// holds (doubling), the matrix's own `set:` and analysis (so what its
// analysis opens is confirmed and bisected as the matrix's findings would
// be), and a seed of its own: the emulator's noise is a function of the
// seed, and the same seed would measure the same values again. Its results
// extend the series as every other submission's do, and its analysis
// decides: the split is significant (a candidate), still suggestive
// (another round, until a commit holds DetectOptions::max_top_up_factor x
// the series' bulk repeats) or gone.
//
// Pure functions; thread-safe.
#ifndef SERVICES_ANALYZER_TOP_UP_H_
#define SERVICES_ANALYZER_TOP_UP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"
#include "services/analyzer/detect.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

// One matrix of a top-up: a cell in one mode (and off for an overhead
// series) at the commits its requests asked for.
struct TopUpMatrix {
  std::string platform, workload, params = "{}";  // the cell (SeriesKey)
  std::string mode;
  bool overhead = false;
  std::vector<std::string> commits;  // catalog order, each once
  int repeats = 0;                   // the fewest of its requests'
  std::vector<std::string> splits;   // "<metric> <last good>..<first bad>", for the log
};

// The requests grouped by (cell, mode, overhead), in that order.
std::vector<TopUpMatrix> GroupTopUps(const std::vector<TopUpRequest>& requests);

// The typed spec of `t` over `cell` (the matrix's job of the cell: params,
// `set:`, executor): a bulk matrix named after matrix `of`, with `analysis`,
// repeats t.repeats and the seed of (of, index).
iommufarm::v1::MatrixSpec TopUpSpec(const TopUpMatrix& t, SeriesSpec cell,
                                    const iommufarm::v1::MatrixAnalysis& analysis, int64_t of,
                                    int index, int priority);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_TOP_UP_H_
