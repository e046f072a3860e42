#include "agent/kernels/vm_provider.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/kernels/guest_channel.h"
#include "lib/base/file.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"
#include "proto/kernel_params.h"
#include "proto/names.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;

namespace {

// The guest's NVMe namespace: the only block device of the VM.
constexpr char kGuestNvme[] = "/dev/nvme0n1";

// What a halted x86 boot stub prints (arch/x86/boot/compressed/misc.c
// error()); the CPU then spins in hlt, so QEMU would run until the limit.
constexpr char kHaltMarker[] = "-- System halted";

void AppendNewcHeader(std::string& out, const std::string& name, std::uint32_t mode,
                      std::size_t size, std::uint32_t ino) {
  // Fields: ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor
  // rdevminor namesize check, 8 hex digits each.
  absl::StrAppendFormat(&out, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino,
                        mode, 0, 0, (mode & 0040000) ? 2 : 1, 0, size, 0, 0, 0, 0, name.size() + 1,
                        0);
  out += name;
  out.push_back('\0');
  while (out.size() % 4 != 0) out.push_back('\0');
}

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

absl::StatusOr<std::string> GuestCmdline(pb::IommuMode mode, const std::vector<std::string>& extra,
                                         const std::string& arch) {
  // An x86_64 guest boots under VT-d or AMD-Vi; off on AMD-Vi is a machine
  // without the IOMMU, where intel_iommu=off is as good as none.
  absl::StatusOr<std::vector<std::string>> params = ModeKernelParams(
      mode, {arch == kArchArm64 ? iommu_mode::Driver::kArmSmmuV3 : iommu_mode::Driver::kIntelVtd});
  if (!params.ok()) return params.status();
  std::string error;
  std::vector<std::string> words = proto::ParseKernelParams(absl::StrJoin(extra, " "), &error);
  if (!error.empty()) return absl::InvalidArgumentError(error);
  std::string cmdline;
  if (arch == kArchX86) {
    cmdline = "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1";
  } else if (arch == kArchArm64) {
    cmdline = "console=ttyAMA0 panic=-1";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown guest architecture '", arch, "'"));
  }
  for (const std::string& w : words) absl::StrAppend(&cmdline, " ", w);
  for (const std::string& p : *params) absl::StrAppend(&cmdline, " ", p);
  return cmdline;
}

namespace {

absl::StatusOr<std::vector<std::string>> AccelArgs(const QemuInvocation& q) {
  if (q.accel == "tcg" || q.accel == "kvm") return std::vector<std::string>{"-accel", q.accel};
  if (q.accel != "tcg-icount") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown QEMU accelerator '", q.accel, "' (tcg, tcg-icount, kvm)"));
  }
  if (q.icount_shift < 0 || q.icount_shift > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("icount shift ", q.icount_shift, " is outside 0..10"));
  }
  // icount needs one TCG thread for every vCPU.
  return std::vector<std::string>{"-accel", "tcg,thread=single", "-icount",
                                  absl::StrCat("shift=", q.icount_shift, ",align=off,sleep=off")};
}

std::vector<std::string> VirtArgv(const QemuInvocation& q) {
  // clang-format off
  return std::vector<std::string>{
      q.qemu,
      "-M", q.iommu ? "virt,iommu=smmuv3" : "virt",
      "-cpu", q.cpu.empty() ? "max" : q.cpu,
      "-nodefaults", "-no-user-config", "-no-reboot",
      "-display", "none",
      "-m", absl::StrCat(q.memory_mib, "M"),
      "-smp", absl::StrCat(q.cpus),
      "-drive", absl::StrCat("file=", q.nvme_image, ",if=none,id=nvme0,format=raw"),
      "-device", "nvme,serial=farm-nvme0,drive=nvme0",
      "-serial", absl::StrCat("file:", q.console_log),
      "-kernel", q.kernel,
      "-initrd", q.initrd,
      "-append", q.cmdline,
  };
  // clang-format on
}

