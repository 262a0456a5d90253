#pragma once
// The state file of one process, <process>.state (docs/checkpoint.md, "Format"):
//
//   [0, 64)          header: "HERDSTAT", u32 format version, u32 0, u64 extent count, zeros
//   [64, ...)        the extents' bytes, in the order of the process's state, each starting at a
//                    multiple of 64 (zero padding between them)
//
// Everything that describes the bytes (names, ranges, byte offsets, checksums, the process's
// values) is in the CheckpointFile record, which goes into the manifest: the file holds data
// only. Checksums: XXH3-64 of each extent's bytes and of the whole file.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/env.h"
#include "checkpoint/state.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

inline constexpr char kStateMagic[8] = {'H', 'E', 'R', 'D', 'S', 'T', 'A', 'T'};
inline constexpr int64_t kStateHeaderBytes = 64;
inline constexpr int64_t kExtentAlignment = 64;

// The size of the file `state` makes.
int64_t StateFileBytes(const ProcessState& state);

// Writes `state` to `path` (created or truncated), fsyncs it, and returns its record with
// `file` set to `file_name`. INVALID_ARGUMENT for an extent whose range or size is wrong,
// RESOURCE_EXHAUSTED when the disk has less room than the file needs (checked first), the
// Env's error otherwise; on error the partial file is removed (best effort).
absl::StatusOr<herd::v1::CheckpointFile> WriteStateFileAt(Env& env, const std::string& path,
                                                          const std::string& file_name,
                                                          const ProcessState& state);

// Reads all of `file` in checkpoint `checkpoint_path` once and checks its size, its checksum
// and every extent's bounds and checksum. DATA_LOSS naming the file, the extent, the expected
// and the actual value; an extent's error wins over the file's.
absl::Status VerifyStateFile(Env& env, const std::string& checkpoint_path,
                             const herd::v1::CheckpointFile& file);

// The bytes of `extent` of `file` (opened as `path`), checked against the extent's checksum.
absl::StatusOr<std::string> ReadExtent(const RandomAccessFile& reader, const std::string& path,
                                       const herd::v1::CheckpointExtent& extent);

// "'param/fc1.weight' [0, 100) at bytes [64, 464)": an extent in messages.
std::string DescribeExtent(const herd::v1::CheckpointExtent& extent);

}  // namespace herd::checkpoint
