#pragma once
// The name a shard registers under when `herd server` is given no --name: "server-HOST:STATE"
// (the state directory, absolute), so that a restart on the same directory retakes its shard
// id. A node name is at most 128 printable bytes without spaces (scheduler/limits.h); a state
// path that would break that (a space, a control byte, more than about 115 bytes) gives
// "server-HOST:...<the path's end, spaces as _>#<FNV-1a 64 of the whole name, hex>" instead:
// still one name per host and directory, the same at every restart, and valid.

#include <string>

namespace herd::server {

std::string DefaultShardName(const std::string& host, const std::string& state_dir);

}  // namespace herd::server
