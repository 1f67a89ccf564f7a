#include "flotilla/inference/hf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "hf/added_tokens.h"
#include "hf/bpe_model.h"
#include "hf/normalizer.h"
#include "hf/pre_tokenizer.h"
#include "hf/utf8.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

absl::StatusOr<bool> FlagOf(const nlohmann::json& j, const char* key, bool def, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": expected a boolean"));
  return j[key].get<bool>();
}

}  // namespace

HfTokenizer::HfTokenizer() = default;
HfTokenizer::~HfTokenizer() = default;

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::LoadDir(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string tok, ReadFile(dir + "/tokenizer.json"));
  std::string config;
  std::ifstream probe(dir + "/tokenizer_config.json");
  if (probe) {
    ASSIGN_OR_RETURN(config, ReadFile(dir + "/tokenizer_config.json"));
  }
  return FromJson(tok, config, dir);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(std::string_view tokenizer_json,
                                                                   std::string_view config_json,
                                                                   const std::string& source) {
  const std::string file = source.empty() ? "tokenizer.json" : source + "/tokenizer.json";
  // A member of an unexpected JSON type anywhere below is the file's error, not a crash.
  try {
    nlohmann::json j = nlohmann::json::parse(tokenizer_json, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
    std::unique_ptr<HfTokenizer> t(new HfTokenizer());
    if (j.contains("truncation") && !j["truncation"].is_null()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": truncation is not supported"));
    }
    ASSIGN_OR_RETURN(t->normalizer_, hf::Normalizer::FromJson(j.value("normalizer", nlohmann::json()), file + ": normalizer"));
    ASSIGN_OR_RETURN(t->pre_tokenizer_,
                     hf::PreTokenizer::FromJson(j.value("pre_tokenizer", nlohmann::json()), file + ": pre_tokenizer"));
    if (!j.contains("model")) return absl::InvalidArgumentError(absl::StrCat(file, ": model: missing"));
    ASSIGN_OR_RETURN(t->model_, hf::BpeModel::FromJson(j["model"], file + ": model"));

    const nlohmann::json decoder = j.value("decoder", nlohmann::json());
    if (!decoder.is_null()) {
      const std::string type = decoder.is_object() ? decoder.value("type", "") : "";
      if (type != "ByteLevel") {
        return absl::InvalidArgumentError(absl::StrCat(file, ": decoder.type '", type, "' is not supported"));
      }
      t->byte_level_decoder_ = true;
    }

    int32_t max_id = t->model_->max_id();
    const nlohmann::json added = j.value("added_tokens", nlohmann::json::array());
    if (!added.is_array()) return absl::InvalidArgumentError(absl::StrCat(file, ": added_tokens: expected an array"));
    for (size_t i = 0; i < added.size(); ++i) {
      const auto& a = added[i];
      const std::string where = absl::StrCat(file, ": added_tokens[", i, "]");
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expected {\"id\": int, \"content\": string, ...}"));
      }
      hf::AddedToken tok;
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id > (1 << 30)) return absl::InvalidArgumentError(absl::StrCat(where, ".id: out of range"));
      tok.id = static_cast<int32_t>(id);
      tok.content = a["content"].get<std::string>();
      if (tok.content.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".content: empty"));
      ASSIGN_OR_RETURN(tok.special, FlagOf(a, "special", false, where));
      ASSIGN_OR_RETURN(tok.single_word, FlagOf(a, "single_word", false, where));
      ASSIGN_OR_RETURN(tok.lstrip, FlagOf(a, "lstrip", false, where));
      ASSIGN_OR_RETURN(tok.rstrip, FlagOf(a, "rstrip", false, where));
      ASSIGN_OR_RETURN(tok.normalized, FlagOf(a, "normalized", !tok.special, where));
      max_id = std::max(max_id, tok.id);
      t->added_.push_back(std::move(tok));
    }
    t->vocab_size_ = max_id + 1;
    t->added_index_.assign(static_cast<size_t>(t->vocab_size_), -1);
    std::vector<const hf::AddedToken*> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    for (size_t i = 0; i < t->added_.size(); ++i) {
      const hf::AddedToken& a = t->added_[i];
      t->added_index_[static_cast<size_t>(a.id)] = static_cast<int32_t>(i);
      if (a.normalized) {
        norm.push_back(&a);
        norm_pat.push_back(t->normalizer_->Apply(a.content));
      } else {
        raw.push_back(&a);
        raw_pat.push_back(a.content);
      }
    }
    t->raw_matcher_ = std::make_unique<hf::AddedTokenMatcher>();
    t->raw_matcher_->Build(raw, raw_pat);
    t->normalized_matcher_ = std::make_unique<hf::AddedTokenMatcher>();
    t->normalized_matcher_->Build(norm, norm_pat);
    if (!config_json.empty()) {
      const std::string cfg = source.empty() ? "tokenizer_config.json" : source + "/tokenizer_config.json";
      RETURN_IF_ERROR(t->LoadConfig(config_json, cfg));
    }
    return t;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", e.what()));
  }
}

