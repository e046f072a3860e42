// One parser for emulated and real runs: the emulator's `--format fio-json`
// and `--format iozone` output, produced by the real farm-emu binary, must
// parse with the same ParseFioJson / ParseIozoneReport the agent uses on real
// fio and iozone output. It lives here, not in emu/, because emu/ must not
// link farm_runners.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/iozone_report.h"
#include "lib/process/process.h"

namespace farm::runners {
namespace {

std::string RunEmu(std::vector<std::string> args) {
  process::ProcessOptions o;
  o.argv = {FARM_EMU_BIN};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.timeout = absl::Seconds(60);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_TRUE(r->ok()) << "farm-emu failed: " << r->stderr_data;
  return r->stdout_data;
}

TEST(EmuFormatsTest, FioJsonFromTheEmulatorParses) {
  std::string out =
      RunEmu({"run", "--platform", "kunpeng920-smmuv3", "--kernel", "v5.14", "--mode", "strict",
              "--workload", "fio-nvme", "--param", "cpus_allowed=0,32", "--param", "numjobs=2",
              "--param", "runtime_ms=2", "--format", "fio-json"});
  absl::StatusOr<FioReport> rep = ParseFioJson(out);
  ASSERT_TRUE(rep.ok()) << rep.status() << "\n" << out.substr(0, 400);
  ASSERT_EQ(rep->jobs.size(), 2u);
  for (const FioJob& j : rep->jobs) {
    EXPECT_TRUE(j.read.active());
    EXPECT_FALSE(j.write.active());
    EXPECT_GT(j.read.iops, 0);
    EXPECT_GT(j.read.bw_kib_s, 0);
    EXPECT_GT(j.read.clat.p50_ns, 0);
    EXPECT_GE(j.read.clat.p99_ns, j.read.clat.p50_ns);
  }
}

TEST(EmuFormatsTest, IozoneReportFromTheEmulatorParses) {
  std::string out =
      RunEmu({"run", "--platform", "intel-vtd-2s12c", "--kernel", "c588072bba6b", "--mode",
              "strict", "--workload", "iozone-nfsrdma", "--param", "threads=4", "--param",
              "record=256k", "--param", "sim_records=4", "--format", "iozone"});
  absl::StatusOr<IozoneReport> rep = ParseIozoneReport(out);
  ASSERT_TRUE(rep.ok()) << rep.status() << "\n" << out.substr(0, 400);
  for (const char* test : {"write", "rewrite", "read", "reread"}) {
    const IozoneTest* t = rep->Find(test);
    ASSERT_NE(t, nullptr) << test << "\n" << out;
    EXPECT_EQ(t->processes, 4) << test;
    EXPECT_GT(t->children, 0) << test;
    EXPECT_GE(t->children, t->parent * 0.99) << test;
    EXPECT_EQ(t->unit, "kB/sec");
  }
}

}  // namespace
}  // namespace farm::runners
