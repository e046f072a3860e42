// Boots the Debian amd64 cloud kernel that scripts/fetch-test-kernels fetched
// (or the store entry FARM_KERNEL_RELEASE names)
// under QEMU (TCG) on q35 + intel-iommu (caching mode) with an emulated NVMe,
// through the vm provider: the effective mode of each requested mode, a real
// fio randread parsed by ParseFioJson, the lazy-under-caching-mode mismatch,
// and a corrupt image failing with its console tail. Missing kernel or QEMU
// fails (never skips): the message says what to run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/kernels/guest_archive.h"
#include "agent/kernels/vm_provider.h"
#include "agent/monitors/monitors.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/iozone_report.h"
#include "agent/runners/iozone_spec.h"
#include "agent/runners/runners.h"
#include "lib/kstore/kernel_store.h"
#include "lib/process/process.h"
#include "proto/names.h"

namespace farm::kernels {
namespace {

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kFetchHint[] =
    "run scripts/fetch-test-kernels (as root: it fetches the Debian amd64 cloud kernel; "
    "scripts/install-deps installs qemu-system-x86)";

// The newest fetched amd64 cloud kernel: <cache>/<release>/vmlinuz.
std::string NewestAmd64Release(const std::string& cache) {
  std::vector<std::string> releases;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache, ec)) {
    std::string name = e.path().filename().string();
    if (absl::EndsWith(name, "-cloud-amd64") && fs::exists(e.path() / ".complete") &&
        fs::is_regular_file(e.path() / "vmlinuz")) {
      releases.push_back(name);
    }
  }
  std::sort(releases.begin(), releases.end());  // same ABI width: lexical is fine
  return releases.empty() ? "" : releases.back();
}

class VmBootTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* env = std::getenv("FARM_KERNEL_CACHE");
    kernels_dir_ = new std::string(env ? env : "/var/cache/iommu-farm/kernels");
    // FARM_KERNEL_RELEASE: a store entry other than the newest cloud kernel
    // (a farm-built one, whose config has VT-d's debugfs).
    const char* pick = std::getenv("FARM_KERNEL_RELEASE");
    release_ = new std::string(pick ? pick : NewestAmd64Release(*kernels_dir_));
    initramfs_ = new std::string();
    if (release_->empty() || !process::ResolveExecutable("qemu-system-x86_64").ok()) return;
    process::ProcessOptions build;
    build.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--out",
                  FARM_GUEST_ROOT_DIR};
    build.timeout = absl::Minutes(2);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(build);
    if (r.ok() && r->ok()) {
      *initramfs_ = std::string(absl::StripAsciiWhitespace(r->stdout_data));
      std::cout << "guest root: " << *initramfs_ << " (" << fs::file_size(*initramfs_)
                << " bytes)\n";
    } else {
      std::cerr << "build-guest-root failed: " << (r.ok() ? r->stderr_data : r.status().ToString())
                << "\n";
    }
  }
  static void TearDownTestSuite() {
    delete kernels_dir_;
    delete release_;
    delete initramfs_;
  }

  void SetUp() override {
    ASSERT_FALSE(release_->empty())
        << "no *-cloud-amd64 kernel under " << *kernels_dir_ << ": " << kFetchHint;
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-x86_64").ok())
        << "no qemu-system-x86_64: " << kFetchHint;
    ASSERT_FALSE(initramfs_->empty()) << "scripts/build-guest-root failed (see above)";
    std::string tmpl = (fs::temp_directory_path() / "vm-boot-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    allow_dir_ = tmpl;
    config_.kernels_dir = *kernels_dir_;
    config_.initramfs = *initramfs_;
    config_.allow_dir = allow_dir_;
    config_.boot_timeout = absl::Seconds(60);
    config_.kernel_counters = true;  // farm-agent --kernel-counters
  }
  void TearDown() override {
    if (allow_dir_.empty()) return;
    // The provider removes its scratch directory: nothing may be left.
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(allow_dir_, ec)) << allow_dir_;
    fs::remove_all(allow_dir_, ec);
  }

  // Whether the booted kernel's config sets `option` (CONFIG_X=y).
  bool KernelHas(const std::string& option) const {
    std::ifstream f(fs::path(*kernels_dir_) / *release_ / "config");
    std::string config((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return absl::StrContains(absl::StrCat("\n", config), absl::StrCat("\n", option, "=y\n"));
  }

  KernelRequest Request(pb::IommuMode mode) const {
    KernelRequest r;
    r.kernel_release = *release_;
    r.mode = mode;
    return r;
  }

  static std::string* kernels_dir_;
  static std::string* release_;
  static std::string* initramfs_;
  std::string allow_dir_;
  VmConfig config_;
};

std::string* VmBootTest::kernels_dir_ = nullptr;
std::string* VmBootTest::release_ = nullptr;
std::string* VmBootTest::initramfs_ = nullptr;

// The guest's monitor sections, parsed on the host: the tool's NVMe
// interrupts moved (its queues are named after the controller), vmstat
// moved, and debugfs says what it had (SMMUv3 and Debian's VT-d: none).
void ExpectGuestMonitors(const KernelRun& run) {
  ASSERT_TRUE(run.monitors.has_value());
  const pb::Monitors& m = *run.monitors;
  EXPECT_EQ(m.where(), "guest");
  EXPECT_FALSE(m.cpus().empty());
  int64_t nvme = 0;
  for (const pb::InterruptDelta& d : m.interrupts()) {
    if (absl::StartsWith(d.source(), "nvme0q")) nvme += d.total();
  }
  EXPECT_GT(nvme, 0) << m.ShortDebugString();
  EXPECT_FALSE(m.vmstat().empty());
  EXPECT_FALSE(m.iommu_note().empty());
  EXPECT_THAT(m.perf_note(), HasSubstr("no perf"));
  std::cout << "guest monitors: " << m.interrupts_size() << " interrupt lines moved (nvme0q* "
            << nvme << "), " << m.vmstat_size() << " vmstat counters; iommu: " << m.iommu_note()
            << "\n";
}

// The iommu:map / iommu:unmap tracepoint counts of the guest's tool (the
// guest init's tracefs instances): what the DMA API mapped in the NVMe's
// domain. Returns the map count, -1 when absent (the note says why).
int64_t TraceMaps(const std::string& what, const KernelRun& run) {
  const pb::Monitors& m = *run.monitors;
  auto count = [&m](const std::string& name) {
    auto it = m.events().find(name);
    return it == m.events().end() ? int64_t{-1} : it->second;
  };
  std::string notes;
  for (const std::string& n : m.event_notes()) absl::StrAppend(&notes, " [", n, "]");
  std::cout << what << ": trace/iommu:map " << count("trace/iommu:map") << ", trace/iommu:unmap "
            << count("trace/iommu:unmap") << ", trace/iommu:map/bytes "
            << count("trace/iommu:map/bytes") << notes << "\n";
  return count("trace/iommu:map");
}

// The IOTLB invalidations VT-d's dmar_perf_latency sampled in the tool's
// run (monitors::SampledIotlbInvalidations), printed.
int64_t SampledIotlbInvalidations(const std::string& what, const KernelRun& run) {
  const int64_t n = monitors::SampledIotlbInvalidations(*run.monitors);
  std::cout << what << ": dmar_perf_latency inv_iotlb samples " << n << "\n";
  return n;
}

// The guest's IOMMU environment, printed (docs/usage.md quotes it).
void PrintEnvironment(const std::string& what, const KernelRun& run) {
  const pb::IommuEnvironment& env = run.facts.iommu_environment;
  std::cout << what << ": iommu environment " << env.digest() << "\n";
  const std::map<std::string, std::string> facts(env.facts().begin(), env.facts().end());
  for (const auto& [key, value] : facts) std::cout << "  " << key << " = " << value << "\n";
  for (const auto& [key, why] : env.unavailable()) {
    std::cout << "  unavailable " << key << ": " << why << "\n";
  }
}

// The guest's environment fact of the unit key ending in `suffix` whose
// unit name starts with `unit_prefix`; "" for none.
std::string EnvironmentFact(const KernelRun& run, const std::string& unit_prefix,
                            const std::string& suffix) {
  for (const auto& [key, value] : run.facts.iommu_environment.facts()) {
    if (absl::StartsWith(key, "unit/" + unit_prefix) && absl::EndsWith(key, suffix)) return value;
  }
  return "";
}

void Report(const std::string& what, const KernelRun& run) {
  std::cout << what << ": boot-to-result " << absl::FormatDuration(run.wall_time) << ", effective "
            << run.effective_detail << ", cmdline '" << run.facts.cmdline << "'\n";
}

TEST_F(VmBootTest, StrictRunsFioOnTheNvmeUnderDma) {
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.tool_argv = {"fio",         "--name=randread", "--filename=/dev/nvme0n1", "--rw=randread",
                 "--bs=4k",     "--direct=1",      "--ioengine=libaio",       "--iodepth=16",
                 "--runtime=2", "--time_based",    "--output-format=json"};
  r.tool_runtime = absl::Seconds(2);
  VmKernelProvider vm(config_);
  absl::StatusOr<KernelRun> run = vm.Run(r);
  ASSERT_TRUE(run.ok()) << run.status();
  Report("strict", *run);
  EXPECT_EQ(run->facts.release, *release_);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_THAT(run->effective_detail, HasSubstr(": DMA"));
  EXPECT_THAT(run->facts.cmdline, HasSubstr("iommu.strict=1"));
  EXPECT_EQ(run->accel, "tcg");
  ASSERT_EQ(run->tool_exit, 0) << run->tool_stderr;
  absl::StatusOr<runners::FioReport> report = runners::ParseFioJson(run->tool_stdout);
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << run->tool_stdout;
  ASSERT_EQ(report->jobs.size(), 1u);
  EXPECT_EQ(report->jobs[0].error, 0);
  EXPECT_GT(report->jobs[0].read.iops, 0);
  ExpectGuestMonitors(*run);
  std::cout << "strict: fio " << report->fio_version << " randread 4k qd16 read IOPS "
            << report->jobs[0].read.iops << "\n";
  // A strict unmap invalidates the IOTLB through the queue, which
  // dmar_perf_latency times once the farm enabled it: only in a kernel
  // with VT-d's debugfs (CONFIG_DMAR_PERF; Debian's has none).
  const int64_t iotlb = SampledIotlbInvalidations("strict", *run);
  if (KernelHas("CONFIG_DMAR_PERF")) {
    EXPECT_GT(iotlb, 0) << run->monitors->ShortDebugString();
  } else {
    EXPECT_EQ(iotlb, -1);
  }
  // Every read maps its buffer in the NVMe's DMA domain, and unmaps it;
  // a kernel without event tracing says so instead.
  if (!KernelHas("CONFIG_EVENT_TRACING")) {
    EXPECT_EQ(TraceMaps("strict", *run), -1);
    EXPECT_THAT(absl::StrJoin(run->monitors->event_notes(), "; "), HasSubstr("no tracefs"));
    return;
  }
  const int64_t maps = TraceMaps("strict", *run);
  EXPECT_GT(maps, 0) << run->monitors->ShortDebugString();
  const auto& events = run->monitors->events();
  ASSERT_EQ(events.count("trace/iommu:unmap"), 1u);
  EXPECT_GT(events.at("trace/iommu:unmap"), 0);
  // Debian's kernel has hist triggers: the sizes are summed, a 4 KiB page a read.
  ASSERT_EQ(events.count("trace/iommu:map/bytes"), 1u);
  EXPECT_GE(events.at("trace/iommu:map/bytes"), maps * 4096);
}

// The same fio under passthrough: the identity domain maps nothing, so the
// tracepoints the strict run counted stay at 0.
TEST_F(VmBootTest, PassthroughGivesTheNvmeAnIdentityDomain) {
  VmKernelProvider vm(config_);
  KernelRequest r = Request(pb::IOMMU_MODE_PASSTHROUGH);
  r.kernel_params = {"nokaslr"};  // an allow-listed extra reaches the guest
  r.tool_argv = {"fio",         "--name=randread", "--filename=/dev/nvme0n1", "--rw=randread",
                 "--bs=4k",     "--direct=1",      "--ioengine=libaio",       "--iodepth=16",
                 "--runtime=2", "--time_based",    "--output-format=json"};
  r.tool_runtime = absl::Seconds(2);
  absl::StatusOr<KernelRun> run = vm.Run(r);
  ASSERT_TRUE(run.ok()) << run.status();
  Report("passthrough", *run);
  EXPECT_THAT(run->facts.cmdline, HasSubstr(" nokaslr iommu.passthrough=1"));
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_THAT(run->effective_detail, HasSubstr(": identity"));
  ASSERT_EQ(run->tool_exit, 0) << run->tool_stderr;
  ExpectGuestMonitors(*run);
  // No unmap in an identity domain, so no IOTLB invalidation to time.
  EXPECT_LE(SampledIotlbInvalidations("passthrough", *run), 0);
  if (!KernelHas("CONFIG_EVENT_TRACING")) {
    EXPECT_EQ(TraceMaps("passthrough", *run), -1);
    return;
  }
  EXPECT_EQ(TraceMaps("passthrough", *run), 0) << run->monitors->ShortDebugString();
  ASSERT_EQ(run->monitors->events().count("trace/iommu:unmap"), 1u);
  EXPECT_EQ(run->monitors->events().at("trace/iommu:unmap"), 0);
}

TEST_F(VmBootTest, OffLeavesTheNvmeWithoutGroup) {
  VmKernelProvider vm(config_);
  absl::StatusOr<KernelRun> run = vm.Run(Request(pb::IOMMU_MODE_OFF));
  ASSERT_TRUE(run.ok()) << run.status();
  Report("off", *run);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_OFF);
  EXPECT_TRUE(run->facts.groups.empty());
}

