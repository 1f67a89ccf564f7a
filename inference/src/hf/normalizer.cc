#include "hf/normalizer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "utf8proc.h"

namespace flotilla::inference::hf {

absl::Status Normalizer::Collect(const nlohmann::json& j, const std::string& where, std::vector<Form>* forms) {
  if (j.is_null()) return absl::OkStatus();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object with a string 'type'"));
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") {
    forms->push_back(Form::kNfc);
  } else if (type == "NFD") {
    forms->push_back(Form::kNfd);
  } else if (type == "NFKC") {
    forms->push_back(Form::kNfkc);
  } else if (type == "NFKD") {
    forms->push_back(Form::kNfkd);
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".normalizers: expected an array"));
    }
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      RETURN_IF_ERROR(Collect(j["normalizers"][i], absl::StrCat(where, ".normalizers[", i, "]"), forms));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ".type '", type, "' is not supported"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const nlohmann::json& j, const std::string& where) {
  std::unique_ptr<Normalizer> n(new Normalizer());
  RETURN_IF_ERROR(Collect(j, where, &n->forms_));
  return n;
}

std::string Normalizer::Apply(std::string_view text) const {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii || forms_.empty()) return std::string(text);  // ASCII is in every normal form
  std::string cur(text);
  for (Form f : forms_) {
    int options = UTF8PROC_STABLE;
    switch (f) {
      case Form::kNfc: options |= UTF8PROC_COMPOSE; break;
      case Form::kNfd: options |= UTF8PROC_DECOMPOSE; break;
      case Form::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Form::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                      static_cast<utf8proc_ssize_t>(cur.size()), &out,
                                      static_cast<utf8proc_option_t>(options));
    // The input was validated as UTF-8 before, so utf8proc cannot fail but on memory.
    if (n < 0) std::abort();
    cur.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }
  return cur;
}

}  // namespace flotilla::inference::hf
