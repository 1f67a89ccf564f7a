// A compiled PCRE2 pattern (UTF + Unicode properties, JIT where the platform has it) as the
// Split pre-tokenizer uses it, and the per-call scratch its matching needs. Thread-safe: the
// compiled pattern is shared; each thread matches with its own RegexScratch.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace flotilla::inference::hf {

// Match data and a JIT stack for one thread's matching. Not copyable.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

 private:
  friend class Regex;
  pcre2_real_match_data_8* match_ = nullptr;
  pcre2_real_match_context_8* context_ = nullptr;
  pcre2_real_jit_stack_8* jit_stack_ = nullptr;
};

class Regex {
 public:
  // `where` names the field for errors ("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern").
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match in `subject` (valid UTF-8), leftmost first, as [begin, end)
  // byte offsets; after an empty match the search resumes one character later. ResourceExhausted
  // when PCRE2 gives up on the subject (its match or JIT stack limits).
  absl::Status FindAll(std::string_view subject, RegexScratch* scratch, std::vector<std::pair<size_t, size_t>>* out) const;

 private:
  Regex() = default;
  pcre2_real_code_8* code_ = nullptr;
  std::string where_;  // the field the pattern came from, for errors
};

}  // namespace flotilla::inference::hf