absl::StatusOr<std::vector<std::string>> Q35Argv(const QemuInvocation& q) {
  if (q.iommu_model != kModelIntel && q.iommu_model != kModelAmd) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown x86_64 IOMMU model '", q.iommu_model, "'"));
  }
  // One option and its value a line.
  // clang-format off
  std::vector<std::string> argv{
      q.qemu,
      "-M", "q35",
      "-nodefaults", "-no-user-config", "-no-reboot",
      "-display", "none",
      "-m", absl::StrCat(q.memory_mib, "M"),
      "-smp", absl::StrCat(q.cpus),
      "-device", "intel-iommu,intremap=on,caching-mode=on",
      "-drive", absl::StrCat("file=", q.nvme_image, ",if=none,id=nvme0,format=raw"),
      "-device", "nvme,serial=farm-nvme0,drive=nvme0",
      "-serial", absl::StrCat("file:", q.console_log),
      "-serial", absl::StrCat("file:", q.channel_log),
      "-kernel", q.kernel,
      "-initrd", q.initrd,
      "-append", q.cmdline,
  };
  // clang-format on
  if (q.iommu_model == kModelAmd) {
    auto device = std::find(argv.begin(), argv.end(), "intel-iommu,intremap=on,caching-mode=on");
    if (q.iommu) {
      *device = "amd-iommu";
    } else {
      argv.erase(device - 1, device + 1);  // off: no IOMMU on the machine
    }
  }
  return argv;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> BuildQemuArgv(const QemuInvocation& q) {
  const bool arm64 = q.arch == kArchArm64;
  if (!arm64 && q.arch != kArchX86) {
    return absl::InvalidArgumentError(absl::StrCat("unknown guest architecture '", q.arch, "'"));
  }
  for (const std::string* p : {&q.kernel, &q.initrd, &q.nvme_image, &q.console_log,
                               arm64 ? &q.console_log : &q.channel_log}) {
    if (p->empty() || absl::StrContains(*p, ',')) {
      return absl::InvalidArgumentError(
          absl::StrCat("QEMU cannot take the path '", *p, "' (empty or containing ',')"));
    }
  }
  if (q.memory_mib <= 0 || q.cpus <= 0) {
    return absl::InvalidArgumentError("QEMU needs positive memory and CPU counts");
  }
  absl::StatusOr<std::vector<std::string>> accel = AccelArgs(q);
  if (!accel.ok()) return accel.status();
  std::vector<std::string> argv = arm64 ? VirtArgv(q) : std::vector<std::string>{};
  if (!arm64) {
    absl::StatusOr<std::vector<std::string>> q35 = Q35Argv(q);
    if (!q35.ok()) return q35.status();
    argv = *std::move(q35);
  }
  // The accelerator after the machine and CPU; the spare device before
  // the last three options (-kernel, -initrd, -append).
  argv.insert(argv.begin() + (arm64 ? 5 : 3), accel->begin(), accel->end());
  if (q.bench_device) argv.insert(argv.end() - 6, {"-device", "edu"});
  return argv;
}

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

std::string NewcArchive(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  std::uint32_t ino = 1;
  std::set<std::string> dirs;
  for (const auto& [path, content] : files) {
    // Parents first, each once: the kernel's unpacker needs them to exist.
    std::string parent;
    for (const auto& part : fs::path(path).parent_path()) {
      parent = parent.empty() ? part.string() : absl::StrCat(parent, "/", part.string());
      if (dirs.insert(parent).second) AppendNewcHeader(out, parent, 0040755, 0, ino++);
    }
    AppendNewcHeader(out, path, absl::StartsWith(path, "farm/bin/") ? 0100755 : 0100644,
                     content.size(), ino++);
    out += content;
    while (out.size() % 4 != 0) out.push_back('\0');
  }
  AppendNewcHeader(out, "TRAILER!!!", 0, 0, 0);
  return out;
}

