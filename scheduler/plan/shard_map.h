#pragma once
// The shard map lives in plan/shard_map.h. This header only keeps the old include path working
// for bench/ps/ps_bench.cc; new code includes plan/shard_map.h. Remove it once bench/ does.

#include "plan/shard_map.h"