// The farm asks for lazy (iommu.strict=0) and the VT-d driver under
// caching mode chooses strict: the run reports the mode the kernel ran.
TEST_F(VmBootTest, LazyUnderCachingModeReportsStrict) {
  VmKernelProvider vm(config_);
  absl::Time start = absl::Now();
  absl::StatusOr<KernelRun> run = vm.Run(Request(pb::IOMMU_MODE_LAZY));
  std::cout << "lazy: boot-to-result " << absl::FormatDuration(absl::Now() - start) << ": "
            << run.status() << "\n";
  ASSERT_TRUE(run.ok()) << run.status();
  Report("lazy", *run);
  EXPECT_EQ(run->requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_THAT(run->effective_detail,
              HasSubstr("the kernel ran strict although its command line asked for lazy "
                        "(iommu.strict=0)"));
  // Why: q35's intel-iommu sets caching mode, and the guest's environment
  // says so from its cap register.
  PrintEnvironment("lazy", *run);
  EXPECT_EQ(EnvironmentFact(*run, "dmar", "/caching_mode"), "1");
  EXPECT_FALSE(EnvironmentFact(*run, "dmar", "/ecap").empty());
  EXPECT_EQ(run->facts.iommu_environment.digest().size(), 64u);
}

TEST_F(VmBootTest, CorruptImageFailsWithTheConsoleTail) {
  // The release's image with 4 MiB of its compressed payload overwritten:
  // the boot header is intact, so QEMU loads it and the decompressor fails.
  fs::path dir =
      fs::path(allow_dir_).parent_path() / (fs::path(allow_dir_).filename().string() + "-kernels");
  fs::create_directories(dir / *release_);
  fs::path image = dir / *release_ / "vmlinuz";
  fs::copy_file(fs::path(*kernels_dir_) / *release_ / "vmlinuz", image);
  {
    std::fstream f(image, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 << 20);
    std::mt19937 rng(12);
    for (int i = 0; i < (4 << 20) / 4; ++i) {
      std::uint32_t v = rng();
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
    ASSERT_TRUE(f.good());
  }
  VmConfig c = config_;
  c.kernels_dir = dir.string();
  c.boot_timeout = absl::Seconds(30);
  VmKernelProvider vm(c);
  absl::Time start = absl::Now();
  absl::StatusOr<KernelRun> run = vm.Run(Request(pb::IOMMU_MODE_STRICT));
  std::cout << "corrupt image: failed after " << absl::FormatDuration(absl::Now() - start) << ": "
            << run.status() << "\n";
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Permanent: the same image halts the same way on every attempt.
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("corrupt or unbootable kernel image"));
  EXPECT_THAT(run.status().message(), HasSubstr("console tail"));
  EXPECT_THAT(run.status().message(), HasSubstr("System halted"));
}

TEST_F(VmBootTest, ImageWithoutBootHeaderIsRefusedPermanently) {
  // Not a kernel at all: QEMU's loader refuses it before the guest runs.
  fs::path dir =
      fs::path(allow_dir_).parent_path() / (fs::path(allow_dir_).filename().string() + "-junk");
  fs::create_directories(dir / *release_);
  {
    std::ofstream f(dir / *release_ / "vmlinuz", std::ios::binary);
    std::mt19937 rng(7);
    for (int i = 0; i < (1 << 20) / 4; ++i) {
      std::uint32_t v = rng();
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  VmConfig c = config_;
  c.kernels_dir = dir.string();
  c.boot_timeout = absl::Seconds(20);
  VmKernelProvider vm(c);
  absl::StatusOr<KernelRun> run = vm.Run(Request(pb::IOMMU_MODE_STRICT));
  std::cout << "junk image: " << run.status() << "\n";
  std::error_code ec;
  fs::remove_all(dir, ec);
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("corrupt or unbootable kernel image"));
}

// q35 + amd-iommu: Debian's generic amd64 kernel (the cloud one has no
// AMD_IOMMU; scripts/fetch-test-kernels --generic-amd64 fetches it with the
// modules its guest loads, NVMe being one), strict, a 2 s fio randread on
// the NVMe behind the emulated AMD-Vi.
TEST_F(VmBootTest, AmdIommuStrictRunsFioUnderDma) {
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(*kernels_dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  std::string release;
  for (const kstore::KernelBuild& b : store->builds) {
    std::vector<std::string> models = IommuModelsFor(b, kArchX86);
    if (b.arch == kArchX86 && !b.modules.empty() &&
        std::find(models.begin(), models.end(), kModelAmd) != models.end()) {
      release = std::max(release, b.release);
    }
  }
  ASSERT_FALSE(release.empty()) << "no amd64 kernel with CONFIG_AMD_IOMMU=y and modules under "
                                << *kernels_dir_ << ": run scripts/fetch-test-kernels "
                                << "--generic-amd64";
  VmKernelProvider vm(config_);
  bool offered = false;
  for (const pb::KernelOffer& o : vm.Offers()) {
    offered = offered || (o.release() == release && o.machine_model() == kModelAmd);
  }
  EXPECT_TRUE(offered) << release << " is not offered under " << kModelAmd;
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.kernel_release = release;
  r.machine_model = kModelAmd;
  r.tool_argv = {"fio",         "--name=randread", "--filename=/dev/nvme0n1", "--rw=randread",
                 "--bs=4k",     "--direct=1",      "--ioengine=libaio",       "--iodepth=16",
                 "--runtime=2", "--time_based",    "--output-format=json"};
  r.tool_runtime = absl::Seconds(2);
  absl::StatusOr<KernelRun> run = vm.Run(r);
  ASSERT_TRUE(run.ok()) << run.status();
  Report("strict (q35+amd-iommu)", *run);
  EXPECT_EQ(run->facts.release, release);
  EXPECT_EQ(run->machine_model, kModelAmd);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_THAT(run->facts.iommu, HasSubstr("ivhd"));  // the AMD driver's IOMMU, not dmar
  ASSERT_EQ(run->tool_exit, 0) << run->tool_stderr;
  absl::StatusOr<runners::FioReport> report = runners::ParseFioJson(run->tool_stdout);
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << run->tool_stdout;
  ASSERT_EQ(report->jobs.size(), 1u);
  EXPECT_EQ(report->jobs[0].error, 0);
  EXPECT_GT(report->jobs[0].read.iops, 0);
  std::cout << "strict (q35+amd-iommu): fio " << report->fio_version
            << " randread 4k qd16 read IOPS " << report->jobs[0].read.iops << "\n";
}

// Debian's arm64 cloud kernel on aarch64 virt + SMMUv3 (TCG): all four modes
// are real there, lazy included (DMA-FQ), and each boot runs a 2 s fio
// randread on the VM's NVMe from the arm64 guest root (Debian's fio:arm64).
class VmArm64BootTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* env = std::getenv("FARM_KERNEL_CACHE");
    const std::string cache = env ? env : "/var/cache/iommu-farm/kernels";
    kernels_dir_ = new std::string(cache);
    release_ = new std::string();
    initramfs_ = new std::string();
    std::vector<std::string> releases;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache, ec)) {
      std::string name = e.path().filename().string();
      if (absl::EndsWith(name, "-cloud-arm64") && fs::exists(e.path() / ".complete")) {
        releases.push_back(name);
      }
    }
    std::sort(releases.begin(), releases.end());
    if (!releases.empty()) *release_ = releases.back();
    if (release_->empty() || !process::ResolveExecutable("qemu-system-aarch64").ok()) return;
    process::ProcessOptions build;
    build.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--arch", "aarch64",
                  "--out", FARM_GUEST_ROOT_ARM64_DIR};
    build.timeout = absl::Minutes(2);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(build);
    if (r.ok() && r->ok()) {
      *initramfs_ = std::string(absl::StripAsciiWhitespace(r->stdout_data));
    } else {
      std::cerr << "build-guest-root --arch aarch64 failed: "
                << (r.ok() ? r->stderr_data : r.status().ToString()) << "\n";
    }
  }
  static void TearDownTestSuite() {
    delete kernels_dir_;
    delete release_;
    delete initramfs_;
  }

  void SetUp() override {
    ASSERT_FALSE(release_->empty())
        << "no *-cloud-arm64 kernel under " << *kernels_dir_
        << ": run scripts/fetch-test-kernels --arch arm64 (scripts/install-deps adds the arm64 "
           "architecture and installs qemu-system-arm)";
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-aarch64").ok())
        << "no qemu-system-aarch64: scripts/install-deps installs qemu-system-arm";
    ASSERT_FALSE(initramfs_->empty()) << "scripts/build-guest-root --arch aarch64 failed";
    std::string tmpl = (fs::temp_directory_path() / "vm-arm64-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    allow_dir_ = tmpl;
    config_.arch = kArchArm64;
    config_.qemu = "qemu-system-aarch64";
    config_.kernels_dir = *kernels_dir_;
    config_.initramfs = *initramfs_;
    config_.allow_dir = allow_dir_;
    config_.boot_timeout = absl::Seconds(120);
  }
  void TearDown() override {
    if (allow_dir_.empty()) return;
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(allow_dir_, ec)) << allow_dir_;
    fs::remove_all(allow_dir_, ec);
  }

  absl::StatusOr<KernelRun> Boot(pb::IommuMode mode) {
    KernelRequest r;
    r.kernel_release = *release_;
    r.mode = mode;
    r.tool_argv = {"fio",         "--name=randread", "--filename=/dev/nvme0n1", "--rw=randread",
                   "--bs=4k",     "--direct=1",      "--ioengine=libaio",       "--iodepth=16",
                   "--runtime=2", "--time_based",    "--output-format=json"};
    r.tool_runtime = absl::Seconds(2);
    VmKernelProvider vm(config_);
    // The arm64 releases only (scripts/fetch-test-kernels --previous may have
    // fetched two), never the amd64 one.
    std::vector<pb::KernelOffer> offers = vm.Offers();
    EXPECT_FALSE(offers.empty());
    for (const pb::KernelOffer& o : offers) {
      EXPECT_TRUE(absl::EndsWith(o.release(), "-cloud-arm64")) << o.release();
      EXPECT_EQ(o.architecture(), kArchArm64);
    }
    absl::StatusOr<KernelRun> run = vm.Run(r);
    if (run.ok()) Report(proto::ModeName(mode) + " (virt+smmuv3)", *run);
    return run;
  }

  // The guest's fio ran on the NVMe and read something: its JSON parses
  // with one job, no error and a positive read IOPS.
  static void ExpectFioRead(const std::string& mode, const KernelRun& run) {
    ASSERT_EQ(run.tool_exit, 0) << run.tool_stderr;
    absl::StatusOr<runners::FioReport> report = runners::ParseFioJson(run.tool_stdout);
    ASSERT_TRUE(report.ok()) << report.status() << "\n" << run.tool_stdout;
    ASSERT_EQ(report->jobs.size(), 1u);
    EXPECT_EQ(report->jobs[0].error, 0);
    EXPECT_GT(report->jobs[0].read.iops, 0);
    ExpectGuestMonitors(run);
    std::cout << mode << " (virt+smmuv3): fio " << report->fio_version
              << " randread 4k qd16 read IOPS " << report->jobs[0].read.iops << "\n";
  }

  static std::string* kernels_dir_;
  static std::string* release_;
  static std::string* initramfs_;
  std::string allow_dir_;
  VmConfig config_;
};