absl::Status CheckGuestIozoneArgv(const std::vector<std::string>& argv) {
  // The options BuildIozoneGuestArgv (agent/runners/iozone_spec.h) emits and
  // nothing else: no option may name a path (-b, -f, -U ...) outside the
  // scratch file system.
  const std::string prefix = absl::StrCat(kGuestScratchDir, "/");
  bool threads = false;
  std::size_t files = 0;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-s" || a == "-r" || a == "-t") {
      if (i + 1 == argv.size() || argv[i + 1].empty() ||
          argv[i + 1].find_first_not_of("0123456789kmgKMG") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("guest iozone: ", a, " needs a size"));
      }
      threads = threads || a == "-t";
      ++i;
    } else if (a == "-i0" || a == "-i1" || a == "-i2" || a == "-I" || a == "-M") {
    } else if (a == "-F") {
      for (; i + 1 < argv.size() && !absl::StartsWith(argv[i + 1], "-"); ++i, ++files) {
        const std::string& f = argv[i + 1];
        const std::string name = absl::StartsWith(f, prefix) ? f.substr(prefix.size()) : "";
        if (name.empty() || name == "." || name == ".." || absl::StrContains(name, "/")) {
          return absl::InvalidArgumentError(
              absl::StrCat("guest iozone: file '", f, "' is not in ", kGuestScratchDir));
        }
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("guest iozone: option '", a, "' is not one the farm runs"));
    }
  }
  if (!threads || files == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "guest iozone runs in throughput mode only (-t N -F files in ", kGuestScratchDir, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GuestJobArchive(const std::vector<std::string>& tool_argv,
                                            const std::string& wait_device,
                                            const std::string& channel,
                                            const std::string& tool_binary) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!tool_argv.empty()) {
    const std::string tool = fs::path(tool_argv[0]).filename().string();
    if (tool != "fio" && tool != "iozone" && tool != kBenchTool) {
      return absl::InvalidArgumentError(absl::StrCat("the guest root has no tool '", tool_argv[0],
                                                     "' (fio, iozone, ", kBenchTool, ")"));
    }
    if (tool == kBenchTool) {
      if (tool_binary.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("a guest ", kBenchTool, " needs the build's tool binary"));
      }
      files.emplace_back(absl::StrCat("farm/bin/", kBenchTool), tool_binary);
      files.emplace_back("farm/bench-device", absl::StrCat(kBenchDeviceId, "\n"));
    }
    std::string argv = tool + "\n";
    for (std::size_t i = 1; i < tool_argv.size(); ++i) {
      if (tool_argv[i].find_first_of(std::string("\n\0", 2)) != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, " has a newline or NUL; the guest cannot pass it"));
      }
      absl::StrAppend(&argv, tool_argv[i], "\n");
    }
    if (tool == "iozone") {
      if (absl::Status s = CheckGuestIozoneArgv(tool_argv); !s.ok()) return s;
      if (wait_device.empty()) {
        return absl::InvalidArgumentError("guest iozone needs a device for its file system");
      }
    }
    files.emplace_back("farm/argv", std::move(argv));
    if (tool == "iozone") {
      files.emplace_back("farm/scratch-fs", absl::StrCat(wait_device, " ", kGuestScratchDir, "\n"));
    }
  }
  if (!wait_device.empty()) files.emplace_back("farm/wait-device", wait_device + "\n");
  if (!channel.empty()) files.emplace_back("farm/channel", channel + "\n");
  return NewcArchive(files);
}

namespace {

// Whether the build's config sets `symbol` to m (a loadable module).
bool ConfigIsModule(const kstore::KernelBuild& build, absl::string_view symbol) {
  if (build.config.empty()) return false;
  const std::string text = base::ReadFileOrEmpty(build.ConfigPath());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, symbol) && line == "=m") return true;
  }
  return false;
}

// modprobe's spelling of a module name: '-' and '_' are the same.
std::string ModuleKey(absl::string_view name) { return absl::StrReplaceAll(name, {{"-", "_"}}); }

}  // namespace

absl::StatusOr<ModuleNeeds> ModuleDepends(absl::string_view elf) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("not a kernel module: ", why));
  };
  if (elf.size() < sizeof(Elf64_Ehdr) || elf.substr(0, 4) != ELFMAG ||
      elf[EI_CLASS] != ELFCLASS64) {
    return bad("no ELF64 header");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > elf.size() ||
      eh.e_shnum > (elf.size() - eh.e_shoff) / sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum) {
    return bad("section headers out of the file");
  }
  auto section = [&](std::size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  auto body = [&](const Elf64_Shdr& sh) -> absl::StatusOr<absl::string_view> {
    if (sh.sh_offset > elf.size() || sh.sh_size > elf.size() - sh.sh_offset) {
      return bad("section out of the file");
    }
    return elf.substr(sh.sh_offset, sh.sh_size);
  };
  absl::StatusOr<absl::string_view> names = body(section(eh.e_shstrndx));
  if (!names.ok()) return names.status();
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_name >= names->size()) continue;
    absl::string_view name = names->substr(sh.sh_name);
    name = name.substr(0, name.find('\0'));
    if (name != ".modinfo") continue;
    absl::StatusOr<absl::string_view> info = body(sh);
    if (!info.ok()) return info.status();
    ModuleNeeds needs;
    for (absl::string_view entry : absl::StrSplit(*info, '\0')) {
      if (absl::ConsumePrefix(&entry, "depends=")) {
        for (absl::string_view d : absl::StrSplit(entry, ',', absl::SkipEmpty())) {
          needs.depends.emplace_back(d);
        }
      } else if (absl::ConsumePrefix(&entry, "softdep=")) {
        // "pre: a b post: c": the names after pre: up to the next keyword.
        bool pre = false;
        for (absl::string_view w : absl::StrSplit(entry, ' ', absl::SkipEmpty())) {
          if (absl::EndsWith(w, ":")) {
            pre = w == "pre:";
          } else if (pre) {
            needs.soft_pre.emplace_back(w);
          }
        }
      }
    }
    return needs;
  }
  return bad("no .modinfo section");
}

