#include "model_rewriter.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "flotilla/common/status.h"
#include "flotilla/common/text_files.h"
#include "nlohmann/json.hpp"

namespace flotilla::synth {

extern const char kPyFunctionsScript[];

const char kRewriteSystemPrompt[] =
    "You write realistic bugs for a software-engineering benchmark. You are given one function of a "
    "real project. Rewrite it so that it contains exactly one subtle bug, the kind a developer could "
    "introduce by accident (a wrong boundary, a wrong operator, a missed case, a swapped argument, a "
    "wrong default). Keep the name, the signature and the overall structure; change as little as "
    "possible; do not add comments that point at the bug; do not rename anything.\n"
    "Reply with the complete rewritten function in one fenced code block and nothing else.";

namespace {

namespace fs = std::filesystem;

class SandboxProjectShell : public ProjectShell {
 public:
  explicit SandboxProjectShell(TestSandbox& s) : s_(s) {}
  std::string root() const override { return "/app"; }
  std::string scratch() const override { return "/tmp"; }
  absl::Status Put(const std::string& path, const std::string& content) override { return s_.Put(path, content, 0644); }
  absl::StatusOr<ShellRun> Run(const std::string& script, uint32_t timeout_ms) override {
    return s_.Run(script, timeout_ms);
  }

 private:
  TestSandbox& s_;
};

// Lines without their common leading whitespace (tabs and spaces alike).
std::vector<std::string> Dedent(std::string_view code) {
  std::vector<std::string> lines = absl::StrSplit(absl::string_view(code.data(), code.size()), '\n');
  size_t common = std::string::npos;
  for (const std::string& l : lines) {
    if (absl::StripAsciiWhitespace(l).empty()) continue;
    common = std::min(common, l.find_first_not_of(" \t"));
  }
  for (std::string& l : lines) {
    l = absl::StripAsciiWhitespace(l).empty() ? "" : l.substr(common == std::string::npos ? 0 : common);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '\r')) l.pop_back();
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  while (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());
  return lines;
}

std::string NoSpace(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

bool IsIdentifier(std::string_view t) {
  return !t.empty() && (absl::ascii_isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

}  // namespace

std::unique_ptr<ProjectShell> SandboxShell(TestSandbox& sandbox) {
  return std::make_unique<SandboxProjectShell>(sandbox);
}

std::vector<FunctionSpan> CFunctions(const std::string& file, std::string_view source) {
  std::vector<CToken> t = TokenizeC(source);
  std::vector<FunctionSpan> out;
  size_t decl_start = 0;  // first token after the previous top-level ';' or '}'
  int depth = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    std::string_view x = t[i].text;
    if (depth == 0 && (x == ";" || x == "}")) {
      decl_start = i + 1;
      continue;
    }
    if (x == "{" || x == "(" || x == "[") {
      if (x == "{" && depth == 0 && i > 0 && t[i - 1].text == ")") {
        // The name: the identifier before the '(' matching this ')'.
        int parens = 0;
        size_t j = i - 1;
        for (;; --j) {
          parens += t[j].text == ")" ? 1 : t[j].text == "(" ? -1 : 0;
          if (parens == 0 || j == 0) break;
        }
        size_t k = i;
        int d = 0;
        for (; k < t.size(); ++k) {
          d += t[k].text == "{" ? 1 : t[k].text == "}" ? -1 : 0;
          if (d == 0) break;
        }
        if (k < t.size() && j > decl_start && t[j - 1].kind == CToken::Kind::kIdentifier &&
            IsIdentifier(t[j - 1].text) && t[k].line - t[i].line >= 2) {
          size_t line_start = source.rfind('\n', t[decl_start].start);
          line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
          out.push_back(FunctionSpan{file, std::string(t[j - 1].text), t[j - 1].line, line_start, t[k].end, ""});
        }
        if (k >= t.size()) break;
        i = k;
        decl_start = k + 1;
        continue;
      }
      ++depth;
    } else if (x == "}" || x == ")" || x == "]") {
      depth = std::max(0, depth - 1);
    }
  }
  return out;
}

absl::StatusOr<std::vector<FunctionSpan>> ListFunctions(ProjectShell& shell, const std::string& language,
                                                        const std::string& repo_dir,
                                                        const std::vector<std::string>& files,
                                                        std::vector<std::string>* skipped) {
  std::vector<FunctionSpan> out;
  if (language != "python") {
    for (const std::string& f : files) {
      std::vector<FunctionSpan> fns = CFunctions(f, ReadFileOrEmpty(fs::path(repo_dir) / f));
      out.insert(out.end(), fns.begin(), fns.end());
    }
    return out;
  }
  const std::string script = shell.scratch() + "/synth-py-functions.py";
  RETURN_IF_ERROR(shell.Put(script, kPyFunctionsScript));
  std::vector<std::string> quoted;
  for (const std::string& f : files) quoted.push_back(ShellQuote(f));
  ASSIGN_OR_RETURN(ShellRun r, shell.Run(absl::StrCat("python3 -B ", script, " ", ShellQuote(shell.root()), " ",
                                                      absl::StrJoin(quoted, " ")),
                                         300'000));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("py_functions.py failed (exit status ", r.exit_code,
                                            "): ", ReplyExcerpt(r.output, 2000)));
  }
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("error")) {
      if (skipped != nullptr) skipped->push_back(absl::StrCat(j.value("file", ""), ": ", j.value("error", "")));
      continue;
    }
    out.push_back(FunctionSpan{j.value("file", ""), j.value("name", ""), j.value("line", 0),
                               j.value("start", size_t{0}), j.value("end", size_t{0}), j.value("indent", "")});
  }
  return out;
}

