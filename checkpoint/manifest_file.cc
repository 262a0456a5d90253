#include "checkpoint/manifest_file.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "checkpoint/checksum.h"

namespace herd::checkpoint {
namespace {

constexpr char kManifestMagic[8] = {'H', 'E', 'R', 'D', 'M', 'A', 'N', 'I'};
constexpr size_t kHead = sizeof(kManifestMagic) + sizeof(uint64_t);
constexpr size_t kTail = sizeof(uint64_t);

void PutU64(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out.append(b, 8);
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

std::string EncodeManifest(const herd::v1::CheckpointManifest& manifest) {
  std::string payload;
  manifest.SerializeToString(&payload);
  std::string out(kManifestMagic, sizeof(kManifestMagic));
  PutU64(out, payload.size());
  out += payload;
  PutU64(out, Checksum(out));
  return out;
}

absl::StatusOr<herd::v1::CheckpointManifest> DecodeManifest(std::string_view data,
                                                            const std::string& path) {
  if (data.size() < kHead + kTail || std::memcmp(data.data(), kManifestMagic, 8) != 0) {
    return absl::DataLossError(
        absl::StrFormat("%s: not a checkpoint manifest (%d bytes, no header)", path, data.size()));
  }
  const uint64_t length = GetU64(data.data() + 8);
  if (length != data.size() - kHead - kTail) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated or extended: the header says %d bytes of manifest, the file holds %d", path,
        length, data.size() - kHead - kTail));
  }
  const uint64_t expected = GetU64(data.data() + data.size() - kTail);
  const uint64_t actual = Checksum(data.substr(0, data.size() - kTail));
  if (expected != actual) {
    return absl::DataLossError(
        absl::StrFormat("%s: checksum expected %s, the bytes differ", path, ChecksumHex(expected)));
  }
  herd::v1::CheckpointManifest manifest;
  if (!manifest.ParseFromArray(data.data() + kHead, static_cast<int>(length))) {
    return absl::DataLossError(absl::StrFormat("%s: the manifest does not parse", path));
  }
  return manifest;
}

}  // namespace herd::checkpoint