absl::StatusOr<std::vector<std::string>> GuestModules(const kstore::KernelBuild& build,
                                                      bool scratch_fs) {
  std::vector<std::string> wanted;
  if (ConfigIsModule(build, "CONFIG_BLK_DEV_NVME")) wanted.push_back("nvme");
  if (scratch_fs && ConfigIsModule(build, "CONFIG_EXT4_FS")) wanted.push_back("ext4");
  if (wanted.empty()) return std::vector<std::string>();
  const std::string dir = build.ModulesPath();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel ", build.release, " builds ", absl::StrJoin(wanted, " and "),
        " as modules, but its store build has no modules directory (import the .deb with its "
        "modules)"));
  }
  std::map<std::string, std::string> index;  // ModuleKey -> path
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".ko")
      index.emplace(ModuleKey(it->path().stem().string()), it->path().string());
  }
  std::vector<std::string> order;
  std::set<std::string> done, visiting;
  std::function<absl::Status(const std::string&, bool)> visit = [&](const std::string& name,
                                                                    bool soft) {
    const std::string key = ModuleKey(name);
    if (done.count(key)) return absl::OkStatus();
    auto it = index.find(key);
    if (it == index.end() && soft) return absl::OkStatus();
    if (!visiting.insert(key).second) {
      return absl::FailedPreconditionError(absl::StrCat("module ", name, " depends on itself"));
    }
    if (it == index.end()) {
      return absl::FailedPreconditionError(absl::StrCat("kernel ", build.release, " needs module ",
                                                        name, ", which is not under ", dir));
    }
    const std::string elf = base::ReadFileOrEmpty(it->second);
    absl::StatusOr<ModuleNeeds> needs = ModuleDepends(elf);
    if (!needs.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(it->second, ": ", needs.status().message()));
    }
    for (const std::string& d : needs->soft_pre) {
      if (absl::Status s = visit(d, true); !s.ok()) return s;
    }
    for (const std::string& d : needs->depends) {
      if (absl::Status s = visit(d, false); !s.ok()) return s;
    }
    done.insert(key);
    order.push_back(it->second);
    return absl::OkStatus();
  };
  for (const std::string& w : wanted) {
    if (absl::Status s = visit(w, false); !s.ok()) return s;
  }
  return order;
}

absl::StatusOr<std::string> GuestModulesArchive(const std::vector<std::string>& modules) {
  std::vector<std::pair<std::string, std::string>> files;
  std::string order;
  for (const std::string& m : modules) {
    const std::string name = fs::path(m).filename().string();
    absl::StatusOr<std::string> body = base::ReadFile(m);
    if (!body.ok()) return absl::InternalError(absl::StrCat("read module ", m));
    files.emplace_back(absl::StrCat("farm/modules/", name), *std::move(body));
    absl::StrAppend(&order, name, "\n");
  }
  files.emplace_back("farm/modules.order", std::move(order));
  return NewcArchive(files);
}

