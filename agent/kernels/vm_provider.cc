#include "agent/kernels/vm_provider.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/kernels/guest_archive.h"
#include "agent/kernels/guest_run.h"
#include "agent/kernels/module_deps.h"
#include "lib/base/file.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;

namespace {

// The guest's NVMe namespace: the only block device of the VM.
constexpr char kGuestNvme[] = "/dev/nvme0n1";

// What a halted x86 boot stub prints (arch/x86/boot/compressed/misc.c
// error()); the CPU then spins in hlt, so QEMU would run until the limit.
constexpr char kHaltMarker[] = "-- System halted";

absl::Status ErrnoStatus(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The last `n` bytes of `path`, cheaply, for the halt watch.
std::string FileTail(const std::string& path, off_t n) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string buf;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    off_t from = st.st_size > n ? st.st_size - n : 0;
    buf.resize(static_cast<std::size_t>(st.st_size - from));
    ssize_t got = ::pread(fd, buf.data(), buf.size(), from);
    buf.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  ::close(fd);
  return buf;
}

}  // namespace

absl::StatusOr<std::string> KernelImagePath(const std::string& kernels_dir,
                                            const std::string& release) {
  bool plain = !release.empty() && release.find("..") == std::string::npos;
  for (char c : release) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '+' &&
        c != '-') {
      plain = false;
    }
  }
  if (!plain) {
    return absl::InvalidArgumentError(absl::StrCat("'", release, "' is not a kernel release"));
  }
  return (fs::path(kernels_dir) / release / "vmlinuz").string();
}

VmKernelProvider::VmKernelProvider(VmConfig config)
    : config_(std::move(config)),
      store_(std::make_unique<kstore::StoreWatch>(config_.kernels_dir)) {}

std::vector<pb::IommuMode> VmKernelProvider::Modes() const {
  if (config_.arch == kArchArm64) {
    return {pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT,
            pb::IOMMU_MODE_LAZY};
  }
  return {pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT};
}

std::vector<std::string> IommuModelsFor(const kstore::KernelBuild& build, const std::string& arch) {
  if (arch == kArchArm64) return {kModelSmmuv3};
  std::vector<std::string> out = {kModelIntel};
  if (kstore::BuildConfigEnabled(build, "CONFIG_AMD_IOMMU")) out.push_back(kModelAmd);
  return out;
}

int VmKernelProvider::GuestCpus() const {
  return config_.accel == "tcg-icount" && config_.arch == kArchX86 ? 1 : config_.cpus;
}

int VmKernelProvider::IcountShift() const {
  return config_.accel == "tcg-icount" ? config_.icount_shift : 0;
}

std::string VmKernelProvider::MachineModel() const {
  return config_.arch == kArchArm64 ? "virt+smmuv3" : "q35+intel-iommu";
}

std::vector<pb::KernelOffer> VmKernelProvider::Offers() const {
  const kstore::StoreWatch::Snapshot snapshot = store_->Current();
  absl::MutexLock lock(&offers_mu_);
  if (snapshot.generation <= offers_generation_) return offers_;  // as new, or newer
  const absl::StatusOr<kstore::StoreListing>& store = *snapshot.listing;
  std::vector<pb::KernelOffer> out;
  offers_generation_ = snapshot.generation;
  offers_.clear();
  if (!store.ok()) return offers_;
  for (const kstore::KernelBuild& b : store->builds) {
    if (b.arch != config_.arch || !BootsOn(b, BootTarget::kGuest)) continue;
    for (const std::string& kernel_config : OfferedConfigs(b)) {
      for (const std::string& model : IommuModelsFor(b, config_.arch)) {
        pb::KernelOffer& o = out.emplace_back();
        o.set_provider("vm");
        o.set_release(b.release);
        o.set_commit(b.commit);
        for (pb::IommuMode m : Modes()) o.add_modes(m);
        o.set_architecture(config_.arch);
        o.set_machine_model(model);
        o.set_accel(config_.accel);
        o.set_kernel_config(kernel_config);
      }
    }
  }
  offers_ = std::move(out);
  return offers_;
}

