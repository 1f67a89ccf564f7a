#include "hf/bpe_model.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::inference::hf {
namespace {

constexpr size_t kCacheMaxWordBytes = 256;
constexpr size_t kCacheMaxEntries = 200000;

absl::Status Unsupported(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ".", what, " is not supported"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object"));
  const std::string type = j.value("type", "BPE");
  if (type != "BPE") return absl::InvalidArgumentError(absl::StrCat(where, ".type '", type, "' is not supported"));
  if (j.contains("dropout") && !j["dropout"].is_null()) return Unsupported(where, "dropout");
  if (j.value("byte_fallback", false)) return Unsupported(where, "byte_fallback");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (j.contains(key) && !j[key].is_null() && !(j[key].is_string() && j[key].get<std::string>().empty())) {
      return Unsupported(where, key);
    }
  }
  std::unique_ptr<BpeModel> m(new BpeModel());
  if (!j.contains("vocab") || !j["vocab"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".vocab: expected an object of token -> id"));
  }
  const auto& vocab = j["vocab"];
  m->vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > (1 << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".vocab['", it.key(), "']: expected an id >= 0"));
    }
    const auto id = static_cast<int32_t>(it.value().get<int64_t>());
    m->vocab_[it.key()] = id;
    if (static_cast<size_t>(id) >= m->id_to_token_.size()) m->id_to_token_.resize(static_cast<size_t>(id) + 1);
    m->id_to_token_[static_cast<size_t>(id)] = it.key();
  }
  if (!j.contains("merges") || !j["merges"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".merges: expected an array"));
  }
  const auto& merges = j["merges"];
  m->merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".merges[", r, "]: expected \"a b\", got '", s, "'"));
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ".merges[", r, "]: expected \"a b\" or [a, b]"));
    }
    const int32_t* ia = m->IdOf(a);
    const int32_t* ib = m->IdOf(b);
    const int32_t* ic = m->IdOf(a + b);
    if (ia == nullptr || ib == nullptr || ic == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".merges[", r, "]: '", ia == nullptr ? a : ib == nullptr ? b : a + b, "' is not in the vocab"));
    }
    m->merges_.try_emplace(PairKey(*ia, *ib), Merge{static_cast<int32_t>(r), *ic});
  }
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    const int32_t* unk = m->IdOf(j["unk_token"].get<std::string>());
    if (unk == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".unk_token: '", j["unk_token"].get<std::string>(), "' is not in the vocab"));
    }
    m->unk_id_ = *unk;
  }
  m->fuse_unk_ = j.value("fuse_unk", false);
  m->ignore_merges_ = j.value("ignore_merges", false);
  return m;
}

const std::string* BpeModel::TokenOf(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  const std::string& t = id_to_token_[static_cast<size_t>(id)];
  return t.empty() ? nullptr : &t;
}

const int32_t* BpeModel::IdOf(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  return it == vocab_.end() ? nullptr : &it->second;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t* id = IdOf(word)) {
      ids->push_back(*id);
      return;
    }
  }
  if (word.size() > kCacheMaxWordBytes) {
    MergeWord(word, ids);
    return;
  }
  {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(absl::string_view(word.data(), word.size()));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> out;
  MergeWord(word, &out);
  ids->insert(ids->end(), out.begin(), out.end());
  absl::MutexLock lock(&cache_mu_);
  if (cache_.size() >= kCacheMaxEntries) cache_.clear();
  cache_.emplace(std::string(word), std::move(out));
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  // Symbols: one per character, as a doubly linked list over a vector.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    int32_t len;  // bytes of the word this symbol covers; 0 once merged away
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const auto b0 = static_cast<unsigned char>(word[i]);
    size_t n = b0 < 0x80 ? 1 : b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
    n = std::min(n, word.size() - i);
    const int32_t* id = IdOf(word.substr(i, n));
    if (id != nullptr) {
      sym.push_back({*id, 0, 0, static_cast<int32_t>(n)});
    } else if (unk_id_ >= 0) {
      if (fuse_unk_ && !sym.empty() && sym.back().id == unk_id_) {
        sym.back().len += static_cast<int32_t>(n);
      } else {
        sym.push_back({unk_id_, 0, 0, static_cast<int32_t>(n)});
      }
    }  // else the character is dropped, as the library does without an unk token
    i += n;
  }
  const auto count = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < count; ++i) {
    sym[static_cast<size_t>(i)].prev = i - 1;
    sym[static_cast<size_t>(i)].next = i + 1 < count ? i + 1 : -1;
  }
  // Candidate merges: (rank, position of the left symbol, its right neighbor's id at push time).
  struct Candidate {
    int32_t rank, pos, result, right_id, right_pos;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[static_cast<size_t>(left)].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(sym[static_cast<size_t>(left)].id, sym[static_cast<size_t>(right)].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, it->second.result, sym[static_cast<size_t>(right)].id, right});
  };
  for (int32_t i = 0; i + 1 < count; ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(c.pos)];
    // Stale: the left symbol was merged away or changed, or its right neighbor did.
    if (l.len == 0 || l.next != c.right_pos) continue;
    Symbol& r = sym[static_cast<size_t>(c.right_pos)];
    if (r.len == 0 || r.id != c.right_id) continue;
    auto it = merges_.find(PairKey(l.id, r.id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;
    l.id = c.result;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.pos;
    r.len = 0;
    push(l.prev);
    push(c.pos);
  }
  for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    ids->push_back(sym[static_cast<size_t>(i)].id);
  }
}

}  // namespace flotilla::inference::hf
