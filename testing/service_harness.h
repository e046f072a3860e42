// Real-service test harness: private PostgreSQL, Prometheus and Alertmanager
// instances on free 127.0.0.1 ports, each in its own temporary directory, for
// tests that must talk to the real thing instead of a mock.
//
// Lifetime and teardown (what is and is not covered):
//  - Every instance owns its server process and its temp dir. The destructor
//    stops the server and removes the dir, also when a test fails (ASSERT
//    returns from the test body; the fixture/local unique_ptr is destroyed).
//  - Servers are direct children of the test process, in their own process
//    group, with prctl(PR_SET_PDEATHSIG, SIGKILL): if the test process dies
//    (ctest --timeout SIGKILL, crash, Ctrl-C) the kernel kills the server.
//    PostgreSQL's postmaster runs in the foreground (not daemonized by
//    pg_ctl) for exactly this reason; its backends exit on postmaster death.
//    Caveat: PDEATHSIG follows the *thread* that started the server. Start
//    instances from a thread that outlives them (the test's main thread).
//  - A killed test cannot remove its temp dir. Each dir holds a
//    `harness.record` (owner pid + start time, server pid + start time); every
//    Start() sweeps dirs named farm-harness-* whose owner is gone, kills any
//    server still alive there, frees PostgreSQL's SysV segment and deletes the
//    dir. `scripts/farm-services cleanup` does the same from the shell.
//  - Not covered: a kernel-level freeze of the test process (no death, no
//    signal); servers started by other means.
//
// Running as root (CI and this machine): PostgreSQL refuses to run as root, so
// initdb and postgres run as the `postgres` user (credentials dropped in the
// child between fork and exec, which keeps PDEATHSIG intact where runuser's
// extra process would not). The temp base ($FARM_TEST_TMPDIR, else /tmp) must
// be searchable by that user. Prometheus and Alertmanager run as the caller.
//
// Thread-safety: an instance is not thread-safe; one owner calls its methods.
// The free functions (PickFreePort, HttpGet, HttpPost, PollUntil) are
// thread-safe. Instances are non-copyable and non-movable; hold them by
// unique_ptr as returned by Start().
#ifndef TESTING_SERVICE_HARNESS_H_
#define TESTING_SERVICE_HARNESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace farm::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then
// released). Racy by nature; the instances retry with a new port when the
// server reports the address in use. Returns 0 only if no socket can be made.
int PickFreePort();

// The directory under which instances create their temp dirs:
// $FARM_TEST_TMPDIR if set and non-empty, else /tmp.
std::string HarnessTempBase();

struct HttpResponse {
  long status = 0;  // HTTP status code; any code is returned as OK.
  std::string body;
  std::string content_type;
};

// Plain HTTP client (libcurl). Transport failures (refused, timeout) give
// kUnavailable; a non-2xx answer is a successful call with `status` set.
absl::StatusOr<HttpResponse> HttpGet(const std::string& url,
                                     absl::Duration timeout = absl::Seconds(10));
absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& body,
                                      const std::string& content_type = "application/json",
                                      absl::Duration timeout = absl::Seconds(10));
// Percent-encodes everything but RFC 3986 unreserved characters, for query
// strings such as PromQL expressions.
std::string UrlEncode(absl::string_view s);

// Calls `probe` every `interval` until it returns true, returns an error, or
// `timeout` passes. A bounded wait for eventually-true facts (a scrape landed,
// an alert arrived) -- not a timing assertion. On timeout the error names
// `what` and the last probe error, if any.
absl::Status PollUntil(const std::function<absl::StatusOr<bool>()>& probe, absl::Duration timeout,
                       absl::string_view what, absl::Duration interval = absl::Milliseconds(100));

// ---------------------------------------------------------------- PostgreSQL

