#include "unified_diff.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace flotilla::synth {
namespace {

// A header path: the timestamp after a tab goes, then `strip` leading components.
std::string HeaderPath(absl::string_view p, int strip) {
  p = p.substr(0, p.find('\t'));
  while (!p.empty() && (p.back() == ' ' || p.back() == '\r')) p.remove_suffix(1);
  if (p == "/dev/null") return std::string(p);
  for (int i = 0; i < strip; ++i) {
    size_t slash = p.find('/');
    if (slash == absl::string_view::npos) break;
    p.remove_prefix(slash + 1);
  }
  return std::string(p);
}

// "-12,3" or "+7" -> start (and length, 1 when absent).
bool ParseRange(absl::string_view s, int& start, int& len) {
  if (s.size() < 2) return false;
  s.remove_prefix(1);
  size_t comma = s.find(',');
  len = 1;
  if (comma != absl::string_view::npos) {
    if (!absl::SimpleAtoi(s.substr(comma + 1), &len)) return false;
    s = s.substr(0, comma);
  }
  return absl::SimpleAtoi(s, &start);
}

std::vector<std::string> SplitKeepingNewlines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    size_t end = nl == std::string::npos ? s.size() : nl + 1;
    out.push_back(s.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

bool MatchesAt(const std::vector<std::string>& lines, size_t at, const std::vector<std::string>& want) {
  if (at + want.size() > lines.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (lines[at + i] != want[i]) return false;
  }
  return true;
}

}  // namespace

std::vector<FileDiff> ParseUnifiedDiff(absl::string_view text, int strip) {
  std::vector<FileDiff> out;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  bool git_section = false;  // after "diff --git" and before its first hunk or the next section
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    if (absl::StartsWith(l, "diff --git ")) {
      // Paths for sections without ---/+++ (binary, mode only); ---/+++ replace them.
      FileDiff d;
      absl::string_view rest = l.substr(11);
      size_t b = rest.rfind(" b/");
      if (b != absl::string_view::npos) {
        d.old_path = HeaderPath(rest.substr(0, b), strip);
        d.new_path = HeaderPath(rest.substr(b + 1), strip);
      }
      out.push_back(std::move(d));
      git_section = true;
      continue;
    }
    if (git_section && (absl::StartsWith(l, "Binary files ") || l == "GIT binary patch")) {
      out.back().binary = true;
      continue;
    }
    if (absl::StartsWith(l, "--- ") && i + 1 < lines.size() && absl::StartsWith(lines[i + 1], "+++ ")) {
      if (!git_section) out.emplace_back();
      git_section = false;
      out.back().old_path = HeaderPath(l.substr(4), strip);
      out.back().new_path = HeaderPath(lines[i + 1].substr(4), strip);
      ++i;
      continue;
    }
    if (!absl::StartsWith(l, "@@ -") || out.empty()) continue;
    git_section = false;
    std::vector<absl::string_view> parts = absl::StrSplit(l, ' ');
    DiffHunk h;
    int old_len = 0, new_len = 0;
    if (parts.size() < 4 || !ParseRange(parts[1], h.old_start, old_len) || !ParseRange(parts[2], h.new_start, new_len)) {
      continue;
    }
    FileDiff& d = out.back();
    int old_seen = 0, new_seen = 0;
    std::vector<std::string>* last = nullptr;  // where a "\ No newline" marker applies
    std::vector<std::string>* last_other = nullptr;
    while ((old_seen < old_len || new_seen < new_len || (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], "\\"))) &&
           i + 1 < lines.size()) {
      absl::string_view b = lines[++i];
      char tag = b.empty() ? ' ' : b[0];
      std::string body = absl::StrCat(b.empty() ? b : b.substr(1), "\n");
      if (tag == '\\') {
        if (last != nullptr && !last->empty()) last->back().pop_back();
        if (last_other != nullptr && !last_other->empty()) last_other->back().pop_back();
        last = last_other = nullptr;
        continue;
      }
      if (tag == ' ') {
        h.old_lines.push_back(body);
        h.new_lines.push_back(body);
        ++old_seen;
        ++new_seen;
        last = &h.old_lines;
        last_other = &h.new_lines;
      } else if (tag == '-') {
        h.old_lines.push_back(body);
        ++old_seen;
        ++d.removed;
        last = &h.old_lines;
        last_other = nullptr;
      } else if (tag == '+') {
        h.new_lines.push_back(body);
        ++new_seen;
        ++d.added;
        last = &h.new_lines;
        last_other = nullptr;
      } else {
        --i;  // not hunk text: a truncated hunk ends here
        break;
      }
    }
    d.hunks.push_back(std::move(h));
  }
  return out;
}

absl::StatusOr<std::string> ApplyFileDiff(const std::string& content, const FileDiff& diff, bool reverse) {
  std::vector<std::string> lines = SplitKeepingNewlines(content);
  long drift = 0;    // how far the content's lines sit from where the diff says
  size_t floor = 0;  // a hunk starts after the previous one's end
  for (size_t n = 0; n < diff.hunks.size(); ++n) {
    const DiffHunk& h = diff.hunks[n];
    const std::vector<std::string>& from = reverse ? h.new_lines : h.old_lines;
    const std::vector<std::string>& to = reverse ? h.old_lines : h.new_lines;
    // Earlier hunks are already applied: this one's text sits where the other side says.
    long expected = std::max((reverse ? h.old_start : h.new_start) - 1, 0);
    long want = std::max(expected + drift, static_cast<long>(floor));
    long limit = static_cast<long>(lines.size());
    long found = -1;
    for (long off = 0; found < 0 && (want - off >= static_cast<long>(floor) || want + off <= limit); ++off) {
      for (long at : {want - off, want + off}) {
        if (at >= static_cast<long>(floor) && at <= limit && MatchesAt(lines, static_cast<size_t>(at), from)) {
          found = at;
          break;
        }
      }
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat(diff.path(), ": hunk ", n + 1, " (line ",
                                                     reverse ? h.new_start : h.old_start, ") does not match the file"));
    }
    lines.erase(lines.begin() + found, lines.begin() + found + static_cast<long>(from.size()));
    lines.insert(lines.begin() + found, to.begin(), to.end());
    floor = static_cast<size_t>(found) + to.size();
    drift = found - expected;
  }
  std::string out;
  for (const std::string& l : lines) out += l;
  return out;
}

}  // namespace flotilla::synth
