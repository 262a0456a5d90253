// A real Prometheus (Debian's `prometheus` server) scrapes a running `herd local` job: it is
// pointed at the targets file herd local writes (STATE/metrics-targets.json, file_sd), scrapes
// every 250 ms on loopback, keeps its storage in a temporary directory, and answers queries of
// herd's metrics through its HTTP API (/api/v1/query) with values above zero. Then `herd plot`
// draws the job's history. Skipped, saying why, where the prometheus binary is missing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/child_processes.h"
#include "common/json.h"
#include "common/temp_dir.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/support/http_get.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using herd::testing::HttpGet;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A loopback port free now (bound with port 0, closed again) for Prometheus to listen on.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The value of the first series of an instant query, or an error saying what came back.
absl::StatusOr<double> Query(int port, const std::string& promql) {
  std::string target = "/api/v1/query?query=";
  for (unsigned char c : promql) {
    if (std::isalnum(c) || c == '_') {
      target += static_cast<char>(c);
    } else {
      target += absl::StrFormat("%%%02X", c);
    }
  }
  auto got = HttpGet("127.0.0.1", port, target);
  if (!got.ok()) return got.status();
  auto body = json::ParseObject(got->body);
  if (!body.ok()) return body.status();
  auto status = body->GetString("status");
  if (!status.ok() || *status != "success") {
    return absl::InternalError("query " + promql + ": " + got->body);
  }
  const json::Value* data = body->Find("data");
  const json::Object* d = data != nullptr ? data->object() : nullptr;
  const json::Value* result = d != nullptr ? d->Find("result") : nullptr;
  const json::Array* series = result != nullptr ? result->array() : nullptr;
  if (series == nullptr || series->empty()) {
    return absl::NotFoundError("query " + promql + ": no series yet: " + got->body);
  }
  // {"metric": {...}, "value": [unix_seconds, "12"]}
  const json::Object* first = (*series)[0].object();
  const json::Value* value = first != nullptr ? first->Find("value") : nullptr;
  const json::Array* pair = value != nullptr ? value->array() : nullptr;
  double v = 0;
  if (pair == nullptr || pair->size() != 2 || (*pair)[1].string() == nullptr ||
      !absl::SimpleAtod(*(*pair)[1].string(), &v)) {
    return absl::InternalError("query " + promql + ": unexpected answer " + got->body);
  }
  return v;
}

TEST(Prometheus, ScrapesAHerdLocalJobAndAnswersQueries) {
  if (::access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is not installed (apt-get install prometheus)";
  }
  auto dir = TempDir::Create("herd-prometheus-test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string state = dir->path() + "/state";
  fs::create_directories(state);  // watched by Prometheus before herd local writes into it
  const std::string config = dir->path() + "/prometheus.yml";
  std::ofstream(config) << absl::StrFormat(
      "global:\n"
      "  scrape_interval: 250ms\n"
      "  scrape_timeout: 200ms\n"
      "  evaluation_interval: 1s\n"
      "scrape_configs:\n"
      "  - job_name: herd\n"
      "    file_sd_configs:\n"
      "      - files: ['%s/metrics-targets.json']\n"
      "        refresh_interval: 1s\n",
      state);
  const int port = FreePort();
  ASSERT_GT(port, 0);
  ChildProcesses children;
  auto prom = children.Start(
      {.name = "prometheus",
       .argv = {kPrometheus, "--config.file=" + config,
                "--storage.tsdb.path=" + dir->path() + "/tsdb",
                absl::StrFormat("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn"},
       .log_path = dir->path() + "/prometheus.log"});
  ASSERT_TRUE(prom.ok()) << prom.status();
  const auto ready_by = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    auto ready = HttpGet("127.0.0.1", port, "/-/ready", 1000);
    if (ready.ok() && ready->status == 200) break;
    while (children.PollExit()) {
    }
    ASSERT_TRUE(children.running(*prom)) << children.LogTail("prometheus", 30);
    ASSERT_LT(std::chrono::steady_clock::now(), ready_by) << "prometheus not ready within 60 s:\n"
                                                          << children.LogTail("prometheus", 30);
    std::this_thread::sleep_for(200ms);
  }

  // A short ps_sync job (every role: scheduler, a shard, 2 workers), 30 iterations.
  auto job = children.Start(
      {.name = "herd local",
       .argv = {HERD_BINARY, "local", "--workers", "2", "--mode", "ps_sync", "--model", "mlp",
                "--epochs", "1", "--train-samples", "3840", "--state", state},
       .log_path = dir->path() + "/herd-local.log"});
  ASSERT_TRUE(job.ok()) << job.status();

  // Polled while the job runs and a little after: each query must see a value above zero.
  const std::string queries[] = {
      "max_over_time(herd_worker_iterations_total{process=\"worker-0\"}[10m])",
      "max_over_time(herd_worker_samples_total{role=\"worker\"}[10m])",
      "max_over_time(herd_scheduler_job_iterations_total{job_name=\"local\"}[10m])",
      "max_over_time(herd_shard_rounds_total{mode=\"ps_sync\"}[10m])",
      "max_over_time(herd_worker_sent_bytes_total{mode=\"ps_sync\",peer=\"server\"}[10m])",
  };
  std::map<std::string, double> seen;
  std::string last_error;
  std::optional<std::chrono::steady_clock::time_point> job_ended;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (seen.size() < std::size(queries)) {
    for (const std::string& q : queries) {
      if (seen.contains(q)) continue;
      auto v = Query(port, q);
      if (v.ok() && *v > 0) {
        seen[q] = *v;
      } else {
        last_error = v.ok() ? q + " = " + std::to_string(*v) : std::string(v.status().message());
      }
    }
    while (children.PollExit()) {
    }
    if (!children.running(*job) && !job_ended) job_ended = std::chrono::steady_clock::now();
    // The last scrapes land within a second of the job's end.
    if ((job_ended && std::chrono::steady_clock::now() - *job_ended > 5s) ||
        std::chrono::steady_clock::now() > deadline) {
      break;
    }
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(seen.size(), std::size(queries))
      << "last: " << last_error << "\nherd local:\n"
      << children.LogTail("herd local", 30) << "\nprometheus:\n"
      << children.LogTail("prometheus", 30);
  for (const auto& [q, v] : seen) std::printf("%s = %g\n", q.c_str(), v);

  const auto exit_by = std::chrono::steady_clock::now() + 120s;
  while (children.running(*job) && std::chrono::steady_clock::now() < exit_by) {
    std::this_thread::sleep_for(100ms);
    while (children.PollExit()) {
    }
  }
  ASSERT_FALSE(children.running(*job)) << children.LogTail("herd local", 30);
  ASSERT_EQ(children.status(*job).value_or(-1), 0) << children.LogTail("herd local", 30);
  EXPECT_NE(scheduler::testing::ReadFile(dir->path() + "/herd-local.log").find("metrics at"),
            std::string::npos);

  // The job's history, drawn.
  auto plot = scheduler::testing::RunHerd({"plot", state, "--out", dir->path() + "/plot.png"});
  EXPECT_EQ(plot.rc, 0) << plot.out;
  EXPECT_NE(plot.out.find("plot of job local (30 iterations)"), std::string::npos) << plot.out;
}

}  // namespace
}  // namespace herd
