// RunProcess against real processes.
#include "lib/process/process.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace farm::process {
namespace {

namespace fs = std::filesystem;

// True while `pid` exists and is not a zombie. A reparented zombie that
// nobody reaps (PID 1 in a container) is dead for our purposes.
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.good()) return false;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// SIGKILL is delivered asynchronously: a killed process may take a moment
// to leave the process table. Bounded wait, not a speed assertion.
bool DiesWithin(pid_t pid, absl::Duration bound) {
  const absl::Time end = absl::Now() + bound;
  while (Alive(pid)) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

std::vector<pid_t> Pids(const std::string& text) {
  std::vector<pid_t> pids;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    int p = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(l), &p)) pids.push_back(p);
  }
  return pids;
}

TEST(RunProcess, CapturesOutputsAndExitCode) {
  ProcessOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->ok());
  EXPECT_FALSE(r->signaled);
  EXPECT_EQ(r->Describe(), "exit 3");
}

// on_stdout sees the output while the child runs, all of it, even past
// the capture's cap.
TEST(RunProcess, OnStdoutFollowsTheOutputAsItComes) {
  ProcessOptions o;
  o.argv = {"sh", "-c", "echo first; sleep 0.5; echo second; echo err >&2"};
  o.max_stdout = 4;
  std::string seen;
  absl::Time first_seen = absl::InfiniteFuture();
  o.on_stdout = [&](std::string_view piece) {
    seen.append(piece);
    if (first_seen == absl::InfiniteFuture()) first_seen = absl::Now();
  };
  const absl::Time start = absl::Now();
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(seen, "first\nsecond\n");
  EXPECT_EQ(r->stdout_data, "firs");
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_LT(first_seen - start, absl::Milliseconds(400));  // before the sleep ended
}

TEST(RunProcess, ArgumentsAreNeverInterpretedByAShell) {
  const std::string marker = (fs::temp_directory_path() / "runners-no-shell-marker").string();
  fs::remove(marker);
  ProcessOptions o;
  o.argv = {"echo", "a; touch " + marker, "$(touch " + marker + ")"};
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "a; touch " + marker + " $(touch " + marker + ")\n");
  EXPECT_FALSE(fs::exists(marker));
}

TEST(RunProcess, TimeoutKillsTheWholeGroupEvenIfTheLeaderIgnoresTerm) {
  ProcessOptions o;
  // Two grandchildren, then the leader ignores SIGTERM: only the group
  // SIGKILL after the grace period ends it.
  o.argv = {"sh", "-c",
            "sleep 60 & echo $!; sleep 60 & echo $!; trap '' TERM; wait; "
            "wait; sleep 60"};
  o.timeout = absl::Milliseconds(300);
  o.kill_grace = absl::Milliseconds(300);
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->term_signal, SIGKILL);
  std::vector<pid_t> pids = Pids(r->stdout_data);
  ASSERT_EQ(pids.size(), 2u) << r->stdout_data;
  for (pid_t p : pids) {
    EXPECT_TRUE(DiesWithin(p, absl::Seconds(10))) << "grandchild " << p;
  }
}

TEST(RunProcess, TermIsEnoughForAWellBehavedTool) {
  ProcessOptions o;
  o.argv = {"sleep", "60"};
  o.timeout = absl::Milliseconds(100);
  o.kill_grace = absl::Seconds(30);
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGTERM);
}

TEST(RunProcess, StragglersAreKilledWhenTheLeaderExits) {
  ProcessOptions o;
  // The background sleep keeps the stdout pipe open: without the group kill
  // RunProcess would wait for it.
  o.argv = {"sh", "-c", "sleep 60 & echo $!"};
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok()) << r->Describe();
  std::vector<pid_t> pids = Pids(r->stdout_data);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(DiesWithin(pids[0], absl::Seconds(10)));
}

TEST(RunProcess, CancellationHookStopsTheRun) {
  std::atomic<int> polls{0};
  ProcessOptions o;
  o.argv = {"sleep", "60"};
  o.cancelled = [&polls] { return ++polls > 3; };
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->Describe(), "killed by signal 15 (cancelled)");
}

TEST(RunProcess, OutputIsCappedWithoutBlockingTheChild) {
  ProcessOptions o;
  o.argv = {"head", "-c", "4194304", "/dev/zero"};
  o.max_stdout = 1000;
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok()) << r->Describe();
  EXPECT_EQ(r->stdout_data.size(), 1000u);
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_FALSE(r->stderr_truncated);
}

TEST(RunProcess, MinimalEnvironmentAndWorkingDirectory) {
  ProcessOptions o;
  o.argv = {"sh", "-c", "env | sort; pwd"};
  o.cwd = "/";
  auto r = RunProcess(o);
  ASSERT_TRUE(r.ok()) << r.status();
  // sh adds PWD/SHLVL itself; nothing of ours (HOME, tokens) leaks.
  EXPECT_EQ(r->stdout_data.find("HOME="), std::string::npos) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("LC_ALL=C"), std::string::npos);
  EXPECT_TRUE(absl::EndsWith(r->stdout_data, "\n/\n")) << r->stdout_data;
}

TEST(RunProcess, WorksWhenTheCallerHasNoStdio) {
  // A daemon may run with 0-2 closed: pipes then get those numbers.
  const int saved_in = ::dup(0);
  ASSERT_GE(saved_in, 0);
  ::close(0);
  ProcessOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2"};
  auto r = RunProcess(o);
  ::dup2(saved_in, 0);
  ::close(saved_in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
}

TEST(RunProcess, ErrorsBeforeTheToolRuns) {
  ProcessOptions o;
  EXPECT_EQ(RunProcess(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.argv = {"/nonexistent/tool"};
  EXPECT_EQ(RunProcess(o).status().code(), absl::StatusCode::kNotFound);
  o.argv = {"no-such-tool-anywhere"};
  EXPECT_EQ(RunProcess(o).status().code(), absl::StatusCode::kNotFound);
  o.argv = {"true"};
  o.cwd = "/nonexistent-dir";
  auto r = RunProcess(o);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("chdir"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace farm::process
