#include "checkpoint/checksum.h"

#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {

uint64_t Checksum(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

struct StreamingChecksum::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

StreamingChecksum::StreamingChecksum() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(state_->xxh);
}
StreamingChecksum::~StreamingChecksum() = default;
StreamingChecksum::StreamingChecksum(StreamingChecksum&&) noexcept = default;
StreamingChecksum& StreamingChecksum::operator=(StreamingChecksum&&) noexcept = default;

void StreamingChecksum::Update(std::string_view data) {
  XXH3_64bits_update(state_->xxh, data.data(), data.size());
}

uint64_t StreamingChecksum::Digest() const { return XXH3_64bits_digest(state_->xxh); }

std::string ChecksumHex(uint64_t checksum) { return absl::StrFormat("0x%016x", checksum); }

}  // namespace herd::checkpoint
