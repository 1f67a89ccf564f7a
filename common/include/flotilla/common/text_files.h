// Small text helpers shared by the components that write scripts and read whole files:
//
//   std::string body = ReadFileOrEmpty(dir / "task.toml");   // "" when missing or unreadable
//   Run("cat " + ShellQuote(path));                         // one POSIX-shell word, any bytes
//
// ReadFileOrEmpty is for reads whose absence the caller handles as "no content" (a probe that
// finds no file, a tree walk); code that must report a missing file checks for it first.
// Header-only; thread-safe (no state).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace flotilla {

inline std::string ReadFileOrEmpty(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `s` in single quotes, each embedded single quote written as '\'' — safe for sh and bash.
inline std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace flotilla
