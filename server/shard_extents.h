#pragma once
// Reading the parameter-server shards' part of a training state (server/engine.h,
// Engine::ExportState): each shard saved its keys' element ranges of a tensor, and listed them
// in its value "shard/keys". The shards' engines read it back at another shard map, and the
// workers' executors read the optimizer state that the shards kept (a checkpoint of a ps_*
// mode resumed in a collective mode), both through these.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/state_source.h"

namespace herd::server {

// "shard-1": the process name of a shard's state.
using checkpoint::ShardProcess;

// A key of the exporting run's shard map.
struct SavedKey {
  int shard = 0;
  std::string tensor;
  int64_t offset = 0, count = 0;
};

// The keys every exporting shard held ("shard-0", "shard-1", ... until the first missing).
// Empty when the state has no shards. DATA_LOSS for a "shard/keys" that does not parse.
absl::StatusOr<std::vector<SavedKey>> SavedShardKeys(const checkpoint::StateSource& from);

// Elements [offset, offset + out.size()) of `name`, which belongs to tensor `tensor` of
// `total` elements, from the shards that held them. false when no shard holds any of `name`;
// DATA_LOSS when they cover the range only in part; errors of StateSource::Read.
absl::StatusOr<bool> ReadFromShards(const checkpoint::StateSource& from,
                                    const std::vector<SavedKey>& keys, const std::string& tensor,
                                    const std::string& name, int64_t total, int64_t offset,
                                    std::span<float> out);

// A shard's integer value (e.g. "shard/version"), or nullopt.
std::optional<int64_t> ShardIntValue(const checkpoint::StateSource& from, int shard,
                                     const std::string& key);

}  // namespace herd::server
