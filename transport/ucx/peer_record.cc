#include "transport/ucx/peer_record.h"

#include <sys/stat.h>

#include <ucs/sys/uid.h>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace herd::transport::ucx {
namespace {

// "herd-ucx 1\n<host>\n<pid>\n<address bytes>"; the version goes up if the layout changes.
constexpr std::string_view kMagic = "herd-ucx 1";

// The inode of /proc/self/ns/<kind>: equal for processes in the same namespace.
uint64_t NamespaceId(const char* kind) {
  struct stat st {};
  std::string path = absl::StrFormat("/proc/self/ns/%s", kind);
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// Splits off the text up to the next '\n'; false if there is none.
bool NextLine(std::string_view& rest, std::string_view& line) {
  size_t nl = rest.find('\n');
  if (nl == std::string_view::npos) return false;
  line = rest.substr(0, nl);
  rest.remove_prefix(nl + 1);
  return true;
}

}  // namespace

std::string LocalHostIdentity() {
  if (const char* forced = std::getenv("HERD_UCX_HOST_ID"); forced != nullptr && *forced != 0) {
    return forced;
  }
  return absl::StrFormat("%016x-%x-%x", ucs_get_system_id(), NamespaceId("ipc"),
                         NamespaceId("pid"));
}

std::string EncodePeerRecord(const PeerRecord& record) {
  std::string out = absl::StrFormat("%s\n%s\n%d\n", kMagic, record.host, record.pid);
  out += record.worker_address;
  return out;
}

absl::StatusOr<PeerRecord> DecodePeerRecord(std::string_view bytes, std::string_view what) {
  std::string_view rest = bytes, magic, host, pid;
  if (!NextLine(rest, magic) || magic != kMagic || !NextLine(rest, host) || !NextLine(rest, pid)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not a herd UCX address record (expected it to start with '%s', got %d bytes)", what,
        kMagic, bytes.size()));
  }
  PeerRecord record;
  record.host = std::string(host);
  if (!absl::SimpleAtoi(std::string(pid), &record.pid) || rest.empty() || host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is malformed (pid '%s', %d address bytes)", what, pid, rest.size()));
  }
  record.worker_address = std::string(rest);
  return record;
}

}  // namespace herd::transport::ucx
