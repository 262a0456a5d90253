// `herd local` with a bearer token and TLS: the scheduler and the shards serve TLS only and
// require the token of every call, so a ps_sync job that completes shows that every process
// (the workers to the shards included) spoke TLS and sent the token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

using scheduler::testing::CliResult;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "herd-local-security-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

// A self-signed certificate for 127.0.0.1, as the scheduler's TLS test makes one.
bool MakeCertificate(const std::string& cert, const std::string& key) {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(LocalSecurity, APsSyncJobRunsWithATokenAndTlsEverywhere) {
  TempDir dir;
  const std::string cert = dir.path + "/cert.pem", key = dir.path + "/key.pem";
  if (!MakeCertificate(cert, key)) GTEST_SKIP() << "openssl cannot make a test certificate";
  const std::string token = dir.path + "/token";
  std::ofstream(token) << "s3cret-local\n";
  const std::string state = dir.path + "/state";
  CliResult r = RunHerd({"local", "--workers", "2", "--mode", "ps_sync", "--model", "mlp",
                         "--epochs", "1", "--train-samples", "1280", "--state", state,
                         "--token-file", token, "--tls-cert", cert, "--tls-key", key});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  // The scheduler and the shard said how they served.
  const std::string sched = ReadFile(state + "/logs/scheduler.log");
  EXPECT_NE(sched.find("TLS, bearer token required"), std::string::npos) << sched;
  const std::string shard = ReadFile(state + "/logs/server-0.log");
  EXPECT_NE(shard.find("TLS"), std::string::npos) << shard;
  EXPECT_EQ(shard.find("plaintext"), std::string::npos) << shard;
}

TEST(LocalSecurity, HalfATlsConfigurationIsRefusedBeforeAnythingStarts) {
  TempDir dir;
  const std::string cert = dir.path + "/cert.pem";
  std::ofstream(cert) << "not used\n";
  CliResult r = RunHerd({"local", "--workers", "1", "--mode", "allreduce", "--model", "mlp",
                         "--state", dir.path + "/state", "--tls-cert", cert});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--tls-cert and --tls-key go together"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.path + "/state/logs/scheduler.log"));
}

}  // namespace
}  // namespace herd