struct PostgresOptions {
  // Directory holding the binaries (initdb, postgres).
  std::string bin_dir = "/usr/lib/postgresql/15/bin";
  // Database created after the first start. Uri()'s default is "farm"; pass
  // the name explicitly if you change this.
  std::string database = "farm";
  // Durability off: tests do not need it and it makes them fast. Restart()
  // and Kill() still behave like a real server within one machine boot.
  bool fsync = false;
  // Extra postgresql.conf lines, e.g. "max_connections = 200".
  std::vector<std::string> extra_config;
  absl::Duration start_timeout = absl::Seconds(60);
};

class PostgresInstance final {
 public:
  // initdb (trust auth, UTF8, C locale) + postgres on a free loopback port in
  // a fresh temp dir; waits until it accepts connections, then creates
  // options.database. Errors carry the tail of the server/initdb log.
  static absl::StatusOr<std::unique_ptr<PostgresInstance>> Start(
      const PostgresOptions& options = {});

  PostgresInstance(const PostgresInstance&) = delete;
  PostgresInstance& operator=(const PostgresInstance&) = delete;
  // Stops the server (immediate shutdown) and removes the temp dir.
  ~PostgresInstance();

  // postgresql://USER@127.0.0.1:PORT/db (USER is the cluster superuser:
  // `postgres` when run as root, else the caller's login name).
  std::string Uri(const std::string& db = "farm") const;
  int port() const { return port_; }
  const std::string& user() const { return user_; }
  // The temp dir (data dir is dir()/data, server log dir()/server.log).
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }
  // The postmaster's pid (0 when stopped): its backends are its children.
  pid_t pid() const { return pid_; }
  // Last `max_bytes` of the server log, for failure messages.
  std::string LogTail(size_t max_bytes = 4000) const;

  // CREATE DATABASE `name`; returns Uri(name). Lets a suite share one server
  // (e.g. a static instance per test binary) with a fresh database per test.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);

  // Fast shutdown (SIGINT: abort sessions, checkpoint, exit). Idempotent.
  absl::Status Stop();
  // Stop() (if running) then start again on the same port and data dir.
  // Waits until the server accepts connections again.
  absl::Status Restart();
  // Immediate shutdown (SIGQUIT, like `pg_ctl stop -m immediate`): no
  // checkpoint, crash recovery on the next start. For fault tests. Idempotent.
  absl::Status Kill();

 private:
  PostgresInstance() = default;
  absl::Status InitDb();
  // Starts the postmaster on port_ and waits for readiness. An exit because
  // the port was taken returns kAlreadyExists so Start() can retry.
  absl::Status StartServer();
  absl::Status Shutdown(int sig, absl::Duration grace);

  PostgresOptions options_;
  std::string dir_;
  std::string user_;
  uid_t run_uid_ = 0;  // credentials to drop to, when root
  gid_t run_gid_ = 0;
  bool drop_privileges_ = false;
  int port_ = 0;
  pid_t pid_ = 0;
};

// ---------------------------------------------------------------- Prometheus

struct PrometheusOptions {
  std::string binary = "/usr/bin/prometheus";
  // host:port targets scraped by one job (`job_name`) at `scrape_interval`.
  std::vector<std::string> scrape_targets;
  std::string job_name = "farm";
  absl::Duration scrape_interval = absl::Seconds(1);
  absl::Duration evaluation_interval = absl::Seconds(1);
  // Rule files (absolute paths), listed under rule_files: as given.
  std::vector<std::string> rule_files;
  // Contents of one more rule file (YAML, `groups:` ...), written into the
  // temp dir and listed as well; saves tests from managing a file.
  std::string inline_rules;
  // If set (e.g. AlertmanagerInstance::BaseUrl()), firing alerts are sent
  // there; only host:port is used.
  std::string alertmanager_url;
  absl::Duration start_timeout = absl::Seconds(60);
};

