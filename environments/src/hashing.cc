#include "hashing.h"

#include <openssl/evp.h>

#include "absl/strings/str_cat.h"

namespace flotilla::environments {
namespace {

std::string Hex(const unsigned char* md, unsigned int n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

KeyHasher::KeyHasher() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

KeyHasher::~KeyHasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void KeyHasher::Add(std::string_view field) {
  std::string len = absl::StrCat(field.size(), ":");
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), len.data(), len.size());
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), field.data(), field.size());
}

std::string KeyHasher::Finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &n);
  return Hex(md, n);
}

}  // namespace flotilla::environments
