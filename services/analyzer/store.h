// The analyzer's names for its store: the engine reads and writes the
// farm's database through storage::AnalyzerStore
// (lib/storage/analyzer_store.h), whose rows it uses unqualified as its own
// vocabulary. Declarations only; the store's contract (thread-safety,
// errors, transactions) is that header's.
#ifndef SERVICES_ANALYZER_STORE_H_
#define SERVICES_ANALYZER_STORE_H_

#include "lib/storage/analyzer_store.h"

namespace farm::analyzer {

using storage::ActiveBisect;
using storage::AlertWork;
using storage::AnalyzerStore;
using storage::BisectUpdate;
using storage::CommitRow;
using storage::ExecutorFromNumber;
using storage::FixCheckWork;
using storage::HistoryCell;
using storage::MatrixInfo;
using storage::NewRegression;
using storage::RegressionFinding;
using storage::SeriesSpec;

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_STORE_H_