absl::StatusOr<kstore::KernelBuild> VmKernelProvider::FindKernel(
    const KernelRequest& request) const {
  if (request.commit.empty()) {
    // A release that is not a plain name is refused before the store is read.
    if (absl::StatusOr<std::string> p =
            KernelImagePath(config_.kernels_dir, request.kernel_release);
        !p.ok()) {
      return p.status();
    }
  }
  const std::string wanted =
      request.commit.empty() ? request.kernel_release : absl::StrCat("commit ", request.commit);
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(config_.kernels_dir);
  if (!store.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no kernel image for ", wanted, " (", store.status().message(),
                     "; scripts/fetch-test-kernels fetches the test kernels)"));
  }
  for (const kstore::KernelBuild& b : store->builds) {
    if (b.arch != config_.arch || !BootsOn(b, BootTarget::kGuest)) continue;
    if (request.commit.empty()
            ? b.release == request.kernel_release
            : b.commit == request.commit && OffersConfig(b, request.kernel_config)) {
      if (!request.kernel_release.empty() && b.release != request.kernel_release) {
        return absl::FailedPreconditionError(absl::StrCat("the store's build of ", wanted, " is ",
                                                          b.release, ", the job wants ",
                                                          request.kernel_release));
      }
      return b;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no kernel image for ", wanted, " (", config_.arch, ") in ", config_.kernels_dir,
                   "; scripts/fetch-test-kernels fetches the test kernels, "
                   "farmctl kernels import adds a .deb"));
}

absl::Status VmKernelProvider::CanRun(const KernelRequest& request) const {
  if (request.mode == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError("the request names no IOMMU mode");
  }
  absl::StatusOr<kstore::KernelBuild> build = FindKernel(request);
  if (!build.ok()) return build.status();
  std::error_code ec;
  if (!fs::is_regular_file(config_.initramfs, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("no guest initramfs '", config_.initramfs,
                                                      "' (scripts/build-guest-root builds it)"));
  }
  if (config_.allow_dir.empty() || !fs::is_directory(config_.allow_dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("allow dir '", config_.allow_dir, "' is not a directory"));
  }
  if (absl::StatusOr<std::string> q = process::ResolveExecutable(config_.qemu); !q.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("no QEMU: ", q.status().message()));
  }
  return absl::OkStatus();
}

namespace {

// The build's benchmark tool for a dma_map_benchmark request; "" for other
// tools. A kernel built without it cannot run the job on any agent.
absl::StatusOr<std::string> BenchToolBinary(const KernelRequest& request,
                                            const kstore::KernelBuild& build) {
  if (request.tool_argv.empty() || fs::path(request.tool_argv[0]).filename() != kBenchTool) {
    return std::string();
  }
  if (build.dma_map_benchmark.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel ", build.release, " has no ", kBenchTool,
                     " tool in its store entry (the farm's kernel builder adds it from the tree's "
                     "tools/testing/selftests/dma; packaged kernels have none)"));
  }
  std::string binary = base::ReadFileOrEmpty(build.DmaMapBenchmarkPath());
  if (binary.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", build.DmaMapBenchmarkPath()));
  }
  return binary;
}

