// The scheduler's memory against what it stores, with the real
// farm-scheduler binary over a real PostgreSQL:
//  - GetResults over 40 results of 4 MiB raw output each: the scheduler's
//    resident set grows by less than 64 MB while it streams them (pages are
//    bounded by bytes, and one page is held at a time);
//  - GetRawOutput of four 4 MiB raw outputs (multi-byte UTF-8 text), read
//    concurrently: each comes back byte-identical in chunks of at most
//    1 MiB while the scheduler grows by less than the outputs' size (it
//    reads one chunk at a time);
//  - a 200 KB `set:` over 1000 jobs is stored once with the matrix, not in
//    every job row (row sizes read from PostgreSQL), and every leased job
//    still carries all of it.
// The bounds are on bytes (VmRSS of the scheduler process, pg_column_size),
// never on time.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "emu/model/model_config.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "testing/binaries.h"
#include "testing/child_process.h"
#include "testing/service_harness.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;
using ::farm::testing::BinaryPath;
using ::farm::testing::PostgresInstance;
using ::farm::testing::SpawnLogged;

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

// VmRSS of `pid` in bytes; 0 when unreadable.
int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

// Text pglz cannot shrink much, so PostgreSQL stores about what was sent.
std::string Noise(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string s(n, ' ');
  for (char& c : s) c = static_cast<char>(letter(gen));
  return s;
}

class SchedulerMemoryPgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    db_uri_ = pg_->Uri("farm");
    const int port = farm::testing::PickFreePort();
    ASSERT_GT(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
    scheduler_ =
        SpawnLogged({BinaryPath("FARM_SCHEDULER_BIN", FARM_SCHEDULER_BIN), "--listen", address_,
                     "--db", db_uri_, "--metrics", "127.0.0.1:0", "--lease-ttl", "60s"},
                    pg_->dir() + "/scheduler");
    absl::Status st = scheduler_->WaitFor("listening on", false, absl::Seconds(60));
    ASSERT_TRUE(st.ok()) << st << "\n" << scheduler_->Err();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
    jobs_ = pb::JobService::NewStub(channel_);
    agents_ = pb::AgentService::NewStub(channel_);
  }

  int64_t Submit(const std::string& yaml) {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(yaml);
    pb::SubmitMatrixResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(120)));
    grpc::Status st = jobs_->SubmitMatrix(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.matrix().id();
  }

  pb::RegisterResponse Register(int slots) {
    pb::RegisterRequest req;
    req.set_name("memory-probe");
    req.add_capabilities()->set_name("emulator");
    req.set_slots(slots);
    pb::RegisterResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(30)));
    grpc::Status st = agents_->Register(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  std::vector<pb::JobLease> Lease(const pb::RegisterResponse& a, int n) {
    pb::LeaseJobsRequest req;
    req.set_agent_id(a.agent_id());
    req.set_session(a.session());
    req.set_max_jobs(n);
    pb::LeaseJobsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(60)));
    grpc::Status st = agents_->LeaseJobs(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return {resp.leases().begin(), resp.leases().end()};
  }

  int64_t Sql(const std::string& q) {
    pqxx::connection c(db_uri_);
    pqxx::work w(c);
    return w.exec1(q)[0].as<int64_t>();
  }

  std::unique_ptr<PostgresInstance> pg_;
  std::string db_uri_, address_;
  std::unique_ptr<farm::testing::ChildProcess> scheduler_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AgentService::Stub> agents_;
};