std::string* VmArm64BootTest::kernels_dir_ = nullptr;
std::string* VmArm64BootTest::release_ = nullptr;
std::string* VmArm64BootTest::initramfs_ = nullptr;

TEST_F(VmArm64BootTest, StrictIsDmaOnSmmuV3) {
  absl::StatusOr<KernelRun> run = Boot(pb::IOMMU_MODE_STRICT);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->facts.machine, "aarch64");
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_EQ(run->machine_model, "virt+smmuv3");
  EXPECT_THAT(run->facts.iommu, HasSubstr("smmu3"));
  // SMMUv3 exports no register: its features come from the driver's boot line.
  PrintEnvironment("arm64 strict", *run);
  EXPECT_THAT(EnvironmentFact(*run, "smmu3", "/features"), HasSubstr("0x"));
  ExpectFioRead("strict", *run);
}

TEST_F(VmArm64BootTest, LazyIsDmaFqOnSmmuV3) {
  absl::StatusOr<KernelRun> run = Boot(pb::IOMMU_MODE_LAZY);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(run->domain_type, "DMA-FQ");
  EXPECT_THAT(run->facts.cmdline, HasSubstr("iommu.strict=0"));
  ExpectFioRead("lazy", *run);
}

TEST_F(VmArm64BootTest, PassthroughIsIdentityOnSmmuV3) {
  absl::StatusOr<KernelRun> run = Boot(pb::IOMMU_MODE_PASSTHROUGH);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(run->domain_type, "identity");
  ExpectFioRead("passthrough", *run);
}

