// lib/iommu_mode/iommu_mode.h: the IOMMU modes of the farm (off, passthrough,
// strict, lazy) and everything the tree knows about them: the word users and
// SQL spell, the kernel command-line parameters that select a mode, the
// default domain type an IOMMU group of a kernel running in it reports
// (/sys/kernel/iommu_groups/N/type), and the one rule that reads which mode a
// running kernel is in from what it shows.
//
// The emulator, the proto names, the agent's host facts and kernel providers
// and the scheduler all read this table, so it depends on nothing of the tree
// (the proto enum conversions live in proto/names.h, on top of it).
//
// Pure functions over constant tables; thread-safe; no ownership.
#ifndef LIB_IOMMU_MODE_IOMMU_MODE_H_
#define LIB_IOMMU_MODE_IOMMU_MODE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace farm::iommu_mode {

// In the order of iommufarm.v1.IommuMode (OFF = 1 ... LAZY = 4).
enum class Mode { kOff, kPassthrough, kStrict, kLazy };

struct ModeSpelling {
  Mode mode;
  // The matrix spec's, the CLIs' and SQL's word. (C strings, so that every
  // string library of the tree takes them as they are.)
  const char* word;
  // iommu_group_show_type() in drivers/iommu/iommu.c for a group whose
  // default domain runs the mode; "" for off, where the device has no group.
  const char* domain_type;
  // The architecture-neutral switch of drivers/iommu/iommu.c; "" for off,
  // which every IOMMU driver spells its own way (OffParam).
  const char* kernel_param;
};

// Every mode, in enum order.
inline constexpr ModeSpelling kModes[] = {
    {Mode::kOff, "off", "", ""},
    {Mode::kPassthrough, "passthrough", "identity", "iommu.passthrough=1"},
    {Mode::kStrict, "strict", "DMA", "iommu.strict=1"},
    {Mode::kLazy, "lazy", "DMA-FQ", "iommu.strict=0"},
};

constexpr const char* Word(Mode mode) { return kModes[static_cast<int>(mode)].word; }
// nullopt for a word that is no mode (the words are case-sensitive).
std::optional<Mode> FromWord(std::string_view word);
// "off, passthrough, strict, lazy": for "expected ..." messages.
std::string WordList();

// "" for off.
constexpr const char* DomainType(Mode mode) { return kModes[static_cast<int>(mode)].domain_type; }
// nullopt for a type no mode stands for ("blocked", "unmanaged", unknown words).
std::optional<Mode> FromDomainType(std::string_view type);

// The IOMMU drivers whose command-line switch turns the IOMMU off.
enum class Driver { kIntelVtd, kAmdVi, kArmSmmuV3 };

// The kernel command-line words that select `mode` on a kernel whose IOMMU
// may be any of `drivers`: off is each driver's own switch
// (intel_iommu=off, amd_iommu=off; the SMMUv3 has none, so off there is the
// absence of the IOMMU and gives no word), every other mode its
// ModeSpelling::kernel_param.
std::vector<std::string> KernelParams(Mode mode, const std::vector<Driver>& drivers);

// True for a command-line word whose parameter ModeFromCmdline reads
// (intel_iommu=, amd_iommu=, iommu=, iommu.strict=, iommu.passthrough=): a
// kernel booted for a job's mode drops them from its base command line.
bool IsModeParam(std::string_view word);

// True for a word that names a mode outright (iommu.strict, iommu.passthrough,
// iommu=pt, iommu=nopt), which a job's extra parameters may not carry: the
// job's mode owns them.
bool OverridesMode(std::string_view word);

// What a kernel command line says about the mode. mode is nullopt when the
// command line leaves it to the kernel's default; detail lists the
// parameters that decided it ("intel_iommu=on iommu.strict=1").
struct CmdlineMode {
  std::optional<Mode> mode;
  std::string detail;
};

// Later parameters override earlier ones, as the kernel applies them in
// order. Recognised: intel_iommu=, amd_iommu=, iommu=off|pt|nopt|strict,
// iommu.passthrough=, iommu.strict= (values as the kernel's kstrtobool()).
CmdlineMode ModeFromCmdline(std::string_view cmdline);

// What a running kernel shows about the DMA whose mode counts.
struct RunningKernel {
  // False when no IOMMU can translate that DMA: /sys/class/iommu is empty,
  // or the device is in no IOMMU group.
  bool behind_iommu = false;
  // The default domain types of the groups that carry it: every group of a
  // machine, or the one group of the device a job uses.
  std::vector<std::string> group_types;
  // Hints for when the types cannot tell (no group visible, or a pre-v5.15
  // "DMA" that may be lazy). A reading that must prove the mode from the
  // domain types alone leaves them empty.
  std::string_view cmdline;
  std::string_view release;  // uname -r
  std::string_view arch;     // uname -m
};

struct ModeReading {
  // nullopt: what the kernel shows stands for no mode.
  std::optional<Mode> mode;
  // ModeFromCmdline(cmdline).detail; "" without a command line.
  std::string cmdline_detail;
  // Why a hint overrode the types; "" when the types decided alone.
  std::string note;
};

// The one rule: not behind an IOMMU is off; otherwise the most common
// translated domain type wins (ties: the earlier mode), "blocked" and unknown
// types abstain; without a vote the command line decides. A kernel before
// v5.15 had no "DMA-FQ" type, so there a "DMA" majority is the command
// line's strictness, else the era's default (x86 lazy, arm64 strict).
ModeReading ReadRunningMode(const RunningKernel& kernel);

}  // namespace farm::iommu_mode

#endif  // LIB_IOMMU_MODE_IOMMU_MODE_H_