absl::StatusOr<KernelRun> InterpretGuestRun(const KernelRequest& request, absl::string_view channel,
                                            absl::string_view console, const QemuExit& exit) {
  auto aborted = [&](absl::string_view why) {
    std::string msg = absl::StrCat("guest kernel ", request.kernel_release, " ", why, " (qemu ",
                                   exit.description, ")");
    std::string err = std::string(absl::StripAsciiWhitespace(exit.qemu_stderr));
    if (!err.empty()) absl::StrAppend(&msg, "; qemu said: ", ConsoleTail(err, 5, 1024));
    absl::StrAppend(&msg, "; console tail:\n", ConsoleTail(console));
    return absl::AbortedError(msg);
  };
  // An image that cannot boot fails the same way every time: permanent.
  auto unbootable = [&](absl::string_view why) {
    absl::Status s = aborted(why);
    return absl::FailedPreconditionError(
        absl::StrCat("corrupt or unbootable kernel image: ", s.message()));
  };
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(channel);
  if (!out.ok())
    return aborted(absl::StrCat("wrote a broken farm channel: ", out.status().message()));
  if (!out->done) {
    if (exit.halted) return unbootable("halted in its boot stub");
    if (exit.image_refused) return unbootable("was refused by QEMU's loader");
    if (exit.timed_out) return aborted("did not finish in time");
    return aborted("stopped before the job finished");
  }
  // Without its modules the guest has no NVMe, and its group says nothing
  // about the mode.
  if (auto it = out->sections.find("modules"); it != out->sections.end() && it->second.exit != 0) {
    return aborted(absl::StrCat("could not load its kernel modules (exit ", it->second.exit,
                                "): ", ConsoleTail(it->second.body, 5, 512)));
  }
  absl::StatusOr<KernelFacts> facts = KernelFactsFromGuest(*out);
  if (!facts.ok()) return aborted(facts.status().message());

  KernelRun run;
  run.provider = "vm";
  run.requested = request.mode;
  run.facts = *std::move(facts);
  if (run.facts.release != request.kernel_release) {
    return absl::FailedPreconditionError(absl::StrCat("requested kernel ", request.kernel_release,
                                                      " but the guest booted ", run.facts.release));
  }
  absl::StatusOr<pb::IommuMode> effective = EffectiveMode(run.facts, &run.effective_detail);
  if (!effective.ok()) return aborted(effective.status().message());
  run.effective = *effective;
  run.domain_type = NvmeDomainType(run.facts);
  if (run.effective != request.mode) {
    return absl::FailedPreconditionError(
        absl::StrCat("requested IOMMU mode ", proto::ModeName(request.mode),
                     " but the guest kernel ran ", proto::ModeName(run.effective), " (",
                     run.effective_detail, "; cmdline: ", run.facts.cmdline, ")"));
  }
  if (auto it = out->sections.find("scratch-fs");
      it != out->sections.end() && it->second.exit != 0) {
    return aborted(absl::StrCat("could not make the scratch file system (exit ", it->second.exit,
                                "): ", ConsoleTail(it->second.body, 5, 512)));
  }
  // Whether the kernel has the benchmark's driver is its config's: permanent.
  if (auto it = out->sections.find("bench-device");
      it != out->sections.end() && it->second.exit != 0) {
    return absl::FailedPreconditionError(absl::StrCat("guest kernel ", request.kernel_release,
                                                      " cannot run ", kBenchTool, ": ",
                                                      ConsoleTail(it->second.body, 5, 512)));
  }
  if (auto it = out->sections.find("tool"); it != out->sections.end()) {
    run.tool_stdout = it->second.body;
    run.tool_exit = it->second.exit;
  }
  if (auto it = out->sections.find("tool-stderr"); it != out->sections.end()) {
    run.tool_stderr = it->second.body;
  }
  // Monitors never fail a run: one that cannot be read says why.
  if (absl::StatusOr<pb::Monitors> m = MonitorsFromGuest(*out); m.ok()) {
    run.monitors = *std::move(m);
  } else if (run.tool_exit >= 0) {
    run.monitors.emplace();
    run.monitors->set_where("guest");
    run.monitors->set_iommu_note(absl::StrCat("no monitors: ", m.status().message()));
  }
  return run;
}

absl::StatusOr<std::string> QemuVersion(const std::string& qemu) {
  process::ProcessOptions opts;
  opts.argv = {qemu, "--version"};
  opts.timeout = absl::Seconds(20);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(opts);
  if (!r.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(qemu, ": ", r.status().message()));
  }
  if (!r->ok())
    return absl::FailedPreconditionError(absl::StrCat(qemu, " --version: ", r->Describe()));
  std::string first = r->stdout_data.substr(0, r->stdout_data.find('\n'));
  return std::string(absl::StripAsciiWhitespace(first));
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

