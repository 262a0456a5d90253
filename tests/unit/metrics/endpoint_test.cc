// The metrics endpoint: what a process records is served as Prometheus text at /metrics on
// the port it bound, with the names, labels and values a scraper expects; bad addresses are
// refused with a message naming them.
#include <gtest/gtest.h>

#include "metrics/endpoint.h"
#include "metrics/process_metrics.h"
#include "metrics/timer.h"
#include "metrics/worker_metrics.h"
#include "tests/support/http_get.h"

namespace herd::metrics {
namespace {

using herd::testing::HttpGet;

std::string Scrape(const Endpoint& endpoint) {
  auto got = HttpGet("127.0.0.1", endpoint.port(), "/metrics");
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return "";
  EXPECT_EQ(got->status, 200);
  return got->body;
}

// The line of `series` (name with its labels as written), e.g. `herd_worker_loss 0.5`.
void ExpectLine(const std::string& text, const std::string& line) {
  EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << "no line '" << line << "' in:\n"
                                                              << text;
}

TEST(MetricsEndpoint, ServesWhatTheWorkerRecorded) {
  auto endpoint = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);
  EXPECT_EQ((*endpoint)->url(),
            "http://127.0.0.1:" + std::to_string((*endpoint)->port()) + "/metrics");

  WorkerMetrics& w = WorkerMetrics::Get();
  w.SetPlan("dear", 3);
  w.RecordIteration({.iteration = 7,
                     .loss = 0.5,
                     .samples = 64,
                     .seconds = 0.25,
                     .forward_seconds = 0.1,
                     .backward_seconds = 0.125,
                     .exposed_comm_seconds = 0.0625});
  w.SentBytes("dear", WorkerMetrics::Peer::kWorker).Increment(4096);
  w.SetPlan("ps_sync", 4);
  w.SentBytes("ps_sync", WorkerMetrics::Peer::kServer).Increment(100);
  { ScopedTimer t(w.push_seconds()); }

  const std::string text = Scrape(**endpoint);
  EXPECT_NE(text.find("# TYPE herd_worker_iterations_total counter"), std::string::npos) << text;
  ExpectLine(text, "herd_worker_iterations_total 1");
  ExpectLine(text, "herd_worker_samples_total 64");
  ExpectLine(text, "herd_worker_iteration 7");
  ExpectLine(text, "herd_worker_loss 0.5");
  ExpectLine(text, "herd_worker_samples_per_second 256");
  ExpectLine(text, "herd_worker_iteration_seconds_total{phase=\"forward\"} 0.1");
  ExpectLine(text, "herd_worker_iteration_seconds_total{phase=\"exposed_comm\"} 0.0625");
  ExpectLine(text, "herd_worker_last_iteration_seconds{phase=\"backward\"} 0.125");
  ExpectLine(text, "herd_worker_sent_bytes_total{mode=\"dear\",peer=\"worker\"} 4096");
  ExpectLine(text, "herd_worker_sent_bytes_total{mode=\"ps_sync\",peer=\"server\"} 100");
  // One-hot: the mode switched, the old one reads 0.
  ExpectLine(text, "herd_worker_mode{mode=\"dear\"} 0");
  ExpectLine(text, "herd_worker_mode{mode=\"ps_sync\"} 1");
  ExpectLine(text, "herd_worker_plan_epoch 4");
  ExpectLine(text, "herd_worker_ps_call_seconds_count{call=\"push\"} 1");
  EXPECT_NE(text.find("herd_worker_ps_call_seconds_bucket{call=\"push\",le=\"0.0001\"}"),
            std::string::npos)
      << text;

  // A second scrape sees later values: the endpoint reads the live registry.
  ProcessMetrics::Get().heartbeats_missed().Increment();
  ProcessMetrics::Get().RecordCheckpointWrite(0.5, 1000);
  const std::string again = Scrape(**endpoint);
  ExpectLine(again, "herd_heartbeats_missed_total 1");
  ExpectLine(again, "herd_checkpoint_written_bytes_total 1000");
  ExpectLine(again, "herd_checkpoint_write_seconds_count 1");
}

TEST(MetricsEndpoint, OnlyMetricsIsServed) {
  auto endpoint = Endpoint::Start("localhost:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  auto got = HttpGet("127.0.0.1", (*endpoint)->port(), "/other");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 404);
}

TEST(MetricsEndpoint, BadAddressesAreRefused) {
  struct Case {
    const char* listen;
    absl::StatusCode code;
    const char* message;
  };
  for (const Case& c : {
           Case{"9100", absl::StatusCode::kInvalidArgument, "no HOST:PORT"},
           Case{"127.0.0.1:", absl::StatusCode::kInvalidArgument, "not a number"},
           Case{"127.0.0.1:70000", absl::StatusCode::kInvalidArgument, "0 to 65535"},
           Case{"example.com:9100", absl::StatusCode::kInvalidArgument, "not an IPv4 address"},
           Case{"[::zz]:9100", absl::StatusCode::kInvalidArgument, "not an IPv6 address"},
           // Not an address of this machine: the bind fails.
           Case{"192.0.2.1:9100", absl::StatusCode::kUnavailable, "cannot serve there"},
       }) {
    auto got = Endpoint::Start(c.listen);
    ASSERT_FALSE(got.ok()) << c.listen;
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    EXPECT_NE(got.status().message().find(c.message), std::string::npos) << got.status();
    EXPECT_NE(got.status().message().find(c.listen), std::string::npos) << got.status();
  }
}

TEST(MetricsEndpoint, APortInUseIsRefused) {
  auto first = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = Endpoint::Start(taken);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find(taken), std::string::npos) << second.status();
}

}  // namespace
}  // namespace herd::metrics
