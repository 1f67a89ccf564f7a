// The BPE `model` of a tokenizer.json: vocab, merges (as "a b" strings or [a, b] pairs),
// unk_token / fuse_unk, ignore_merges. Merging follows the Hugging Face library: the pair of
// lowest merge rank first, the leftmost among equals, by a priority queue over a linked list of
// symbols, so a word of n symbols costs O(n log n). Results for words up to 256 bytes are
// cached. Thread-safe: the cache is behind a mutex, everything else is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference::hf {

class BpeModel {
 public:
  // `where` names the field for errors ("tokenizer.json: model").
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& j, const std::string& where);

  // Appends the ids of one pre-tokenized word, given in the model's alphabet (byte-level
  // characters when the pre-tokenizer is ByteLevel).
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  // The vocab entry for an id, or null.
  const std::string* TokenOf(int32_t id) const;
  const int32_t* IdOf(std::string_view token) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace flotilla::inference::hf
