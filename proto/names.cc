#include "proto/names.h"

namespace farm::proto {
namespace pb = ::iommufarm::v1;

std::string ModeName(pb::IommuMode mode) {
  switch (mode) {
    case pb::IOMMU_MODE_OFF:
      return "off";
    case pb::IOMMU_MODE_PASSTHROUGH:
      return "passthrough";
    case pb::IOMMU_MODE_STRICT:
      return "strict";
    case pb::IOMMU_MODE_LAZY:
      return "lazy";
    default:
      return "unspecified";
  }
}

std::string ModeName(int mode_number) {
  if (!pb::IommuMode_IsValid(mode_number)) return "unspecified";
  return ModeName(static_cast<pb::IommuMode>(mode_number));
}

pb::IommuMode ModeFromName(std::string_view name) {
  if (name == "off") return pb::IOMMU_MODE_OFF;
  if (name == "passthrough") return pb::IOMMU_MODE_PASSTHROUGH;
  if (name == "strict") return pb::IOMMU_MODE_STRICT;
  if (name == "lazy") return pb::IOMMU_MODE_LAZY;
  return pb::IOMMU_MODE_UNSPECIFIED;
}

std::string ExecutorName(pb::Executor executor) {
  switch (executor) {
    case pb::EXECUTOR_EMULATOR:
      return "emulator";
    case pb::EXECUTOR_FIO:
      return "fio";
    case pb::EXECUTOR_IOZONE:
      return "iozone";
    default:
      return "unspecified";
  }
}

pb::Executor ExecutorFromName(std::string_view name) {
  if (name == "emulator") return pb::EXECUTOR_EMULATOR;
  if (name == "fio") return pb::EXECUTOR_FIO;
  if (name == "iozone") return pb::EXECUTOR_IOZONE;
  return pb::EXECUTOR_UNSPECIFIED;
}

std::string JobStateName(pb::JobState state) {
  switch (state) {
    case pb::JOB_STATE_QUEUED:
      return "queued";
    case pb::JOB_STATE_LEASED:
      return "leased";
    case pb::JOB_STATE_SUCCEEDED:
      return "succeeded";
    case pb::JOB_STATE_FAILED:
      return "failed";
    case pb::JOB_STATE_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

}  // namespace farm::proto
