#include "proto/names.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/str_format.h"

namespace farm::proto {
namespace pb = ::iommufarm::v1;
namespace {

// One table per enum serves both directions, so a spelling is written once.
template <typename E>
struct Spelling {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
std::string NameOf(const Spelling<E> (&table)[N], E value) {
  for (const Spelling<E>& s : table) {
    if (s.value == value) return std::string(s.name);
  }
  return kUnspecifiedName;
}

template <typename E, size_t N>
std::vector<std::string> NamesOf(const Spelling<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const Spelling<E>& s : table) out.emplace_back(s.name);
  return out;
}

template <typename E, size_t N>
E ValueOf(const Spelling<E> (&table)[N], std::string_view name, E unspecified) {
  for (const Spelling<E>& s : table) {
    if (s.name == name) return s.value;
  }
  return unspecified;
}

// iommu_mode::Mode is in the proto enum's order, one below its numbers.
constexpr int kModeOffset = pb::IOMMU_MODE_OFF - static_cast<int>(iommu_mode::Mode::kOff);
static_assert(pb::IOMMU_MODE_PASSTHROUGH ==
              kModeOffset + static_cast<int>(iommu_mode::Mode::kPassthrough));
static_assert(pb::IOMMU_MODE_STRICT == kModeOffset + static_cast<int>(iommu_mode::Mode::kStrict));
static_assert(pb::IOMMU_MODE_LAZY == kModeOffset + static_cast<int>(iommu_mode::Mode::kLazy));
static_assert(pb::IommuMode_MAX == pb::IOMMU_MODE_LAZY, "a proto mode without a table row");

constexpr Spelling<pb::Executor> kExecutors[] = {
    {pb::EXECUTOR_EMULATOR, "emulator"},
    {pb::EXECUTOR_FIO, "fio"},
    {pb::EXECUTOR_IOZONE, "iozone"},
    {pb::EXECUTOR_KBUILD, "kbuild"},
    {pb::EXECUTOR_DMA_MAP_BENCH, "dma-map-bench"},
};

constexpr Spelling<pb::JobState> kJobStates[] = {
    {pb::JOB_STATE_QUEUED, "queued"},       {pb::JOB_STATE_LEASED, "leased"},
    {pb::JOB_STATE_SUCCEEDED, "succeeded"}, {pb::JOB_STATE_FAILED, "failed"},
    {pb::JOB_STATE_CANCELLED, "cancelled"},
};

constexpr Spelling<pb::MatrixState> kMatrixStates[] = {
    {pb::MATRIX_STATE_RUNNING, "running"},
    {pb::MATRIX_STATE_COMPLETED, "completed"},
    {pb::MATRIX_STATE_FAILED, "failed"},
    {pb::MATRIX_STATE_CANCELLED, "cancelled"},
};

constexpr Spelling<pb::RegressionState> kRegressionStates[] = {
    {pb::REGRESSION_STATE_SUSPECTED, "suspected"},
    {pb::REGRESSION_STATE_CONFIRMED, "confirmed"},
    {pb::REGRESSION_STATE_ACKNOWLEDGED, "acknowledged"},
    {pb::REGRESSION_STATE_FIXED, "fixed"},
    {pb::REGRESSION_STATE_FALSE_POSITIVE, "false-positive"},
    {pb::REGRESSION_STATE_REJECTED, "rejected"},
    {pb::REGRESSION_STATE_IGNORED, "ignored"},
};

}  // namespace

std::optional<iommu_mode::Mode> ModeOf(pb::IommuMode mode) {
  if (mode == pb::IOMMU_MODE_UNSPECIFIED || !pb::IommuMode_IsValid(mode)) return std::nullopt;
  return static_cast<iommu_mode::Mode>(mode - kModeOffset);
}

pb::IommuMode ProtoMode(iommu_mode::Mode mode) {
  return static_cast<pb::IommuMode>(static_cast<int>(mode) + kModeOffset);
}

std::string ModeName(pb::IommuMode mode) {
  const std::optional<iommu_mode::Mode> m = ModeOf(mode);
  return m ? std::string(iommu_mode::Word(*m)) : kUnspecifiedName;
}

std::string ModeName(int mode_number) {
  if (!pb::IommuMode_IsValid(mode_number)) return kUnspecifiedName;
  return ModeName(static_cast<pb::IommuMode>(mode_number));
}

pb::IommuMode ModeFromName(std::string_view name) {
  const std::optional<iommu_mode::Mode> m = iommu_mode::FromWord(name);
  return m ? ProtoMode(*m) : pb::IOMMU_MODE_UNSPECIFIED;
}

std::vector<std::string> ModeNames() {
  std::vector<std::string> out;
  for (const iommu_mode::ModeSpelling& s : iommu_mode::kModes) out.emplace_back(s.word);
  return out;
}

std::string ExecutorName(pb::Executor executor) { return NameOf(kExecutors, executor); }

pb::Executor ExecutorFromName(std::string_view name) {
  return ValueOf(kExecutors, name, pb::EXECUTOR_UNSPECIFIED);
}

std::vector<std::string> ExecutorNames() { return NamesOf(kExecutors); }

bool IsRealExecutor(pb::Executor executor) {
  return executor == pb::EXECUTOR_FIO || executor == pb::EXECUTOR_IOZONE ||
         executor == pb::EXECUTOR_DMA_MAP_BENCH;
}

std::string JobStateName(pb::JobState state) { return NameOf(kJobStates, state); }

std::string MatrixStateName(pb::MatrixState state) { return NameOf(kMatrixStates, state); }

std::string RelativeChangeText(double relative_change) {
  if (std::fabs(relative_change) >= kChangeFromZero) {
    return relative_change > 0 ? "rose from 0" : "fell from 0";
  }
  return absl::StrFormat("%+.1f%%", 100.0 * relative_change);
}

std::string RegressionStateName(pb::RegressionState state) {
  return NameOf(kRegressionStates, state);
}

pb::RegressionState RegressionStateFromName(std::string_view name) {
  return ValueOf(kRegressionStates, name, pb::REGRESSION_STATE_UNSPECIFIED);
}

std::vector<std::string> RegressionStateNames() { return NamesOf(kRegressionStates); }

std::string DefaultConfirmMetric(iommufarm::v1::Executor executor, std::string_view fio_rw) {
  if (executor != iommufarm::v1::EXECUTOR_FIO) return "";
  if (fio_rw == "read" || fio_rw == "randread") return "iops/read";
  if (fio_rw == "write" || fio_rw == "randwrite") return "iops/write";
  return "";
}

}  // namespace farm::proto
