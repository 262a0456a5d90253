#pragma once
// Reading a committed checkpoint: a StateSource over its files (so executors and shards import
// straight from it, with the rules of state_source.h), its manifest, and the layout check that
// refuses a checkpoint of another model.
//
// Every extent read is checked against its XXH3 checksum from the manifest (DATA_LOSS naming
// the file, extent and both checksums), so a file corrupted after OpenCheckpoint is still
// caught. Reads go to the files (pread) on demand; nothing is held in memory but the manifest.
// Thread-safe after opening (const methods only).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/env.h"
#include "checkpoint/state.h"
#include "checkpoint/state_source.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

class CheckpointReader : public StateSource {
 public:
  ~CheckpointReader() override;

  const herd::v1::CheckpointManifest& manifest() const { return manifest_; }
  // DIR/<id> of the checkpoint read.
  const std::string& path() const { return path_; }
  // Newer checkpoints that OpenCheckpoint(DIR) passed over, "<id>: <why>" (empty for DIR/<id>).
  const std::vector<std::string>& skipped() const { return skipped_; }

  // StateSource. workers() is the manifest's worker count.
  int workers() const override { return manifest_.workers(); }
  bool Has(std::string_view process, std::string_view name) const override;
  absl::Status Read(std::string_view process, std::string_view name, int64_t total, int64_t offset,
                    std::span<float> out) const override;
  std::optional<std::string> Value(std::string_view process, std::string_view key) const override;

  // The processes that wrote files, in the manifest's order.
  std::vector<std::string> processes() const;
  // Every extent and value of `process`, read and checked (any dtype). NOT_FOUND for an
  // unknown process.
  absl::StatusOr<ProcessState> ReadProcess(std::string_view process) const;
  // The extents of state `name` that `process` holds, read and checked (any dtype; none when
  // it holds none).
  absl::StatusOr<std::vector<Extent>> ReadExtents(std::string_view process,
                                                  std::string_view name) const;
  // Elements of state `name` that `process` holds ("": every process together), from the
  // manifest: no element is counted twice within a file (manifest_check.h), so this is bounded
  // by the files' real sizes.
  int64_t ElementsHeld(std::string_view process, std::string_view name) const;

  // OK when `layout` (the model resumed into) has the tensors of the checkpoint's layout, in
  // the same order with the same element counts (and shapes and dtypes where both name them);
  // FAILED_PRECONDITION naming the first tensor that differs otherwise.
  absl::Status CheckLayout(const std::vector<herd::v1::TensorLayout>& layout) const;

 private:
  friend absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenCheckpoint(Env&, const std::string&);
  CheckpointReader(Env& env, std::string path, herd::v1::CheckpointManifest manifest);
  const herd::v1::CheckpointFile* FileOf(std::string_view process) const;
  // The bytes of `extent` of `file`, checked against its checksum.
  absl::StatusOr<std::string> ReadExtent(const herd::v1::CheckpointFile& file,
                                         const herd::v1::CheckpointExtent& extent) const;

  Env& env_;
  std::string path_;
  herd::v1::CheckpointManifest manifest_;
  // Process -> its file's index in the manifest, and (process, state name) -> the indices of
  // its extents: readers look processes up by rank and tensors by name, many times over, and a
  // manifest may list millions of extents.
  std::map<std::string, int, std::less<>> file_of_;
  std::map<std::pair<std::string, std::string>, std::vector<int>, std::less<>> extents_of_;
  std::map<std::string, int64_t, std::less<>> elements_of_;  // state name -> every process's
  std::vector<std::string> skipped_;
};

// Opens checkpoint `path`:
//  - DIR/<id>: that checkpoint; its manifest is read and checked (its id names DIR/<id>, and
//    CheckCoverage: manifest_check.h) and every file must be present with its size (extents
//    are checked as they are read);
//  - DIR: ResolveCheckpoint(DIR) (catalog.h): the newest checkpoint whose every checksum holds,
//    the newer broken ones in skipped().
// Errors as ResolveCheckpoint / ReadManifest: DATA_LOSS, NOT_FOUND, FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenCheckpoint(Env& env, const std::string& path);

}  // namespace herd::checkpoint
