#pragma once
// Surgery on RocksDB write-ahead logs, for the tests that damage a state on purpose: find the
// newest log, the offsets where its write batches end (a cut there leaves a whole, shorter log
// that replays "cleanly"), and flip bytes in it.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace herd::testing {

// The newest non-empty write-ahead log (*.log) of `dir` ("" when none).
std::filesystem::path NewestLog(const std::filesystem::path& dir);

// The offsets where the write batches of a RocksDB write-ahead log end (its format: 32 KiB
// blocks of records, each a 7-byte header -- crc32c, little-endian length, type -- and its
// bytes; a batch is one FULL record or FIRST, MIDDLE..., LAST; a block's last < 7 bytes are
// padding).
std::vector<uint64_t> BatchEnds(const std::filesystem::path& log);

// Flips bytes in the middle of the newest non-empty write-ahead log of `dir`; its file name
// ("" when there is none).
std::string DamageLog(const std::filesystem::path& dir);

}  // namespace herd::testing
