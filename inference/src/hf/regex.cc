#include "hf/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace flotilla::inference::hf {

RegexScratch::RegexScratch() {
  match_ = pcre2_match_data_create(1, nullptr);
  context_ = pcre2_match_context_create(nullptr);
  // Long whitespace runs backtrack through `\s+(?!\S)`; give the JIT room beyond its 32 KiB.
  jit_stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  if (match_ == nullptr || context_ == nullptr) std::abort();  // out of memory
  if (jit_stack_ != nullptr) pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
}

RegexScratch::~RegexScratch() {
  if (jit_stack_ != nullptr) pcre2_jit_stack_free(jit_stack_);
  pcre2_match_context_free(context_);
  pcre2_match_data_free(match_);
}

namespace {

// `\s` and `\S` as Unicode White_Space, the property the Hugging Face library's regex engine
// (Oniguruma) tests: PCRE2's own `\s` also takes U+180E, which left White_Space in Unicode 6.3.
std::string WhiteSpaceClasses(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += '\\';
        out += c;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view source_pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  // The pattern as written first, so that an error's offset points into the file's text.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source_pattern.data()), source_pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code != nullptr) {
    pcre2_code_free(code);
    const std::string pattern = WhiteSpaceClasses(source_pattern);
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                         &err_offset, nullptr);
  }
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return absl::InvalidArgumentError(absl::StrCat(where, ": regex does not compile at offset ", err_offset, ": ",
                                                   reinterpret_cast<const char*>(msg)));
  }
  // Without JIT support PCRE2 interprets the pattern: slower, same matches.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Regex> re(new Regex());
  re->code_ = code;
  re->where_ = where;
  return re;
}

Regex::~Regex() { pcre2_code_free(code_); }

absl::Status Regex::FindAll(std::string_view subject, RegexScratch* scratch,
                            std::vector<std::pair<size_t, size_t>>* out) const {
  out->clear();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc = pcre2_match(code_, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, scratch->match_, scratch->context_);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      return absl::ResourceExhaustedError(absl::StrCat(where_, ": matching a ", subject.size(), "-byte piece at byte ",
                                                       pos, " failed: ", reinterpret_cast<const char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch->match_);
    const size_t b = ov[0], e = ov[1];
    out->emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= subject.size()) break;
      pos = e + 1;
      while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::inference::hf
