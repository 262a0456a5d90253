#include "proto/rpc/grpc_support.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace herd::rpc {

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

Deadline CallDeadline(const grpc::ServerContextBase* ctx, std::chrono::nanoseconds max_wait,
                      int64_t timeout_ms) {
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
      ctx->deadline() - std::chrono::system_clock::now());
  left = std::min(left, max_wait);
  // A negative timeout_ms is no wait at all (answered at once: done, or DEADLINE_EXCEEDED), not
  // the call's whole deadline.
  if (timeout_ms < 0) left = std::chrono::nanoseconds(0);
  // Compared in milliseconds: a peer's huge timeout_ms must not overflow the conversion.
  if (timeout_ms > 0 &&
      timeout_ms < std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) {
    left = std::chrono::milliseconds(timeout_ms);
  }
  return Deadline::After(std::max(left, std::chrono::nanoseconds(0)));
}

absl::StatusOr<std::string> ReadFileText(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrFormat("cannot read the %s file %s", what, path));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFileText(path, "token");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("the token file %s is empty", path));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFromFiles(
    const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert and --tls-key (PEM files); give both or neither");
  }
  if (cert_file.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadFileText(cert_file, "TLS certificate");
  if (!cert.ok()) return cert.status();
  auto key = ReadFileText(key_file, "TLS key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    bool tls, const std::string& ca_file) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!ca_file.empty()) {
    auto roots = ReadFileText(ca_file, "TLS CA");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  return grpc::SslCredentials(ssl);
}

BearerTokenCheck::BearerTokenCheck(const std::string& token, std::string service)
    : expected_(token.empty() ? "" : "Bearer " + token), service_(std::move(service)) {}

grpc::Status BearerTokenCheck::Check(const grpc::ServerContextBase* ctx) const {
  if (expected_.empty()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  // Two credentials (one right, one wrong) are refused whatever their order: a proxy or client
  // that adds its own header must not have one of them win silently.
  if (md.count("authorization") > 1) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrFormat("the call carries %d authorization headers; %s takes "
                                        "exactly one bearer token",
                                        md.count("authorization"), service_));
  }
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrFormat("%s requires a bearer token: pass --token-file", service_));
  }
  const std::string_view got(it->second.data(), it->second.size());
  // Compare every byte whatever the first difference, so timing does not leak the token.
  unsigned diff = got.size() != expected_.size();
  for (size_t i = 0; i < got.size() && i < expected_.size(); ++i) diff |= got[i] ^ expected_[i];
  if (diff != 0) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        absl::StrFormat("the bearer token is wrong: check --token-file against %s's", service_));
  }
  return grpc::Status::OK;
}

}  // namespace herd::rpc