std::string RewritePrompt(const std::string& language, const FunctionSpan& fn, std::string_view function_source) {
  const std::string lang = language == "python" ? "python" : "c";
  return absl::StrCat("Language: ", language == "python" ? "Python" : "C", "\nFile: ", fn.file, "\nFunction: ", fn.name,
                      "\n\n```", lang, "\n", absl::StrJoin(Dedent(function_source), "\n"),
                      "\n```\n\nRewrite `", fn.name, "` with one subtle bug. Reply with the whole function in one ```",
                      lang, " code block.");
}

std::optional<std::string> FencedCode(std::string_view reply) {
  size_t open = reply.find("```");
  if (open == std::string_view::npos) return std::nullopt;
  size_t body = reply.find('\n', open);
  if (body == std::string_view::npos) return std::nullopt;
  ++body;
  size_t close = reply.find("```", body);
  if (close == std::string_view::npos) return std::nullopt;
  return std::string(reply.substr(body, close - body));
}

absl::StatusOr<SourceEdit> RewriteEdit(const std::string& language, const FunctionSpan& fn, std::string_view source,
                                       std::string_view reply, std::string_view finish_reason) {
  if (fn.end > source.size() || fn.start >= fn.end) {
    return absl::FailedPreconditionError(absl::StrCat("the function's span lies outside ", fn.file));
  }
  std::optional<std::string> code = FencedCode(reply);
  if (!code) {
    return absl::FailedPreconditionError(finish_reason == "length"
                                             ? "the reply was cut at --model-max-tokens before its code block closed"
                                             : "no fenced code block in the reply");
  }
  std::vector<std::string> lines = Dedent(*code);
  if (lines.empty()) return absl::FailedPreconditionError("the code block is empty");
  std::string_view original = source.substr(fn.start, fn.end - fn.start);
  if (language == "python") {
    absl::string_view first = lines[0];
    absl::ConsumePrefix(&first, "async ");
    if (!absl::StartsWith(first, absl::StrCat("def ", fn.name, "("))) {
      return absl::FailedPreconditionError(
          absl::StrCat("the code does not start with `def ", fn.name, "(`: ", ReplyExcerpt(lines[0], 80)));
    }
  } else {
    std::string joined = absl::StrJoin(lines, "\n");
    size_t brace = joined.find('{');
    size_t name = joined.find(fn.name);
    if (brace == std::string::npos || name == std::string::npos || name > brace ||
        joined.find('(', name) > brace || joined.back() != '}') {
      return absl::FailedPreconditionError(
          absl::StrCat("the code is not one definition of `", fn.name, "` ending with its closing brace"));
    }
  }
  const size_t original_lines = static_cast<size_t>(std::count(original.begin(), original.end(), '\n')) + 1;
  if (lines.size() > original_lines * 2 + 10) {
    return absl::FailedPreconditionError(absl::StrCat("the rewrite has ", lines.size(), " lines for ", original_lines,
                                                      " in the original: not a small change"));
  }
  std::string replacement;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) replacement += "\n";
    if (!lines[i].empty()) replacement += fn.indent + lines[i];
  }
  if (NoSpace(replacement) == NoSpace(original)) {
    return absl::FailedPreconditionError("the rewrite is the original function (whitespace aside)");
  }
  return SourceEdit{fn.file, "rewrite", fn.line, fn.start, fn.end, replacement,
                    absl::StrCat("model rewrite of ", fn.name)};
}