absl::Status HfTokenizer::LoadConfig(std::string_view config_json, const std::string& file) {
  nlohmann::json c = nlohmann::json::parse(config_json, nullptr, false);
  if (c.is_discarded() || !c.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
  auto token_of = [&](const char* key, std::optional<int32_t>* out) -> absl::Status {
    if (!c.contains(key) || c[key].is_null()) return absl::OkStatus();
    const nlohmann::json& v = c[key];
    std::string content;
    if (v.is_string()) {
      content = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      content = v["content"].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": expected a string or {\"content\": ...}"));
    }
    std::optional<int32_t> id = TokenToId(content);
    if (!id) return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": '", content, "' is not a token"));
    *out = id;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(token_of("bos_token", &bos_id_));
  RETURN_IF_ERROR(token_of("eos_token", &eos_id_));
  RETURN_IF_ERROR(token_of("pad_token", &pad_id_));
  ASSIGN_OR_RETURN(add_bos_, FlagOf(c, "add_bos_token", false, file));
  ASSIGN_OR_RETURN(add_eos_, FlagOf(c, "add_eos_token", false, file));
  if (add_bos_ && !bos_id_) return absl::InvalidArgumentError(absl::StrCat(file, ": add_bos_token: no bos_token"));
  if (add_eos_ && !eos_id_) return absl::InvalidArgumentError(absl::StrCat(file, ": add_eos_token: no eos_token"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Encode(std::string_view text, bool parse_special) const {
  const size_t bad = hf::FirstInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  hf::PreTokenizer::Scratch scratch;
  std::vector<hf::AddedTokenMatcher::Segment> raw_segs, norm_segs;
  std::vector<std::string_view> pieces;
  std::string mapped;
  const bool byte_level = pre_tokenizer_->byte_level();
  const auto& bytes = hf::ByteLevelMap::Get();
  raw_matcher_->Cut(text, !parse_special, &raw_segs);
  for (const auto& rs : raw_segs) {
    if (rs.token != nullptr) {
      ids.push_back(rs.token->id);
      continue;
    }
    const std::string normalized = normalizer_->Apply(text.substr(rs.begin, rs.end - rs.begin));
    norm_segs.clear();
    normalized_matcher_->Cut(normalized, !parse_special, &norm_segs);
    for (const auto& ns : norm_segs) {
      if (ns.token != nullptr) {
        ids.push_back(ns.token->id);
        continue;
      }
      pieces.clear();
      scratch.owned.clear();
      RETURN_IF_ERROR(
          pre_tokenizer_->Split(std::string_view(normalized).substr(ns.begin, ns.end - ns.begin), &scratch, &pieces));
      for (std::string_view piece : pieces) {
        if (byte_level) {
          mapped.clear();
          bytes.EncodeAppend(piece, &mapped);
          model_->Tokenize(mapped, &ids);
        } else {
          model_->Tokenize(piece, &ids);
        }
      }
    }
  }
  return ids;
}

std::string HfTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return "";
  const int32_t ai = added_index_[static_cast<size_t>(id)];
  const std::string* tok = ai >= 0 ? &added_[static_cast<size_t>(ai)].content : model_->TokenOf(id);
  if (tok == nullptr) return "";
  if (!byte_level_decoder_) return *tok;
  std::string out;
  // A token with characters outside the byte map (e.g. a special token) stands for its UTF-8.
  if (!hf::ByteLevelMap::Get().Decode(*tok, &out)) return *tok;
  return out;
}

std::string HfTokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special) const {
  HfStreamingDecoder d(*this, skip_special);
  std::string out;
  for (int32_t id : ids) out += d.Push(id);
  out += d.Finish();
  return out;
}

std::optional<int32_t> HfTokenizer::TokenToId(std::string_view token) const {
  for (const auto& a : added_) {
    if (a.content == token) return a.id;
  }
  if (const int32_t* id = model_->IdOf(token)) return *id;
  return std::nullopt;
}

bool HfTokenizer::IsSpecial(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return false;
  const int32_t ai = added_index_[static_cast<size_t>(id)];
  return ai >= 0 && added_[static_cast<size_t>(ai)].special;
}

std::string HfStreamingDecoder::Push(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) return "";
  if (skip_special_ && tokenizer_.IsSpecial(id)) return "";
  if (tokenizer_.model_->TokenOf(id) == nullptr && tokenizer_.added_index_[static_cast<size_t>(id)] < 0) {
    return "";  // an id with no token at all
  }
  // Without a decoder the library joins the tokens with spaces.
  if (!tokenizer_.byte_level_decoder_ && !first_) pending_ += ' ';
  const std::string bytes = tokenizer_.TokenBytes(id);
  first_ = false;
  pending_ += bytes;
  const size_t keep = hf::IncompleteUtf8Tail(pending_);
  std::string out = hf::Utf8Lossy(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string HfStreamingDecoder::Finish() {
  std::string out = hf::Utf8Lossy(pending_);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace flotilla::inference
