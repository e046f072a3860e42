// KernelExecutor for iozone: its capability offers the kernel store's builds
// as vm kernels, a vm platform picks the offer's machine model, and an iozone
// job the guest cannot run is refused before any QEMU starts (the store's
// image is not a kernel: a boot would fail differently).
#include "agent/executors/kernel_executor.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using ::testing::HasSubstr;

// The host tool: never reached by a vm job.
class HostIozone final : public Executor {
 public:
  std::string capability() const override { return "iozone"; }
  std::string version() const override { return "3.489"; }
  absl::StatusOr<ExecutionResult> Run(const pb::Job&, CancelToken&) override {
    ++runs;
    return absl::InternalError("the host tool ran");
  }
  int runs = 0;
};

class KernelExecutorIozoneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kernel-exec-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const fs::path build = fs::path(dir_) / "store" / "6.1.0-57-amd64";
    fs::create_directories(build);
    std::ofstream(build / "vmlinuz") << "not a kernel";
    std::ofstream(build / "config") << "CONFIG_AMD_IOMMU=y\n";
    std::ofstream(build / "kernel.yaml") << "commit: 6.1.0-57-amd64\nrelease: 6.1.0-57-amd64\n"
                                            "arch: x86_64\nimage: vmlinuz\nconfig: config\n";
    std::ofstream(fs::path(dir_) / "initramfs.cpio") << "root";
    fs::create_directories(fs::path(dir_) / "allow");
    kernels::VmConfig c;
    c.kernels_dir = (fs::path(dir_) / "store").string();
    c.initramfs = (fs::path(dir_) / "initramfs.cpio").string();
    c.allow_dir = (fs::path(dir_) / "allow").string();
    c.qemu = "/bin/true";  // resolvable; never reached by these jobs
    auto host = std::make_unique<HostIozone>();
    host_ = host.get();
    pb::HostFacts facts;
    facts.set_kernel_release("6.1.0-host");
    exec_ = std::make_unique<KernelExecutor>(
        std::move(host), facts, std::make_unique<kernels::VmKernelProvider>(c), "QEMU 7.2");
  }
  void TearDown() override { fs::remove_all(dir_); }

  pb::Job Job(std::map<std::string, std::string> params) {
    pb::Job job;
    job.set_executor(pb::EXECUTOR_IOZONE);
    job.set_commit_id("6.1.0-57-amd64");
    job.set_mode(pb::IOMMU_MODE_STRICT);
    job.set_platform("q35-amd-iommu");
    for (const auto& [k, v] : params) (*job.mutable_workload()->mutable_params())[k] = v;
    return job;
  }

  std::string dir_;
  HostIozone* host_ = nullptr;
  std::unique_ptr<KernelExecutor> exec_;
};

TEST_F(KernelExecutorIozoneTest, OffersTheStoresBuildsUnderBothQ35Models) {
  std::vector<std::string> vm;
  for (const pb::KernelOffer& o : exec_->kernels()) {
    if (o.provider() == "vm") vm.push_back(o.release() + " " + o.machine_model());
  }
  EXPECT_EQ(vm, (std::vector<std::string>{"6.1.0-57-amd64 q35+intel-iommu",
                                          "6.1.0-57-amd64 q35+amd-iommu"}));
}

TEST_F(KernelExecutorIozoneTest, RefusesWhatTheGuestCannotRunBeforeBooting) {
  CancelToken cancel;
  // More than the guest's 256 MiB NVMe holds.
  absl::StatusOr<ExecutionResult> r = exec_->Run(Job({{"size", "128m"}, {"threads", "2"}}), cancel);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("do not fit the guest's NVMe"));
  // The guest's only directory is its scratch file system.
  r = exec_->Run(Job({{"size", "4m"}, {"directory", "/srv"}}), cancel);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("/mnt/nvme"));
  // The host runner's own checks.
  r = exec_->Run(Job({{"tests", "write,fsck"}, {"size", "4m"}}), cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(host_->runs, 0);
}

TEST_F(KernelExecutorIozoneTest, AVmPlatformNoOfferRunsIsUnavailable) {
  CancelToken cancel;
  pb::Job job = Job({{"size", "4m"}});
  job.set_platform("virt-smmuv3");  // no aarch64 build in the store
  absl::StatusOr<ExecutionResult> r = exec_->Run(job, cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(host_->runs, 0);
}

}  // namespace
}  // namespace farm::agent