std::string ParseCheckCommand(const std::string& language, const std::string& root, const std::string& file,
                              const std::string& path) {
  if (language == "python") {
    return absl::StrCat("python3 -B -c 'import ast, sys; ast.parse(open(sys.argv[1], \"rb\").read(), sys.argv[2])' ",
                        ShellQuote(path), " ", ShellQuote(file), " 2>&1 | tail -n 3; exit ${PIPESTATUS[0]}");
  }
  const std::string dir = (fs::path(root) / file).parent_path().string();
  return absl::StrCat("cc -fsyntax-only -w -x c -iquote ", ShellQuote(dir), " -I", ShellQuote(root), " -I", ShellQuote(dir), " -I",
                      ShellQuote(root + "/include"), " -I", ShellQuote(root + "/src"), " ", ShellQuote(path),
                      " 2>&1 | head -n 5; exit ${PIPESTATUS[0]}");
}

std::vector<RewriteOutcome> ProposeRewrites(const SynthModel& model, ProjectShell& shell, const std::string& language,
                                            const std::string& repo_dir, const std::vector<FunctionSpan>& functions,
                                            const RewriteOptions& options) {
  std::vector<FunctionSpan> picked = functions;
  std::mt19937_64 rng(options.seed);
  std::shuffle(picked.begin(), picked.end(), rng);
  if (picked.size() > static_cast<size_t>(std::max(0, options.max_functions))) picked.resize(options.max_functions);
  std::map<std::string, std::string> sources;
  std::map<std::string, bool> compiles_alone;  // C: whether the original file passes the check
  const std::string path = shell.scratch() + (language == "python" ? "/synth-rewrite.py" : "/synth-rewrite.c");
  std::vector<RewriteOutcome> out;
  int errors_in_a_row = 0;
  for (const FunctionSpan& fn : picked) {
    RewriteOutcome o;
    o.function = fn;
    if (errors_in_a_row >= options.max_request_errors) {
      o.reason = absl::StrCat("not asked: the last ", errors_in_a_row, " requests failed");
      out.push_back(std::move(o));
      continue;
    }
    if (!sources.count(fn.file)) sources[fn.file] = ReadFileOrEmpty(fs::path(repo_dir) / fn.file);
    const std::string& source = sources[fn.file];
    if (fn.end > source.size() || fn.start >= fn.end) {
      o.reason = absl::StrCat("the function's span lies outside ", fn.file);
      out.push_back(std::move(o));
      continue;
    }
    auto reply = model.Ask(kRewriteSystemPrompt, RewritePrompt(language, fn, source.substr(fn.start, fn.end - fn.start)));
    if (!reply.ok()) {
      ++errors_in_a_row;
      o.reason = absl::StrCat("the request failed: ", reply.status().message());
      out.push_back(std::move(o));
      continue;
    }
    errors_in_a_row = 0;
    o.reply = reply->text;
    o.seconds = reply->seconds;
    auto edit = RewriteEdit(language, fn, source, reply->text, reply->finish_reason);
    if (!edit.ok()) {
      o.reason = std::string(edit.status().message());
      out.push_back(std::move(o));
      continue;
    }
    const std::string broken = ApplyEdit(source, *edit);
    auto check = [&](const std::string& content) -> absl::StatusOr<ShellRun> {
      RETURN_IF_ERROR(shell.Put(path, content));
      return shell.Run(ParseCheckCommand(language, shell.root(), fn.file, path), options.check_timeout_ms);
    };
    if (language != "python" && !compiles_alone.count(fn.file)) {
      auto base = check(source);
      compiles_alone[fn.file] = base.ok() && base->exit_code == 0;
    }
    if (language == "python" || compiles_alone[fn.file]) {
      auto ran = check(broken);
      if (!ran.ok()) {
        o.reason = absl::StrCat("the parse check could not run: ", ran.status().message());
        out.push_back(std::move(o));
        continue;
      }
      if (ran->exit_code != 0) {
        o.reason = absl::StrCat(language == "python" ? "does not parse (ast.parse): " : "does not compile (cc): ",
                                ReplyExcerpt(std::string(absl::StripAsciiWhitespace(ran->output)), 300));
        out.push_back(std::move(o));
        continue;
      }
      o.reason = language == "python" ? "parses (ast.parse)" : "compiles (cc -fsyntax-only)";
    } else {
      int depth = 0;
      bool negative = false;
      for (const CToken& t : TokenizeC(edit->replacement)) {
        depth += t.text == "{" ? 1 : t.text == "}" ? -1 : 0;
        negative = negative || depth < 0;
      }
      if (depth != 0 || negative) {
        o.reason = "unbalanced braces (the file does not compile on its own, so only its braces are checked)";
        out.push_back(std::move(o));
        continue;
      }
      o.reason = "braces balanced (the file does not compile on its own: the build at validation decides)";
    }
    o.usable = true;
    o.edit = *edit;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace flotilla::synth
