#include "proto/names.h"

#include <cstddef>

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

constexpr Spelling<pb::IommuMode> kModes[] = {
    {pb::IOMMU_MODE_OFF, "off"},
    {pb::IOMMU_MODE_PASSTHROUGH, "passthrough"},
    {pb::IOMMU_MODE_STRICT, "strict"},
    {pb::IOMMU_MODE_LAZY, "lazy"},
};

constexpr Spelling<pb::Executor> kExecutors[] = {
    {pb::EXECUTOR_EMULATOR, "emulator"},
    {pb::EXECUTOR_FIO, "fio"},
    {pb::EXECUTOR_IOZONE, "iozone"},
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

std::string ModeName(pb::IommuMode mode) { return NameOf(kModes, mode); }

std::string ModeName(int mode_number) {
  if (!pb::IommuMode_IsValid(mode_number)) return kUnspecifiedName;
  return ModeName(static_cast<pb::IommuMode>(mode_number));
}

pb::IommuMode ModeFromName(std::string_view name) {
  return ValueOf(kModes, name, pb::IOMMU_MODE_UNSPECIFIED);
}

std::vector<std::string> ModeNames() { return NamesOf(kModes); }

std::string ExecutorName(pb::Executor executor) { return NameOf(kExecutors, executor); }

pb::Executor ExecutorFromName(std::string_view name) {
  return ValueOf(kExecutors, name, pb::EXECUTOR_UNSPECIFIED);
}

std::vector<std::string> ExecutorNames() { return NamesOf(kExecutors); }

std::string JobStateName(pb::JobState state) { return NameOf(kJobStates, state); }

std::string MatrixStateName(pb::MatrixState state) { return NameOf(kMatrixStates, state); }

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
