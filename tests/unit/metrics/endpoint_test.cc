// The metrics endpoint: what a process records is served as Prometheus text at /metrics on
// the port it bound, with the names, labels and values a scraper expects; bad addresses are
// refused with a message naming them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

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

// A TCP connection to 127.0.0.1:port that has sent `head` (maybe nothing); -1 when it could
// not connect.
int Connect(int port, const std::string& head = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  if (!head.empty()) ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  return fd;
}

// Whether the server closed `fd` (a read sees the end, or the connection is reset) within
// `ms`, draining whatever it answered first.
bool ClosedWithin(int fd, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

TEST(MetricsEndpoint, AScrapeAnswersAtOnceWithAHundredIdleConnectionsOpen) {
  auto endpoint = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  ProcessMetrics::Get().heartbeats_missed().Increment();  // something to serve
  // A hundred clients that connect and say nothing, or only half a request.
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    const int fd = Connect(port, i % 2 == 0 ? "" : "GET /metr");
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  // Prometheus gives up after 10 s; a scrape must not wait behind them.
  for (int scrape = 0; scrape < 3; ++scrape) {
    const auto begin = std::chrono::steady_clock::now();
    auto got = HttpGet("127.0.0.1", port, "/metrics", 5000);
    const auto took = std::chrono::steady_clock::now() - begin;
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->status, 200);
    EXPECT_NE(got->body.find("# TYPE"), std::string::npos) << got->body;
    EXPECT_LT(took, std::chrono::seconds(1))
        << "scrape " << scrape << " took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  }
  for (int fd : idle) ::close(fd);
}

TEST(MetricsEndpoint, AClientThatNeverFinishesItsRequestIsCutOffAtTheHeaderDeadline) {
  auto endpoint = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  // Silent, and slow-loris: a header line every 300 ms, never the blank line that ends them.
  const int silent = Connect(port);
  const int slow = Connect(port, "GET /metrics HTTP/1.1\r\n");
  ASSERT_GE(silent, 0);
  ASSERT_GE(slow, 0);
  const auto begin = std::chrono::steady_clock::now();
  bool slow_closed = false;
  for (int i = 0; i < 20 && !slow_closed; ++i) {
    const std::string line = "X-Pad-" + std::to_string(i) + ": 1\r\n";
    if (::send(slow, line.data(), line.size(), MSG_NOSIGNAL) < 0) break;
    slow_closed = ClosedWithin(slow, 300);
  }
  const auto slow_took = std::chrono::steady_clock::now() - begin;
  EXPECT_TRUE(slow_closed || ClosedWithin(slow, 100));
  EXPECT_LT(slow_took, std::chrono::milliseconds(3500));
  EXPECT_TRUE(ClosedWithin(silent, 1000));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(4000));
  ::close(silent);
  ::close(slow);
  // And the endpoint still serves.
  auto got = HttpGet("127.0.0.1", port, "/metrics", 2000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
}

TEST(MetricsEndpoint, BeyondTheBoundAScrapeWaitsAtMostTheHeaderDeadline) {
  auto endpoint = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  // More silent clients than the endpoint keeps: it holds kMaxConnections descriptors, the
  // rest wait in the listen queue; every silent one is cut at the header deadline, so a scrape
  // behind them all is answered within about that.
  std::vector<int> held;
  for (int i = 0; i < Endpoint::kMaxConnections + 20; ++i) {
    const int fd = Connect(port);
    if (fd >= 0) held.push_back(fd);
  }
  const auto begin = std::chrono::steady_clock::now();
  auto got = HttpGet("127.0.0.1", port, "/metrics", 8000);
  const auto took = std::chrono::steady_clock::now() - begin;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_LT(took, Endpoint::kHeadDeadline + std::chrono::milliseconds(1500))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  for (int fd : held) ::close(fd);
}

TEST(MetricsEndpoint, HeadAndOtherMethodsAnswerAsBefore) {
  auto endpoint = Endpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  auto exchange = [&](const std::string& request) {
    const int fd = Connect(port, request);
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  };
  const std::string head = exchange("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("# TYPE"), std::string::npos) << head;  // no body
  const std::string post = exchange("POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  const std::string query = exchange("GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(query.rfind("HTTP/1.1 200", 0), 0u) << query;
  EXPECT_NE(query.find("text/plain; version=0.0.4"), std::string::npos) << query;
}

}  // namespace
}  // namespace herd::metrics
