// The JSON of the wire APIs' request bodies: parsing, and field readers whose errors name the
// field. Pure functions of their input (the request parsers and their fuzz target use them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker::wire {

using InJson = nlohmann::json;

absl::StatusOr<InJson> ParseBody(const std::string& body);

// Field readers: absent fields keep the default; a present field of the wrong type is an
// InvalidArgument naming `path`.
absl::Status ReadString(const InJson& obj, const char* key, const std::string& path, std::string* out);
absl::Status ReadBool(const InJson& obj, const char* key, const std::string& path, bool* out);
absl::Status ReadFloat(const InJson& obj, const char* key, const std::string& path, float lo,
                       float hi, float* out);
absl::Status ReadUint(const InJson& obj, const char* key, const std::string& path, uint32_t lo,
                      uint32_t hi, uint32_t* out);
absl::Status ReadSeed(const InJson& obj, const char* key, const std::string& path,
                      std::optional<uint64_t>* out);
// A text content: a string, null (empty), or an array of parts whose `text` is taken when the
// part's type is one of `text_types`. Other part types are an error naming the part.
absl::StatusOr<std::string> ReadTextContent(const InJson& v, const std::string& path,
                                            const std::vector<std::string>& text_types);
absl::Status Invalid(const std::string& path, const std::string& what);

}  // namespace flotilla::worker::wire
