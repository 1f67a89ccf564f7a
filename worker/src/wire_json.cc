// JSON request bodies of the wire APIs: parsing and field readers with field-named errors.
#include "wire_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flotilla::worker::wire {

absl::StatusOr<InJson> ParseBody(const std::string& body) {
  InJson j = InJson::parse(body, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("request body: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("request body: expected a JSON object");
  return j;
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status ReadString(const InJson& obj, const char* key, const std::string& path, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return Invalid(path, "expected a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadBool(const InJson& obj, const char* key, const std::string& path, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Invalid(path, "expected true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadFloat(const InJson& obj, const char* key, const std::string& path, float lo,
                       float hi, float* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Invalid(path, "expected a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Invalid(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
  }
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status ReadUint(const InJson& obj, const char* key, const std::string& path, uint32_t lo,
                      uint32_t hi, uint32_t* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Invalid(path, "expected an integer");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Invalid(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

absl::Status ReadSeed(const InJson& obj, const char* key, const std::string& path,
                      std::optional<uint64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Invalid(path, "expected an integer");
  *out = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextContent(const InJson& v, const std::string& path,
                                            const std::vector<std::string>& text_types) {
  if (v.is_null()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return Invalid(path, "expected a string or an array of content parts");
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size(); ++i) {
    const InJson& p = v[i];
    std::string ppath = absl::StrCat(path, "[", i, "]");
    if (p.is_string()) {
      parts.push_back(p.get<std::string>());
      continue;
    }
    if (!p.is_object()) return Invalid(ppath, "expected a content part object");
    std::string type;
    if (auto st = ReadString(p, "type", ppath + ".type", &type); !st.ok()) return st;
    bool ok = false;
    for (const std::string& t : text_types) ok = ok || t == type;
    if (!ok) {
      return Invalid(ppath + ".type", absl::StrCat("unsupported content part type '", type,
                                                   "' (supported: ", absl::StrJoin(text_types, ", "), ")"));
    }
    std::string text;
    if (auto st = ReadString(p, "text", ppath + ".text", &text); !st.ok()) return st;
    parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, "\n");
}

}  // namespace flotilla::worker::wire