TEST_F(VmArm64BootTest, OffBootsWithoutSmmuV3) {
  absl::StatusOr<KernelRun> run = Boot(pb::IOMMU_MODE_OFF);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_OFF);
  EXPECT_EQ(run->domain_type, "");  // no group: the VM has no SMMUv3 at all
  EXPECT_TRUE(run->facts.groups.empty());
  EXPECT_THAT(run->facts.cmdline, ::testing::Not(HasSubstr("iommu.")));
  ExpectFioRead("off", *run);
}

// (phase, metric, unit) of each sample, sorted: what a result row is keyed by.
std::vector<std::string> SampleNames(const std::vector<runners::Sample>& samples) {
  std::vector<std::string> out;
  for (const runners::Sample& s : samples) {
    out.push_back(absl::StrCat(s.phase, "/", s.metric, " [", s.unit, "]"));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// iozone in the guest: the job's spec through the host runner's validator
// (IozoneSpecFromParams) as the guest argv, files on the ext2 the guest's
// init makes on the NVMe, the report through the host's parser; its samples
// carry exactly the names of a host iozone run of the same spec.
TEST_F(VmArm64BootTest, StrictRunsIozoneOnTheNvmeWithTheHostMetricNames) {
  const runners::Params params = {{"tests", "write,read"}, {"size", "4m"}, {"record", "64k"}};
  absl::StatusOr<runners::IozoneSpec> spec = runners::IozoneSpecFromParams(params);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<std::string>> argv =
      runners::BuildIozoneGuestArgv(*spec, kGuestScratchDir);
  ASSERT_TRUE(argv.ok()) << argv.status();

  // The host iozone executor's run of the same spec, in a directory of its
  // own, while the guest boots (throughput mode pauses 2 s around each test,
  // so each run takes about 12 s whatever the disk).
  absl::StatusOr<runners::ToolInfo> iozone = runners::DetectIozone();
  ASSERT_TRUE(iozone.ok()) << iozone.status() << " (scripts/install-deps installs iozone3)";
  const fs::path host_dir = fs::path(allow_dir_ + "-host");
  fs::create_directories(host_dir);
  absl::StatusOr<runners::AllowedTargets> allowed =
      runners::AllowedTargets::Parse({host_dir.string()}, {});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  std::future<absl::StatusOr<runners::RunResult>> host_run = std::async(std::launch::async, [&] {
    return runners::IozoneRunner(*iozone).RunParams(params, *allowed, runners::RunOptions{});
  });

  KernelRequest r;
  r.kernel_release = *release_;
  r.mode = pb::IOMMU_MODE_STRICT;
  r.tool_argv = *argv;
  r.tool_runtime = absl::Seconds(30);
  VmKernelProvider vm(config_);
  absl::StatusOr<KernelRun> run = vm.Run(r);
  absl::StatusOr<runners::RunResult> host = host_run.get();
  std::error_code ec;
  fs::remove_all(host_dir, ec);
  ASSERT_TRUE(run.ok()) << run.status();
  Report("strict iozone (virt+smmuv3)", *run);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  ASSERT_EQ(run->tool_exit, 0) << run->tool_stderr << "\n" << run->tool_stdout;
  absl::StatusOr<runners::IozoneReport> report = runners::ParseIozoneReport(run->tool_stdout);
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << run->tool_stdout;
  ASSERT_NE(report->Find("write"), nullptr) << run->tool_stdout;
  ASSERT_NE(report->Find("read"), nullptr) << run->tool_stdout;
  EXPECT_GT(report->Find("write")->children, 0);
  EXPECT_GT(report->Find("read")->children, 0);
  std::cout << "strict iozone (virt+smmuv3): iozone " << report->version << " write "
            << report->Find("write")->children << " kB/s, read " << report->Find("read")->children
            << " kB/s\n";
  const std::vector<std::string> guest_names = SampleNames(runners::IozoneSamples(*report));

  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(guest_names, SampleNames(host->samples));
  EXPECT_FALSE(guest_names.empty());
}

}  // namespace
}  // namespace farm::kernels
