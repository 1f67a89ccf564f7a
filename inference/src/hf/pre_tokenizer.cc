#include "hf/pre_tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::inference::hf {
namespace {

// The pattern ByteLevel splits with when use_regex is true (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::StatusOr<bool> OptionalBool(const nlohmann::json& j, const char* key, bool def, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": expected a boolean"));
  return j[key].get<bool>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const nlohmann::json& j,
                                                                      const std::string& where) {
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  if (j.is_null()) return p;
  if (j.is_object() && j.value("type", "") == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".pretokenizers: expected an array"));
    }
    const auto& list = j["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      RETURN_IF_ERROR(p->Add(list[i], absl::StrCat(where, ".pretokenizers[", i, "]"), i + 1 == list.size()));
    }
  } else {
    RETURN_IF_ERROR(p->Add(j, where, true));
  }
  return p;
}

absl::Status PreTokenizer::Add(const nlohmann::json& j, const std::string& where, bool last) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object with a string 'type'"));
  }
  if (byte_level_) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a step after ByteLevel is not supported"));
  }
  const std::string type = j["type"].get<std::string>();
  Step step;
  if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".pattern: expected {\"Regex\": ...} or {\"String\": ...}"));
    }
    const auto& pat = j["pattern"];
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      ASSIGN_OR_RETURN(step.regex, Regex::Compile(pat["Regex"].get<std::string>(), where + ".pattern.Regex"));
    } else if (pat.contains("String") && pat["String"].is_string()) {
      step.literal = pat["String"].get<std::string>();
      if (step.literal.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".pattern.String: empty"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ".pattern: expected {\"Regex\": ...} or {\"String\": ...}"));
    }
    const std::string b = j.value("behavior", "");
    if (b == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (b == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (b == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (b == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (b == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ".behavior '", b, "' is not supported"));
    }
    ASSIGN_OR_RETURN(step.invert, OptionalBool(j, "invert", false, where));
  } else if (type == "ByteLevel") {
    if (!last) return absl::InvalidArgumentError(absl::StrCat(where, ": ByteLevel must be the last step"));
    ASSIGN_OR_RETURN(step.prefix_space, OptionalBool(j, "add_prefix_space", true, where));
    ASSIGN_OR_RETURN(bool use_regex, OptionalBool(j, "use_regex", true, where));
    if (use_regex) {
      ASSIGN_OR_RETURN(step.regex, Regex::Compile(kGpt2Pattern, where + " (GPT-2 pattern)"));
    }
    step.behavior = Behavior::kIsolated;
    byte_level_ = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ".type '", type, "' is not supported"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::SplitOne(const Step& step, std::string_view piece, Scratch* scratch,
                            std::vector<std::string_view>* out) const {
  if (step.prefix_space && (piece.empty() || piece.front() != ' ')) {
    scratch->owned.push_back(" " + std::string(piece));
    piece = scratch->owned.back();
  }
  if (step.regex == nullptr && step.literal.empty()) {  // ByteLevel without its regex
    if (!piece.empty()) out->push_back(piece);
    return absl::OkStatus();
  }
  auto& m = scratch->matches;
  if (step.regex != nullptr) {
    RETURN_IF_ERROR(step.regex->FindAll(piece, &scratch->regex, &m));
  } else {
    m.clear();
    for (size_t at = piece.find(step.literal); at != std::string_view::npos;
         at = piece.find(step.literal, at + step.literal.size())) {
      m.emplace_back(at, at + step.literal.size());
    }
  }
  // The pieces as the Hugging Face library lists them: gaps and matches in order, flagged.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (const auto& [b, e] : m) {
    if (prev != b) spans.push_back({prev, b, step.invert});
    spans.push_back({b, e, !step.invert});
    prev = e;
  }
  if (prev != piece.size()) spans.push_back({prev, piece.size(), step.invert});

  std::vector<std::pair<size_t, size_t>> merged;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kIsolated:
      for (const Span& s : spans) merged.emplace_back(s.b, s.e);
      break;
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.match) merged.emplace_back(s.b, s.e);
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !merged.empty()) {
          merged.back().second = s.e;
        } else {
          merged.emplace_back(s.b, s.e);
        }
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty()) {
          merged.back().first = it->b;
        } else {
          merged.emplace_back(it->b, it->e);
        }
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !merged.empty()) {
          merged.back().second = s.e;
        } else {
          merged.emplace_back(s.b, s.e);
        }
        previous_match = s.match;
      }
      break;
  }
  for (const auto& [b, e] : merged) {
    if (e > b) out->push_back(piece.substr(b, e - b));
  }
  return absl::OkStatus();
}

absl::Status PreTokenizer::Split(std::string_view text, Scratch* scratch,
                                 std::vector<std::string_view>* pieces) const {
  if (text.empty()) return absl::OkStatus();
  if (steps_.empty()) {
    pieces->push_back(text);
    return absl::OkStatus();
  }
  std::vector<std::string_view> cur{text};
  for (const Step& step : steps_) {
    scratch->next.clear();
    for (std::string_view piece : cur) RETURN_IF_ERROR(SplitOne(step, piece, scratch, &scratch->next));
    cur.swap(scratch->next);
  }
  pieces->insert(pieces->end(), cur.begin(), cur.end());
  return absl::OkStatus();
}

}  // namespace flotilla::inference::hf
