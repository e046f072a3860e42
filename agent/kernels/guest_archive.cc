#include "agent/kernels/guest_archive.h"

#include <cstdint>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/base/file.h"

namespace farm::kernels {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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
                                            const std::string& tool_binary, bool kernel_counters) {
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
  if (kernel_counters && !tool_argv.empty()) files.emplace_back("farm/kernel-counters", "on\n");
  if (!wait_device.empty()) files.emplace_back("farm/wait-device", wait_device + "\n");
  if (!channel.empty()) files.emplace_back("farm/channel", channel + "\n");
  return NewcArchive(files);
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

}  // namespace farm::kernels
