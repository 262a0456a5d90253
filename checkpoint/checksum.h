#pragma once
// The checksum of checkpoint files: XXH3-64 (libxxhash), chosen for speed (tens of GB/s, well
// above any disk) with a 64-bit result that catches any corruption a disk or a copy makes.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace herd::checkpoint {

uint64_t Checksum(std::string_view data);

// The same checksum over data given in pieces.
class StreamingChecksum {
 public:
  StreamingChecksum();
  ~StreamingChecksum();
  StreamingChecksum(StreamingChecksum&&) noexcept;
  StreamingChecksum& operator=(StreamingChecksum&&) noexcept;
  void Update(std::string_view data);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// "0x0123456789abcdef", as error messages and the CLI print checksums.
std::string ChecksumHex(uint64_t checksum);

}  // namespace herd::checkpoint
