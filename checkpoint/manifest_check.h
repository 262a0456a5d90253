#pragma once
// What a manifest must say before anything it says is used: the checks every reader runs on
// a manifest whose checksum holds (ReadManifest), so that a manifest written, or re-signed, by
// someone who wants to hurt the reader cannot make it allocate, loop or index by what its
// files do not hold. The checksum guards against damage; these guard against intent.
//
// Checked (DATA_LOSS naming the manifest and the first thing wrong):
//   - the id parses and names the manifest's iteration (>= 0);
//   - the worker and shard counts are within kMaxProcesses (readers look processes up by
//     rank: worker-0 .. worker-(N-1));
//   - names of at most kMaxNameBytes;
//   - the layout: at most kMaxTensors tensors, distinct names, each count in [0,
//     kMaxElements] and equal to its shape's product (when it has one, of at most
//     kMaxTensorRank dimensions), a dtype this build knows (when it names one);
//   - every extent: a known dtype, offset, count and total in [0, kMaxElements] with offset +
//     count <= total, bytes == count * the dtype's size, inside its file after the header;
//     the extents of a file share no byte, and two extents of one name in one file share no
//     element. So the elements a file claims are bounded by its size, which the readers check
//     against the file on disk before they read;
//   - a file's data position (the values data/epoch and data/offset a resumed worker starts
//     its data from), where it has one: integers in [0, kMaxElements].
//
// CheckCoverage is what `export` and a resume rely on besides: every tensor of the layout has
// its parameters, whole, in the checkpoint (one worker's copy, or the shards' ranges together),
// counting only what those readers read: fp32 extents of worker-0 .. worker-(workers-1) and
// shard-0 .. shard-(shards-1).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

// Elements of one tensor (2^40, the scheduler's bound of a tensor and of a model).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;
// The iteration a checkpoint resumes at: 2^62 is beyond any job (146,000 years at a million
// iterations a second) and leaves a resumed job's iteration count far inside int64.
inline constexpr int64_t kMaxIteration = int64_t{1} << 62;
// Workers or shards one manifest may count (above the scheduler's 16384 workers and 4096
// shards; a reader's loops over ranks are bounded by it).
inline constexpr int32_t kMaxProcesses = 1 << 16;
// Tensors of one layout (the scheduler's bound).
inline constexpr int32_t kMaxTensors = 1 << 14;
// Dimensions of one tensor's shape (the scheduler's bound).
inline constexpr int32_t kMaxTensorRank = 16;
// A tensor's or an extent's name ("<kind>/<tensor>@<rank>"; the scheduler's tensor names have
// at most 256 bytes): messages echo them.
inline constexpr size_t kMaxNameBytes = 4096;

// `path` names the manifest in messages.
absl::Status CheckManifest(const herd::v1::CheckpointManifest& manifest, const std::string& path);

// OK when every tensor of the layout has a whole param/<tensor>: in one worker's file, or
// covered by the extents of every process together (a parameter server's shards); DATA_LOSS
// naming the first that has not otherwise.
absl::Status CheckCoverage(const herd::v1::CheckpointManifest& manifest, const std::string& path);

}  // namespace herd::checkpoint
