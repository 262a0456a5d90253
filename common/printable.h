#pragma once
// Text that came from a file or a peer, made safe to print to an operator's terminal: control
// bytes (C0, DEL, and the C1 range as UTF-8 encodes it) become \xNN, so a name or a mode in a
// hostile checkpoint manifest cannot move the cursor, rewrite a line already printed or
// retitle the window. Everything else, UTF-8 included, is kept as it is.

#include <string>
#include <string_view>

namespace herd {

inline std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F
      escape(c);
      escape(next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace herd
