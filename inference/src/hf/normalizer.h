// The `normalizer` of a tokenizer.json: null, NFC, NFD, NFKC, NFKD and Sequence of these
// (utf8proc). Anything else is refused at load with the field named. Immutable, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference::hf {

class Normalizer {
 public:
  // `where` names the field for errors, e.g. "tokenizer.json: normalizer".
  static absl::StatusOr<std::unique_ptr<Normalizer>> FromJson(const nlohmann::json& j, const std::string& where);

  // The normalized text (valid UTF-8 in, valid UTF-8 out). Identity for a null normalizer.
  std::string Apply(std::string_view text) const;
  bool identity() const { return forms_.empty(); }

 private:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };
  static absl::Status Collect(const nlohmann::json& j, const std::string& where, std::vector<Form>* forms);
  std::vector<Form> forms_;  // applied in order
};

}  // namespace flotilla::inference::hf
