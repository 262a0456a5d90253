#pragma once
// A bootstrap store (transport/store/store.h) that gives up waiting once the communicator it
// bootstraps is of a membership that no longer exists. In an elastic job two membership
// changes can follow each other closely (a death, then the restarted worker's join): a rank
// that fetched its plan between the two builds the communicator of the first while its peers
// build the second's, and would wait for keys nobody writes until the bootstrap timeout.
// Waiting in slices, it asks `stale()` between them and answers UNAVAILABLE when it says so;
// the session then Recovers to the newer epoch.

#include <functional>
#include <memory>
#include <string>

#include "transport/store/store.h"

namespace herd::worker {

std::shared_ptr<transport::Store> MakeMembershipWatchedStore(
    std::shared_ptr<transport::Store> inner, std::function<bool()> stale, std::string what);

}  // namespace herd::worker