// The run's scratch files: a sparse NVMe image, and the initrd (the guest
// root, then the modules' archive, then the job's: the kernel unpacks
// concatenated archives in order).
absl::Status WriteGuestFiles(const QemuInvocation& q, std::uint64_t nvme_bytes,
                             const std::string& initramfs, const std::vector<std::string>& modules,
                             const std::string& job) {
  int fd = ::open(q.nvme_image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + q.nvme_image);
  int rc = ::ftruncate(fd, static_cast<off_t>(nvme_bytes));
  ::close(fd);
  if (rc != 0) return ErrnoStatus("size " + q.nvme_image);
  std::error_code ec;
  fs::copy_file(initramfs, q.initrd, ec);
  if (ec) return absl::InternalError(absl::StrCat("copy initramfs: ", ec.message()));
  std::ofstream out(q.initrd, std::ios::binary | std::ios::app);
  if (!modules.empty()) {
    absl::StatusOr<std::string> archive = GuestModulesArchive(modules);
    if (!archive.ok()) return archive.status();
    out << *archive;
  }
  out << job;
  if (!out.flush()) return absl::InternalError("append the job archive to " + q.initrd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QemuInvocation> VmKernelProvider::Invocation(const KernelRequest& request,
                                                            const kstore::KernelBuild& build,
                                                            const std::string& scratch) const {
  const bool arm64 = config_.arch == kArchArm64;
  const std::string model = request.machine_model.empty() ? MachineModel() : request.machine_model;
  const std::vector<std::string> models = IommuModelsFor(build, config_.arch);
  if (std::find(models.begin(), models.end(), model) == models.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel ", build.release, " cannot run under ", model, " (it runs under ",
                     absl::StrJoin(models, ", "), ")"));
  }
  absl::StatusOr<std::string> cmdline =
      GuestCmdline(request.mode, request.kernel_params, config_.arch);
  if (!cmdline.ok()) return cmdline.status();
  QemuInvocation q;
  q.arch = config_.arch;
  q.iommu_model = arm64 ? "" : model;
  q.iommu = !((arm64 || model == kModelAmd) && request.mode == pb::IOMMU_MODE_OFF);
  q.cpu = config_.cpu;
  q.qemu = config_.qemu;
  q.accel = config_.accel;
  q.icount_shift = config_.icount_shift;
  q.bench_device =
      !request.tool_argv.empty() && fs::path(request.tool_argv[0]).filename() == kBenchTool;
  q.memory_mib = config_.memory_mib;
  q.cpus = GuestCpus();
  q.kernel = build.ImagePath();
  q.initrd = (fs::path(scratch) / "initrd").string();
  q.nvme_image = (fs::path(scratch) / "nvme.img").string();
  q.console_log = (fs::path(scratch) / "console.log").string();
  // aarch64 virt has one UART: the console carries the channel too.
  q.channel_log = arm64 ? q.console_log : (fs::path(scratch) / "channel.log").string();
  q.cmdline = *cmdline;
  return q;
}

absl::StatusOr<KernelRun> VmKernelProvider::Run(const KernelRequest& request) {
  if (absl::Status s = CanRun(request); !s.ok()) return s;
  absl::StatusOr<kstore::KernelBuild> build = FindKernel(request);
  if (!build.ok()) return build.status();
  absl::StatusOr<std::string> bench_tool = BenchToolBinary(request, *build);
  if (!bench_tool.ok()) return bench_tool.status();
  absl::StatusOr<std::string> job = GuestJobArchive(
      request.tool_argv, kGuestNvme, config_.arch == kArchArm64 ? "/dev/ttyAMA0" : "", *bench_tool,
      config_.kernel_counters);
  if (!job.ok()) return job.status();
  const bool scratch_fs =
      !request.tool_argv.empty() && fs::path(request.tool_argv[0]).filename() == "iozone";
  absl::StatusOr<std::vector<std::string>> modules = GuestModules(*build, scratch_fs);
  if (!modules.ok()) return modules.status();

  absl::StatusOr<process::ScopedTempDir> scratch_dir =
      process::ScopedTempDir::Create(config_.allow_dir, "farm-vm-");
  if (!scratch_dir.ok()) return scratch_dir.status();
  absl::StatusOr<QemuInvocation> q = Invocation(request, *build, scratch_dir->path());
  if (!q.ok()) return q.status();
  if (absl::Status s = WriteGuestFiles(*q, config_.nvme_bytes, config_.initramfs, *modules, *job);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(*q);
  if (!argv.ok()) return argv.status();

  std::atomic<bool> halted{false};
  std::atomic<bool> cancelled{false};
  absl::Time next_look = absl::InfinitePast();
  process::ProcessOptions opts;
  opts.argv = *argv;
  opts.timeout = config_.boot_timeout + request.tool_runtime + config_.margin;
  opts.max_stdout = 1 << 20;
  opts.cancelled = [&] {
    if (request.cancelled && request.cancelled()) {
      cancelled = true;
      return true;
    }
    absl::Time now = absl::Now();
    if (now < next_look) return false;
    next_look = now + absl::Milliseconds(250);
    if (absl::StrContains(FileTail(q->console_log, 256), kHaltMarker)) halted = true;
    return halted.load();
  };
  absl::Time start = absl::Now();
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(opts);
  if (!r.ok()) return r.status();
  if (cancelled) return absl::CancelledError("cancelled while the guest ran");
  // A serial file QEMU never created is empty output.
  const std::string channel = base::ReadFileOrEmpty(q->channel_log);
  const std::string console = base::ReadFileOrEmpty(q->console_log);
  // A request by commit proves the store's release for it.
  KernelRequest booted = request;
  booted.kernel_release = build->release;
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(booted, channel, console, QemuExitOf(*r, halted, opts.timeout));
  if (!run.ok()) return run.status();
  run->accel = config_.accel;
  run->icount_shift = IcountShift();
  run->machine_model = q->iommu_model.empty() ? MachineModel() : q->iommu_model;
  run->wall_time = absl::Now() - start;
  return run;
}

}  // namespace farm::kernels
