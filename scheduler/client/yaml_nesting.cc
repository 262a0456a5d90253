#include "scheduler/client/yaml_nesting.h"

#include <vector>

#include "absl/strings/str_format.h"

namespace herd::scheduler {

absl::Status CheckYamlNesting(std::string_view text, int max_depth) {
  std::vector<size_t> indents;  // the block levels open at the start of the current line
  int flow = 0;                 // open [ and {
  char quote = 0;               // the open quote, if any
  int line = 1;
  size_t i = 0;
  auto too_deep = [&](int depth) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job spec, line %d: collections nest %d deep, more than %d; a job spec needs 3", line,
        depth, max_depth));
  };
  while (i < text.size()) {
    // Start of a line: its block level, unless inside a flow collection or a quoted scalar.
    if (flow == 0 && quote == 0) {
      size_t col = 0;
      while (i < text.size() && text[i] == ' ') ++i, ++col;
      const bool blank = i >= text.size() || text[i] == '\n' || text[i] == '#' || text[i] == '\r';
      if (!blank) {
        while (!indents.empty() && indents.back() > col) indents.pop_back();
        if (indents.empty() || indents.back() < col) indents.push_back(col);
        // "- - x": each sequence indicator opens a level two columns further in.
        while (i + 1 < text.size() && text[i] == '-' &&
               (text[i + 1] == ' ' || text[i + 1] == '\n')) {
          i += 1;
          col += 1;
          while (i < text.size() && text[i] == ' ') ++i, ++col;
          indents.push_back(col);
        }
        if (static_cast<int>(indents.size()) > max_depth) {
          return too_deep(static_cast<int>(indents.size()));
        }
      }
    }
    // The rest of the line.
    for (; i < text.size() && text[i] != '\n'; ++i) {
      const char c = text[i];
      if (quote != 0) {
        if (quote == '"' && c == '\\') {
          ++i;  // an escaped character
        } else if (c == quote) {
          quote = 0;
        }
        continue;
      }
      if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      }
      if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[' || c == '{') {
        ++flow;
        const int depth = flow + static_cast<int>(indents.size());
        if (depth > max_depth) return too_deep(depth);
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      }
    }
    ++i;  // the newline
    ++line;
  }
  return absl::OkStatus();
}

}  // namespace herd::scheduler
