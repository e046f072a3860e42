// Property tests of what reads a vm guest's output back: the farm channel
// (ParseGuestChannel and the facts and monitors read from it), the console
// tail a failure quotes, and InterpretGuestRun over both, on mutated
// channels of a real boot's layout: any text gets an answer, never a crash or
// a hang; errors and quoted tails stay short; a channel that parses reads
// back the same when written out again. testing/fuzz.h says how to run
// longer.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/kernels/guest_channel.h"
#include "agent/kernels/guest_channel_testdata.h"
#include "agent/kernels/guest_run.h"
#include "gtest/gtest.h"
#include "testing/fuzz.h"

namespace farm::kernels {
namespace {

using ::farm::kernels::testdata::kStrictChannel;

namespace pb = ::iommufarm::v1;
using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

// A failure reason: a sentence, the console's tail (4 KiB) and a cut line.
constexpr size_t kMaxErrorBytes = 8 << 10;

constexpr char kMonitors[] =
    "@@farm-begin monitor-before\n"
    "%% interrupts\n"
    "            CPU0       CPU1       \n"
    "  24:          0          0  DMAR-MSI    0-edge      dmar0\n"
    "  26:        100          0  IR-PCI-MSIX-0000:00:01.0    1-edge      nvme0q1\n"
    " LOC:       5000       4000   Local timer interrupts\n"
    "%% vmstat\n"
    "pgfault 1000\nnr_dirty 10\n"
    "%% iommu-note none exposed\n"
    "@@farm-end monitor-before 0\n"
    "@@farm-begin monitor-after\n"
    "%% interrupts\n"
    "            CPU0       CPU1       \n"
    "  26:        400          2  IR-PCI-MSIX-0000:00:01.0    1-edge      nvme0q1\n"
    "%% vmstat\n"
    "pgfault 1300\nnr_dirty 10\n"
    "@@farm-end monitor-after 0\n";

const std::vector<std::string>& Seeds() {
  static const auto* seeds = new std::vector<std::string>{
      kStrictChannel,
      std::string(kStrictChannel) + kMonitors,
      "@@farm-begin facts\nrelease=6.1.0-57-cloud-amd64\nmachine=x86_64\n"
      "cmdline=console=ttyS0 iommu.strict=1\niommu=ivhd0 \n@@farm-end facts 0\n"
      "@@farm-begin iommu-groups\n@@farm-end iommu-groups 0\n"
      "@@farm-begin modules\ninsmod nvme-core.ko\ninsmod: can't insert 'nvme-core.ko': "
      "unknown symbol in module\n@@farm-end modules 1\n",
  };
  return *seeds;
}

const std::vector<std::string>& Words() {
  static const auto* words = new std::vector<std::string>{
      "@@farm-begin ",         "@@farm-end ",   "@@farm-done",  "\n@@farm-begin tool\n",
      "\n@@farm-end tool 0\n", "facts",         "iommu-groups", "nvme",
      "monitor-before",        "monitor-after", "release=",     "%% interrupts\n",
      "%% vmstat\n",           " -1",           " 2147483648",  "Kernel panic - not syncing",
      "reboot: Power down"};
  return *words;
}

// The channel as the guest's init would write it.
std::string Write(const GuestOutput& out) {
  std::string text;
  for (const auto& [name, section] : out.sections) {
    absl::StrAppend(&text, "@@farm-begin ", name, "\n", section.body, "@@farm-end ", name, " ",
                    section.exit, "\n");
  }
  if (out.done) text += "@@farm-done\n";
  return text;
}

void ChannelProperties(const std::string& text) {
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(text);
  if (!out.ok()) {
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(out.status().message().empty());
    EXPECT_LE(out.status().message().size(), kMaxErrorBytes) << out.status();
  } else {
    absl::StatusOr<GuestOutput> again = ParseGuestChannel(Write(*out));
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << Write(*out);
    EXPECT_EQ(again->done, out->done);
    ASSERT_EQ(again->sections.size(), out->sections.size());
    for (const auto& [name, section] : out->sections) {
      EXPECT_EQ(again->sections.at(name).body, section.body) << name;
      EXPECT_EQ(again->sections.at(name).exit, section.exit) << name;
    }
    absl::StatusOr<KernelFacts> facts = KernelFactsFromGuest(*out);
    if (!facts.ok()) {
      EXPECT_FALSE(facts.status().message().empty());
      EXPECT_LE(facts.status().message().size(), kMaxErrorBytes) << facts.status();
    }
    absl::StatusOr<pb::Monitors> monitors = MonitorsFromGuest(*out);
    if (!monitors.ok()) {
      EXPECT_FALSE(monitors.status().message().empty());
      EXPECT_LE(monitors.status().message().size(), kMaxErrorBytes) << monitors.status();
    }
  }
  const std::string tail = ConsoleTail(text);
  EXPECT_LE(tail.size(), 4096u);
  EXPECT_LE(std::count(tail.begin(), tail.end(), '\n'), 30);
}

TEST(GuestChannelFuzzTest, MutatedChannelsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(20000);
  Mutator m(config.seed, Seeds(), Words());
  RunFuzz(
      config, [&] { return m.Next(); }, ChannelProperties);
}

// A line the tty ended with "\r\r\n" (a written "\r\n" through ONLCR) reads
// as one written with "\n".
TEST(GuestChannelFuzzTest, DoubledCarriageReturnsAreLineEnds) {
  absl::StatusOr<GuestOutput> out =
      ParseGuestChannel("@@farm-begin facts\r\r\nrelease=6.1\r\r\n@@farm-end facts 0\r\r\n");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sections.at("facts").body, "release=6.1\n");
  ChannelProperties("@@farm-begin facts\ncmdline=x\r\r\n@@farm-end facts 0\n");
}

// Every way the run can end, over mutated channels and consoles.
TEST(GuestChannelFuzzTest, MutatedRunsAreInterpreted) {
  const auto config = FuzzConfigFromEnv(10000);
  Mutator m(config.seed, Seeds(), Words());
  RunFuzz(
      config, [&] { return m.Next(); },
      [&](const std::string& channel) {
        KernelRequest request;
        request.kernel_release = m.OneIn(4) ? "6.1.0-57-cloud-arm64" : "6.1.0-57-cloud-amd64";
        request.mode = static_cast<pb::IommuMode>(m.Below(5));
        if (!m.OneIn(3)) request.tool_argv = {"fio", "--output-format=json"};
        QemuExit exit;
        exit.exited_cleanly = !m.OneIn(4);
        exit.timed_out = m.OneIn(6);
        exit.halted = m.OneIn(8);
        exit.image_refused = m.OneIn(8);
        exit.description = exit.exited_cleanly ? "exit 0" : "signal 9";
        exit.qemu_stderr = m.OneIn(4) ? m.Next() : "";
        const std::string console = m.OneIn(2) ? channel : m.Next();
        absl::StatusOr<KernelRun> run = InterpretGuestRun(request, channel, console, exit);
        if (!run.ok()) {
          EXPECT_FALSE(run.status().message().empty());
          EXPECT_LE(run.status().message().size(), kMaxErrorBytes + exit.qemu_stderr.size())
              << run.status();
        }
      });
}

}  // namespace
}  // namespace farm::kernels
