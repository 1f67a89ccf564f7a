// Sha256 of text and of files, as lower-case hex (OpenSSL's EVP interface).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flotilla::environments {

std::string Sha256Hex(std::string_view data);

// Incremental hashing of a build step's cache key.
class KeyHasher {
 public:
  KeyHasher();
  ~KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;
  // Adds a length-prefixed field, so that ("ab","c") and ("a","bc") differ.
  void Add(std::string_view field);
  std::string Finish();

 private:
  void* ctx_;
};

}  // namespace flotilla::environments
