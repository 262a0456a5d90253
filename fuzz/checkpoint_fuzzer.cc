// libFuzzer target: the checkpoint reader, as a resumed job meets a checkpoint directory that
// someone else wrote (docs/checkpoint.md, "Format"). The input is
//
//   flags (1 byte)  manifest payload length (2 bytes, little-endian)  payload  state-file bytes
//
// The payload becomes DIR/it-00000001/MANIFEST: framed with a valid checksum (flags bit 0
// clear) or written as it is (set: the framing itself is fuzzed). Every file the manifest
// names gets the state-file bytes. With flags bit 1 set, the harness first re-parses the
// payload and sets every extent's and file's checksum to that of the bytes it describes, so
// inputs reach what lies behind the checksums (ranges, dtypes, counts). Whatever the bytes,
// VerifyCheckpoint, OpenCheckpoint and the reads that follow (the export's ModelParameters
// too) answer a status and never crash, read outside the files or allocate beyond what they
// hold.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checkpoint/catalog.h"
#include "checkpoint/checksum.h"
#include "checkpoint/env.h"
#include "checkpoint/export.h"
#include "checkpoint/manifest_file.h"
#include "checkpoint/reader.h"
#include "common/temp_dir.h"

namespace {

namespace ck = herd::checkpoint;

// Sets the checksums of `m` to those of `body`'s bytes where an extent's range lies inside it.
void FixChecksums(herd::v1::CheckpointManifest& m, std::string_view body) {
  for (auto& file : *m.mutable_files()) {
    file.set_bytes(static_cast<int64_t>(body.size()));
    file.set_checksum(ck::Checksum(body));
    for (auto& e : *file.mutable_extents()) {
      if (e.byte_offset() >= 0 && e.bytes() >= 0 &&
          static_cast<uint64_t>(e.byte_offset()) <= body.size() &&
          static_cast<uint64_t>(e.bytes()) <= body.size() - e.byte_offset()) {
        e.set_checksum(ck::Checksum(body.substr(e.byte_offset(), e.bytes())));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const herd::TempDir* root = new herd::TempDir(*herd::TempDir::Create("herd-ckpt-fuzz"));
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t len = std::min<size_t>(data[1] | (size_t{data[2]} << 8), size - 3);
  std::string payload(reinterpret_cast<const char*>(data + 3), len);
  const std::string_view body(reinterpret_cast<const char*>(data + 3 + len), size - 3 - len);

  ck::Env& env = ck::PosixEnv();
  const std::string path = ck::JoinPath(root->path(), "it-00000001");
  (void)env.RemoveAll(path);
  if (!env.CreateDirs(path).ok()) std::abort();
  if (flags & 2) {
    herd::v1::CheckpointManifest m;
    if (m.ParseFromString(payload)) {
      // The id and iteration a reader checks first (manifest_check.h), so the rest is reached.
      m.set_id("it-00000001");
      m.set_iteration(1);
      FixChecksums(m, body);
      payload = m.SerializeAsString();
    }
  }
  std::string manifest_bytes = payload;
  if ((flags & 1) == 0) {
    herd::v1::CheckpointManifest m;
    if (!m.ParseFromString(payload)) return 0;  // nothing behind a valid frame to reach
    manifest_bytes = ck::EncodeManifest(m);
  }
  if (!env.WriteFile(ck::JoinPath(path, "MANIFEST"), manifest_bytes).ok()) std::abort();
  // The files the manifest names (ReadManifest refuses names that leave the directory).
  if (auto m = ck::ReadManifest(env, path); m.ok()) {
    int written = 0;
    for (const auto& file : m->files()) {
      if (++written > 8) break;
      (void)env.WriteFile(ck::JoinPath(path, file.file()), body);
    }
  }
  (void)ck::VerifyCheckpoint(env, path);
  auto reader = ck::OpenCheckpoint(env, path);
  if (!reader.ok()) return 0;
  for (const std::string& process : (*reader)->processes()) {
    auto state = (*reader)->ReadProcess(process);
    (void)state;
  }
  (void)(*reader)->CheckLayout({});
  // What `herd checkpoint export` does with it: never an allocation beyond what the files hold.
  (void)ck::ModelParameters(**reader);
  return 0;
}