class PrometheusInstance final {
 public:
  // Writes prometheus.yml into a fresh temp dir, runs prometheus on a free
  // loopback port (TSDB in the temp dir, --web.enable-lifecycle,
  // --rules.alert.resend-delay=1s so firing alerts reach a just-discovered
  // Alertmanager within seconds) and waits for GET /-/ready to answer 200.
  static absl::StatusOr<std::unique_ptr<PrometheusInstance>> Start(
      const PrometheusOptions& options = {});

  PrometheusInstance(const PrometheusInstance&) = delete;
  PrometheusInstance& operator=(const PrometheusInstance&) = delete;
  ~PrometheusInstance();  // Stop() and remove the temp dir.

  // http://127.0.0.1:PORT, or https:// with tls_cert_file (no trailing slash).
  std::string BaseUrl() const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string LogTail(size_t max_bytes = 4000) const;

  // GET /api/v1/query?query=<promql>; returns the JSON body (HTTP errors and
  // "status":"error" answers become kInternal with the body in the message).
  absl::StatusOr<std::string> Query(const std::string& promql) const;

  // SIGTERM, wait, SIGKILL after a grace period. Idempotent.
  absl::Status Stop();

 private:
  PrometheusInstance() = default;
  PrometheusOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// -------------------------------------------------------------- Alertmanager

struct AlertmanagerOptions {
  std::string binary = "/usr/bin/prometheus-alertmanager";
  // Empty: every alert goes to a receiver named "null" that notifies nobody.
  // Set: the single receiver posts to this webhook URL instead.
  std::string webhook_url;
  // Set: the single receiver mails instead, through this SMTP server
  // ("127.0.0.1:PORT", no TLS, no auth) from email_from to email_to, with
  // the Subject header and text body email_subject / email_text (template
  // text, e.g. '{{ template "iommu_farm.mail.subject" . }}') from the
  // template files (copied beside the configuration); no HTML part.
  std::string email_smarthost, email_from, email_to, email_subject, email_text;
  std::vector<std::string> template_files;
  // Route timers, short so tests see notifications quickly.
  absl::Duration group_wait = absl::Seconds(1);
  absl::Duration group_interval = absl::Seconds(1);
  absl::Duration repeat_interval = absl::Hours(1);
  absl::Duration start_timeout = absl::Seconds(60);
  // Set (both PEM files): HTTPS only, through --web.config.file's
  // tls_server_config; BaseUrl() is then https://127.0.0.1:PORT.
  std::string tls_cert_file, tls_key_file;
  // Set: every request needs HTTP basic auth as this user; the web config
  // holds its bcrypt hash (basic_auth_users).
  std::string basic_auth_user, basic_auth_bcrypt;
};

class AlertmanagerInstance final {
 public:
  // Writes alertmanager.yml into a fresh temp dir, runs alertmanager on a
  // free loopback port with clustering disabled (--cluster.listen-address=)
  // and storage in the temp dir; waits for GET /-/ready to answer 200.
  static absl::StatusOr<std::unique_ptr<AlertmanagerInstance>> Start(
      const AlertmanagerOptions& options = {});

  AlertmanagerInstance(const AlertmanagerInstance&) = delete;
  AlertmanagerInstance& operator=(const AlertmanagerInstance&) = delete;
  ~AlertmanagerInstance();  // Stop() and remove the temp dir.

  // http://127.0.0.1:PORT, or https:// with tls_cert_file (no trailing slash).
  std::string BaseUrl() const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string LogTail(size_t max_bytes = 4000) const;

  // SIGTERM, wait, SIGKILL after a grace period. Idempotent.
  absl::Status Stop();
  // Stop(), then the same binary, configuration, storage directory and port
  // again (what Alertmanager keeps across a restart: silences and the
  // notification log; not the alerts themselves). Waits for /-/ready.
  absl::Status Restart();

 private:
  AlertmanagerInstance() = default;
  absl::Status Run(int fixed_port);
  AlertmanagerOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace farm::testing

#endif  // TESTING_SERVICE_HARNESS_H_
