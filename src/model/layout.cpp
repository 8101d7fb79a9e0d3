#include "model/layout.hpp"

#include <cctype>
#include <string_view>

#include "common/error.hpp"

namespace bb {
namespace {

// Longest expanded layout: far beyond any model (65536 blocks), short enough to refuse
// `t*999999999` in one line instead of exhausting memory.
constexpr std::size_t kMaxExpanded = std::size_t{1} << 20;

[[noreturn]] void refuse(const std::string& text, const std::string& why) {
  throw ConfigError("layout '" + text + "': " + why);
}

// The count N of a `*N` at text[at] (at points at '*'), and where the digits end.
std::size_t repeat_count(const std::string& all, std::string_view s, std::size_t at,
                         std::size_t& end) {
  end = at + 1;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end])) != 0) ++end;
  if (end == at + 1) refuse(all, "'*' must be followed by a count, as in t*3 or (tt|)*2");
  if (end - at - 1 > 6) refuse(all, "repetition count too large");
  return static_cast<std::size_t>(std::stoul(std::string(s.substr(at + 1, end - at - 1))));
}

void append_repeated(const std::string& all, std::string& out, std::string_view piece,
                     std::size_t n) {
  if (piece.size() * n > kMaxExpanded - out.size()) refuse(all, "expands to too many layers");
  for (std::size_t k = 0; k < n; ++k) out += piece;
}

// Megatron's first pass: every `(group)*N` unrolled (the group neither empty nor nested).
std::string unroll_groups(const std::string& all, std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == ')') refuse(all, "')' without its '('");
    if (s[i] != '(') {
      out += s[i++];
      continue;
    }
    const std::size_t close = s.find(')', i + 1), open = s.find('(', i + 1);
    if (close == std::string_view::npos) refuse(all, "'(' without its ')'");
    if (open < close) refuse(all, "nested parentheses are not part of the syntax");
    if (close == i + 1) refuse(all, "empty group '()'");
    if (close + 1 >= s.size() || s[close + 1] != '*')
      refuse(all,
             "a group must be repeated: (" + std::string(s.substr(i + 1, close - i - 1)) + ")*N");
    std::size_t end = 0;
    const std::size_t n = repeat_count(all, s, close + 1, end);
    append_repeated(all, out, s.substr(i + 1, close - i - 1), n);
    i = end;
  }
  return out;
}

// Megatron's second pass: every `x*N` unrolled (x any one character).
std::string unroll_characters(const std::string& all, std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '*') refuse(all, "'*' must follow a layer or a group, as in t*3 or (tt|)*2");
    if (i + 1 < s.size() && s[i + 1] == '*') {
      std::size_t end = 0;
      const std::size_t n = repeat_count(all, s, i + 1, end);
      append_repeated(all, out, s.substr(i, 1), n);
      i = end;
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

bool is_layout_string(const std::string& text) {
  return text != "auto" && text.find_first_of("EtLm|(") != std::string::npos;
}

std::vector<int> parse_layout(const std::string& text) {
  std::string bare;
  for (char c : text)
    if (c != ',') bare += c;
  const std::string layers = unroll_characters(text, unroll_groups(text, bare));
  std::vector<int> blocks(1, 0);
  int embeddings = 0, losses = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const char c = layers[i];
    switch (c) {
      case '|':
        blocks.push_back(0);
        break;
      case 't':
        if (losses > 0) refuse(text, "L must be the last layer, a layer follows it");
        ++blocks.back();
        break;
      case 'E':
        if (++embeddings > 1) refuse(text, "E (the embedding) must appear once");
        if (i != 0) refuse(text, "E (the embedding) must be the first layer of the first stage");
        break;
      case 'L':
        if (++losses > 1) refuse(text, "L (the loss) must appear once");
        break;
      case 'm':
        refuse(text, "m (an MTP layer) is not modelled by bubblebench: leave it out");
      default:
        refuse(text, std::string("unknown layer '") + c +
                         "' (E embedding, t transformer layer, L loss, | between stages)");
    }
    if (losses > 0 && c == '|') refuse(text, "L (the loss) must be in the last stage");
  }
  if (embeddings == 0) refuse(text, "no E: the first stage must start with the embedding");
  if (losses == 0) refuse(text, "no L: the last stage must end with the loss");
  for (std::size_t k = 0; k < blocks.size(); ++k)
    if (blocks[k] == 0)
      refuse(text, "stage " + std::to_string(k) +
                       " holds no transformer layer (every chunk needs at least one block)");
  return blocks;
}

std::string layout_text(const std::vector<int>& blocks) {
  std::string out;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    if (k > 0) out += '|';
    if (k == 0) out += 'E';
    out += 't';
    if (blocks[k] != 1) {  // appended piecewise: GCC 12 warns falsely (-Wrestrict)
      out += '*';
      out += std::to_string(blocks[k]);
    }
    if (k + 1 == blocks.size()) out += ",L";
  }
  return out;
}

}  // namespace bb