TEST_F(SchedulerMemoryPgTest, GetResultsOfLargeRawOutputsKeepsTheSchedulerSmall) {
  constexpr int kJobs = 40;
  constexpr size_t kRaw = 4 << 20;
  const int64_t m = Submit(absl::StrCat(
      "name: big-raw\ncatalog: linux-iommu\nplatform: intel-vtd-snb16c\ncommits: [v4.6]\n"
      "modes: [strict]\nrepeats: ",
      kJobs, "\nworkloads:\n  - name: dma-map-bench\n    params: {threads: 1, seconds: 0.001}\n"));
  ASSERT_GT(m, 0);
  pb::RegisterResponse a = Register(kJobs);
  std::vector<pb::JobLease> leases = Lease(a, kJobs);
  ASSERT_EQ(leases.size(), static_cast<size_t>(kJobs));
  const std::string raw = Noise(kRaw, 1);
  for (const pb::JobLease& l : leases) {
    pb::ReportResultRequest req;
    req.set_agent_id(a.agent_id());
    *req.mutable_lease() = l.lease();
    pb::Sample* s = req.add_samples();
    s->set_metric("throughput");
    s->set_value(1);
    req.set_raw_output(raw);
    req.set_raw_format("emu-json");
    pb::ReportResultResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(60)));
    grpc::Status st = agents_->ReportResult(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_TRUE(resp.accepted());
  }

  // The baseline after ingest: what the streaming adds is measured alone.
  const pid_t pid = scheduler_->pid();
  const int64_t before = RssBytes(pid);
  ASSERT_GT(before, 0);
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      const int64_t now = RssBytes(pid);
      if (now > peak.load()) peak.store(now);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  pb::GetResultsRequest req;
  req.set_matrix_id(m);
  req.set_include_raw_output(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Minutes(5)));
  auto reader = jobs_->GetResults(&ctx, req);
  int n = 0;
  pb::Result r;
  while (reader->Read(&r)) {
    EXPECT_EQ(r.raw_output().size(), kRaw) << r.job_id();
    EXPECT_EQ(r.raw_size(), static_cast<int64_t>(kRaw));
    ++n;
  }
  grpc::Status st = reader->Finish();
  done.store(true);
  sampler.join();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(n, kJobs);
  const int64_t growth = peak.load() - before;
  std::cerr << "scheduler VmRSS " << before / (1 << 20) << " MiB before GetResults, peak "
            << peak.load() / (1 << 20) << " MiB: growth " << growth / (1 << 20) << " MiB over "
            << kJobs << " x " << kRaw / (1 << 20) << " MiB raw outputs\n";
  EXPECT_LT(growth, int64_t{64} << 20);
}

// Like Noise, with two- and three-byte characters among the letters, so a
// byte offset and a character offset differ.
std::string Utf8Noise(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pick(0, 27);
  std::string s;
  s.reserve(n + 3);
  while (s.size() < n) {
    const int c = pick(gen);
    if (c == 26) {
      s += "\xc3\xa9";  // é
    } else if (c == 27) {
      s += "\xe2\x82\xac";  // €
    } else {
      s += static_cast<char>('a' + c);
    }
  }
  return s;
}

