// proto/names.h: the one spelling of the API's enums in specs, CLIs, logs and
// SQL, e.g. IOMMU_MODE_STRICT <-> "strict" (the word users write in a matrix
// spec and the kernel command line calls iommu.strict=1). The modes' words
// are lib/iommu_mode's table; this adds the proto enum's conversions.
//
// Pure functions over the generated enums; thread-safe; no allocation beyond
// the returned strings. Unknown words map to the *_UNSPECIFIED value and
// unspecified values to "unspecified", so callers decide what is an error.
#ifndef PROTO_NAMES_H_
#define PROTO_NAMES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "iommufarm/v1/farm.pb.h"
#include "lib/iommu_mode/iommu_mode.h"

namespace farm::proto {

// The word of every *_UNSPECIFIED value (and of numbers out of range).
inline constexpr char kUnspecifiedName[] = "unspecified";

// IOMMU_MODE_OFF <-> iommu_mode::Mode::kOff, ...; nullopt for UNSPECIFIED
// and numbers out of range.
std::optional<iommu_mode::Mode> ModeOf(iommufarm::v1::IommuMode mode);
iommufarm::v1::IommuMode ProtoMode(iommu_mode::Mode mode);

// "off", "passthrough", "strict", "lazy".
std::string ModeName(iommufarm::v1::IommuMode mode);
iommufarm::v1::IommuMode ModeFromName(std::string_view name);
// Every mode's word, in enum order: for --help and "known: ..." messages.
std::vector<std::string> ModeNames();
// As stored in PostgreSQL (the enum's number); out-of-range numbers are
// "unspecified".
std::string ModeName(int mode_number);

// "emulator", "fio", "iozone", "kbuild", "dma-map-bench".
std::string ExecutorName(iommufarm::v1::Executor executor);
iommufarm::v1::Executor ExecutorFromName(std::string_view name);
// Every executor's word, in enum order.
std::vector<std::string> ExecutorNames();
// An executor that runs a real tool under a real kernel (fio, iozone,
// dma-map-bench): its jobs need a kernel offer (lib/storage/run_eligibility.h).
bool IsRealExecutor(iommufarm::v1::Executor executor);

// "queued", "leased", "succeeded", "failed", "cancelled".
std::string JobStateName(iommufarm::v1::JobState state);

// "running", "completed", "failed", "cancelled".
std::string MatrixStateName(iommufarm::v1::MatrixState state);

// "suspected", "confirmed", "acknowledged", "fixed", "false-positive", "rejected".
std::string RegressionStateName(iommufarm::v1::RegressionState state);
iommufarm::v1::RegressionState RegressionStateFromName(std::string_view name);
// Every regression state's word, in enum order.
std::vector<std::string> RegressionStateNames();

// A change from a zero baseline (a counter that was never hit) has no
// relative size; a Regression's magnitude (and every relative change the
// analyzer reports) holds it as +-kChangeFromZero.
inline constexpr double kChangeFromZero = 1e9;
// A relative change as it is shown: a signed percentage ("-12.5%"), or
// "rose from 0" / "fell from 0".
std::string RelativeChangeText(double relative_change);

// The "metric/phase" a real tool's confirmation run compares by default
// (analysis.confirm.metric): fio's iops of the one phase of a pure read or
// write job (`rw` read/randread or write/randwrite); "" otherwise (a mixed
// fio job, iozone), where the spec must name one.
std::string DefaultConfirmMetric(iommufarm::v1::Executor executor, std::string_view fio_rw);

}  // namespace farm::proto

#endif  // PROTO_NAMES_H_