std::string ResolveAccel(const std::string& flag, const std::function<absl::Status()>& kvm_probe,
                         std::string* why) {
  if (flag != "auto") return flag;
  absl::Status s = kvm_probe();
  if (s.ok()) return "kvm";
  if (why != nullptr) *why = std::string(s.message());
  return "tcg-icount";
}

std::string KvmArchMismatch(const std::string& guest_arch, const std::string& host_arch) {
  if (guest_arch == host_arch) return "";
  return absl::StrCat("an ", guest_arch, " guest runs under TCG on this ", host_arch,
                      " host: KVM runs only ", host_arch, " guests here");
}

absl::Status CheckAccel(const std::string& flag, const std::string& guest_arch,
                        const std::string& host_arch) {
  if (flag != "kvm") return absl::OkStatus();
  const std::string why = KvmArchMismatch(guest_arch, host_arch);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("--vm-accel kvm: ", why, " (--vm-accel auto, tcg-icount or tcg)"));
}

std::string HostArch() {
  struct utsname u;
  return ::uname(&u) == 0 ? std::string(u.machine) : std::string("unknown");
}

absl::Status ProbeKvm(const VmConfig& config, const std::string& kernel_release,
                      const std::string& commit) {
  if (std::string why = KvmArchMismatch(config.arch, HostArch()); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  if (::access("/dev/kvm", R_OK | W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("/dev/kvm is not usable: ", std::strerror(errno)));
  }
  VmConfig probe = config;
  probe.accel = "kvm";
  probe.boot_timeout = absl::Seconds(15);
  probe.margin = absl::Seconds(5);
  KernelRequest r;
  r.kernel_release = kernel_release;
  r.commit = commit;
  r.mode = pb::IOMMU_MODE_PASSTHROUGH;  // facts only: no tool
  absl::StatusOr<KernelRun> run = VmKernelProvider(probe).Run(r);
  if (!run.ok()) {
    std::string msg(run.status().message());
    return absl::FailedPreconditionError(absl::StrCat(
        "a KVM guest did not boot: ", msg.substr(0, std::min<size_t>(msg.size(), 300))));
  }
  return absl::OkStatus();
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
    if (b.arch != config_.arch) continue;
    for (const std::string& model : IommuModelsFor(b, config_.arch)) {
      pb::KernelOffer& o = out.emplace_back();
      o.set_provider("vm");
      o.set_release(b.release);
      o.set_commit(b.commit);
      for (pb::IommuMode m : Modes()) o.add_modes(m);
      o.set_architecture(config_.arch);
      o.set_machine_model(model);
      o.set_accel(config_.accel);
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
    if (b.arch != config_.arch) continue;
    if (request.commit.empty() ? b.release == request.kernel_release : b.commit == request.commit) {
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

// How the QEMU process ended, from its result and the halt watch.
QemuExit ExitOf(const process::ProcessResult& r, bool halted, absl::Duration limit) {
  QemuExit exit;
  exit.exited_cleanly = r.ok();
  exit.timed_out = r.timed_out;
  exit.halted = halted;
  exit.description = halted ? std::string("stopped: the console showed a halt") : r.Describe();
  if (exit.timed_out) absl::StrAppend(&exit.description, " after ", absl::FormatDuration(limit));
  exit.qemu_stderr = r.stderr_data;
  // QEMU's x86 loader refuses an image whose boot header it cannot read
  // ("linux kernel too old to load a ram disk", "Error loading uncompressed
  // kernel without PVH ELF Note") before any guest code runs.
  exit.image_refused = !r.ok() && !r.timed_out && !halted &&
                       (absl::StrContains(r.stderr_data, "linux kernel") ||
                        absl::StrContains(r.stderr_data, "loading uncompressed kernel") ||
                        absl::StrContains(r.stderr_data, "could not load kernel"));
  return exit;
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
      request.tool_argv, kGuestNvme, config_.arch == kArchArm64 ? "/dev/ttyAMA0" : "", *bench_tool);
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
      InterpretGuestRun(booted, channel, console, ExitOf(*r, halted, opts.timeout));
  if (!run.ok()) return run.status();
  run->accel = config_.accel;
  run->icount_shift = IcountShift();
  run->machine_model = q->iommu_model.empty() ? MachineModel() : q->iommu_model;
  run->wall_time = absl::Now() - start;
  return run;
}

}  // namespace farm::kernels