TEST_F(SchedulerMemoryPgTest, RawOutputStreamsByteIdenticalInBoundedChunks) {
  constexpr int kJobs = 4;
  constexpr size_t kRaw = 4 << 20;
  const int64_t m = Submit(absl::StrCat(
      "name: raw-stream\ncatalog: linux-iommu\nplatform: intel-vtd-snb16c\ncommits: [v4.6]\n"
      "modes: [strict]\nrepeats: ",
      kJobs, "\nworkloads:\n  - name: dma-map-bench\n    params: {threads: 1, seconds: 0.001}\n"));
  ASSERT_GT(m, 0);
  pb::RegisterResponse a = Register(kJobs);
  std::vector<pb::JobLease> leases = Lease(a, kJobs);
  ASSERT_EQ(leases.size(), static_cast<size_t>(kJobs));
  std::vector<std::string> raws;
  for (int i = 0; i < kJobs; ++i) {
    raws.push_back(Utf8Noise(kRaw, 10 + i));
    pb::ReportResultRequest req;
    req.set_agent_id(a.agent_id());
    *req.mutable_lease() = leases[i].lease();
    req.add_samples()->set_metric("throughput");
    req.set_raw_output(raws.back());
    req.set_raw_format("emu-json");
    pb::ReportResultResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(60)));
    grpc::Status st = agents_->ReportResult(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  const pid_t pid = scheduler_->pid();
  const int64_t before = RssBytes(pid);
  ASSERT_GT(before, 0);
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      const int64_t now = RssBytes(pid);
      if (now > peak.load()) peak.store(now);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  struct Read {
    std::string data;
    grpc::Status status;
    size_t largest_chunk = 0;
    int chunks = 0;
    bool offsets_ok = true;
    std::string format;
    int attempt = 0;
  };
  std::vector<Read> reads(kJobs);
  std::vector<std::thread> readers;
  for (int i = 0; i < kJobs; ++i) {
    readers.emplace_back([&, i] {
      pb::GetRawOutputRequest req;
      req.set_job_id(leases[i].job().id());
      req.set_attempt(leases[i].lease().attempt());
      grpc::ClientContext ctx;
      ctx.set_deadline(In(absl::Minutes(2)));
      auto reader = jobs_->GetRawOutput(&ctx, req);
      pb::RawOutputChunk c;
      Read& out = reads[i];
      while (reader->Read(&c)) {
        if (out.chunks == 0) {
          out.format = c.raw_format();
          out.attempt = c.attempt();
        }
        out.offsets_ok = out.offsets_ok && c.offset() == static_cast<int64_t>(out.data.size()) &&
                         c.total_size() == static_cast<int64_t>(raws[i].size());
        out.largest_chunk = std::max(out.largest_chunk, c.data().size());
        out.data += c.data();
        ++out.chunks;
      }
      out.status = reader->Finish();
    });
  }
  for (std::thread& t : readers) t.join();
  done.store(true);
  sampler.join();
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(reads[i].status.ok()) << reads[i].status.error_message();
    EXPECT_TRUE(reads[i].data == raws[i])
        << "raw output " << i << " differs: " << reads[i].data.size() << " bytes of " << kRaw;
    EXPECT_LE(reads[i].largest_chunk, size_t{1} << 20);
    EXPECT_GT(reads[i].chunks, 4);  // > 4 MiB / 1 MiB: it really came in pieces
    EXPECT_TRUE(reads[i].offsets_ok);
    EXPECT_EQ(reads[i].format, "emu-json");
    EXPECT_EQ(reads[i].attempt, leases[i].lease().attempt());
  }
  const int64_t growth = peak.load() - before;
  std::cerr << "scheduler VmRSS " << before / (1 << 20) << " MiB before GetRawOutput, peak "
            << peak.load() / (1 << 20) << " MiB: growth " << growth / (1 << 20) << " MiB over "
            << kJobs << " concurrent x " << kRaw / (1 << 20) << " MiB raw outputs ("
            << reads[0].chunks << " chunks each)\n";
  // The four outputs are 16 MiB; held whole (row, message, write) they
  // would be several times that.
  EXPECT_LT(growth, int64_t{16} << 20);

  pb::GetRawOutputRequest missing;
  missing.set_job_id(leases[0].job().id());
  missing.set_attempt(leases[0].lease().attempt() + 1);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(30)));
  auto reader = jobs_->GetRawOutput(&ctx, missing);
  pb::RawOutputChunk c;
  EXPECT_FALSE(reader->Read(&c));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SchedulerMemoryPgTest, SpecSetIsStoredOnceForAllJobs) {
  // Every model key, at its default: the largest set a spec can give.
  std::string set = "set:\n";
  for (const emu::ParamSpec& p : emu::AllParams()) {
    absl::StrAppend(&set, "  ", p.key, ": \"", p.default_value, "\"\n");
  }
  const int64_t rss_before = RssBytes(scheduler_->pid());
  const int64_t m = Submit(absl::StrCat(
      "name: big-set\ncatalog: linux-iommu\nplatform: intel-vtd-snb16c\ncommits: [v4.6]\n"
      "modes: [off, strict]\nrepeats: 500\n",
      "workloads:\n  - name: dma-map-bench\n    params: {threads: 1, seconds: 0.001}\n", set));
  ASSERT_GT(m, 0);
  const int64_t rss_after = RssBytes(scheduler_->pid());
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM jobs WHERE matrix_id = ", m)), 1000);
  const int64_t job_bytes =
      Sql(absl::StrCat("SELECT sum(pg_column_size(j.*)) FROM jobs j WHERE matrix_id = ", m));
  const int64_t matrix_set_bytes =
      Sql(absl::StrCat("SELECT pg_column_size(model_set) FROM matrices WHERE id = ", m));
  std::cerr << "1000 job rows: " << job_bytes << " bytes; the matrix's set: " << matrix_set_bytes
            << " bytes; scheduler VmRSS growth over the submit: "
            << (rss_after - rss_before) / (1 << 20) << " MiB\n";
  // Once: the matrix holds the set, a job row holds nothing of it (a copy
  // in each would be 1000 of them).
  EXPECT_LT(job_bytes, 1000 * matrix_set_bytes / 2);
  // And every job still runs with all of it.
  pb::RegisterResponse a = Register(3);
  std::vector<pb::JobLease> leases = Lease(a, 3);
  ASSERT_EQ(leases.size(), 3u);
  for (const pb::JobLease& l : leases) {
    const auto& ms = l.job().model_set();
    for (const emu::ParamSpec& p : emu::AllParams()) {
      ASSERT_EQ(ms.count(p.key), 1u) << p.key;
      EXPECT_EQ(ms.at(p.key), p.default_value) << p.key;
    }
  }
}

}  // namespace
}  // namespace farm::scheduler
