// Python's str operations on UTF-8 text: strings in templates are sequences of code points
// (len, indexing and slicing count code points), whitespace is Unicode whitespace as
// str.isspace() has it. Case mapping covers ASCII, Latin-1, Greek and Cyrillic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::inference::jinja {

// Decodes UTF-8 (an invalid byte decodes as itself, as U+0080..U+00FF would not).
std::u32string Utf8Decode(std::string_view s);
std::string Utf8Encode(std::u32string_view s);
void AppendUtf8(std::string& out, char32_t c);
int64_t CodePointCount(std::string_view s);

bool IsPySpace(char32_t c);
bool IsPyAlnum(char32_t c);  // letters and digits (non-ASCII code points count as letters)
char32_t PyUpper(char32_t c);
char32_t PyLower(char32_t c);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyCapitalize(std::string_view s);  // str.capitalize()
std::string PyTitle(std::string_view s);       // str.title()

// str.strip/lstrip/rstrip: chars == nullopt strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / str.rsplit: sep == nullopt splits on whitespace runs; maxsplit < 0: no limit.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
// str.replace with count < 0 replacing all.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
// str.find / str.rfind in code points; -1 when absent.
int64_t PyFind(std::string_view s, std::string_view sub, bool from_right);
int64_t PyCount(std::string_view s, std::string_view sub);

// Python slice indices for a sequence of length n: the positions visited, in order.
struct SliceSpec {
  std::optional<int64_t> start, stop, step;
};
std::vector<int64_t> SliceIndices(const SliceSpec& spec, int64_t n);

}  // namespace flotilla::inference::jinja
