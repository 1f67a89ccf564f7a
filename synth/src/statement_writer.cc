#include "statement_writer.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace flotilla::synth {

const char kStatementSystemPrompt[] =
    "You write GitHub issues for a software-engineering benchmark. A project's test suite has started "
    "failing. From the failing tests' names and messages, write the issue a user of the project would "
    "file: a short title line starting with '# ', what goes wrong, what was expected instead, and a small "
    "example of the wrong behaviour taken from the messages. Do not guess at the cause, do not name a "
    "fix, do not write a patch or any code of the project. Plain Markdown, at most 250 words.";

namespace {

constexpr size_t kMaxStatementChars = 4000;

std::string Collapse(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : absl::StripAsciiWhitespace(absl::string_view(s.data(), s.size()))) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

size_t NonSpace(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += absl::ascii_isspace(static_cast<unsigned char>(c)) ? 0 : 1;
  return n;
}

}  // namespace

std::string StatementPrompt(const StatementRequest& r) {
  std::string p = absl::StrCat("Project: ", r.package, " (", r.language == "python" ? "Python" : "C", ")\n",
                               "Failing tests (", r.fail_to_pass.size(), "):\n");
  size_t shown = 0;
  for (const std::string& t : r.fail_to_pass) {
    if (++shown > 20) {
      absl::StrAppend(&p, "- ... and ", r.fail_to_pass.size() - 20, " more\n");
      break;
    }
    auto m = r.messages.find(t);
    absl::StrAppend(&p, "- ", t, m == r.messages.end() || m->second.empty() ? "" : ": " + m->second, "\n");
  }
  absl::StrAppend(&p, "\nWrite the issue.");
  return p;
}

std::vector<std::string> LeakLines(std::string_view fixed, std::string_view broken) {
  std::set<std::string> f, b;
  for (absl::string_view l : absl::StrSplit(absl::string_view(fixed.data(), fixed.size()), '\n')) f.insert(Collapse(std::string_view(l.data(), l.size())));
  for (absl::string_view l : absl::StrSplit(absl::string_view(broken.data(), broken.size()), '\n')) b.insert(Collapse(std::string_view(l.data(), l.size())));
  std::vector<std::string> out;
  for (const std::string& l : f) {
    if (NonSpace(l) >= 6 && !b.count(l)) out.push_back(l);
  }
  for (const std::string& l : b) {
    if (NonSpace(l) >= 6 && !f.count(l)) out.push_back(l);
  }
  return out;
}

std::set<std::string> SubjectWords(const StatementRequest& r) {
  static const std::set<std::string> kCommon = {"test", "tests", "assert", "assertion", "error", "failed", "true",
                                                "false", "none", "with", "from", "that", "this", "where"};
  std::set<std::string> words;
  auto add = [&](std::string_view text) {
    std::string w;
    for (size_t i = 0; i <= text.size(); ++i) {
      char c = i < text.size() ? text[i] : ' ';
      if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
        w += absl::ascii_tolower(static_cast<unsigned char>(c));
        continue;
      }
      if (w.size() >= 4 && !kCommon.count(w) && !absl::ascii_isdigit(static_cast<unsigned char>(w[0]))) words.insert(w);
      w.clear();
    }
  };
  for (const std::string& t : r.fail_to_pass) {
    size_t sep = t.rfind("::");
    add(sep == std::string::npos ? t : t.substr(sep + 2));
    auto m = r.messages.find(t);
    if (m != r.messages.end()) add(m->second);
  }
  return words;
}

absl::Status CheckStatement(std::string_view statement, std::string_view finish_reason,
                            const std::vector<std::string>& leak_lines, const std::set<std::string>& subject_words) {
  if (finish_reason == "length") {
    return absl::FailedPreconditionError("the reply was cut at --model-max-tokens");
  }
  if (NonSpace(statement) < 40) {
    return absl::FailedPreconditionError(
        absl::StrCat("too short to describe the problem (", NonSpace(statement), " non-space characters < 40)"));
  }
  if (statement.size() > kMaxStatementChars) {
    return absl::FailedPreconditionError(
        absl::StrCat("too long (", statement.size(), " characters > ", kMaxStatementChars, ")"));
  }
  const std::string text = Collapse(statement);
  std::string lower = absl::AsciiStrToLower(text);
  bool on_subject = subject_words.empty();
  for (const std::string& w : subject_words) on_subject = on_subject || lower.find(w) != std::string::npos;
  if (!on_subject) {
    return absl::FailedPreconditionError(
        "names nothing of the failing tests (no word of their names or messages): not about this problem");
  }
  for (const std::string& l : leak_lines) {
    if (text.find(l) != std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat("leaks the fix: it contains the changed line `", l, "`"));
    }
  }
  return absl::OkStatus();
}

StatementOutcome WriteStatement(const SynthModel& model, const StatementRequest& request) {
  StatementOutcome o;
  auto reply = model.Ask(kStatementSystemPrompt, StatementPrompt(request));
  if (!reply.ok()) {
    o.reason = absl::StrCat("the request failed: ", reply.status().message());
    return o;
  }
  o.reply = reply->text;
  o.seconds = reply->seconds;
  std::string text(absl::StripAsciiWhitespace(reply->text));
  std::vector<std::string> leaks = LeakLines(request.fixed_content, request.broken_content);
  absl::Status ok = CheckStatement(text, reply->finish_reason, leaks, SubjectWords(request));
  if (!ok.ok()) {
    o.reason = std::string(ok.message());
    return o;
  }
  o.statement = text;
  o.reason = absl::StrCat("no leak (", leaks.size(), " changed lines checked)");
  return o;
}

}  // namespace flotilla::synth
