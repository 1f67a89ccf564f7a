#include "prefix_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace flotilla::inference {

namespace {
uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}
}  // namespace

PagePool::PagePool(uint32_t num_pages, uint32_t page_tokens) : page_tokens_(page_tokens), info_(num_pages) {
  for (int32_t p = static_cast<int32_t>(num_pages) - 1; p >= 0; --p) free_.push_back(p);
}

uint64_t PagePool::Root(uint64_t epoch) { return Mix(0x666c6f74696c6c61ull, epoch); }

uint64_t PagePool::Chain(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = Mix(parent, static_cast<uint64_t>(n));
  for (int32_t i = 0; i < n; ++i) h = Mix(h, static_cast<uint32_t>(tokens[i]));
  return h;
}

int32_t PagePool::Match::tokens() const {
  return static_cast<int32_t>(shared.size()) * page_tokens + copy_tokens;
}

absl::StatusOr<int32_t> PagePool::Allocate() {
  int32_t page;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    page = lru_.front();
    lru_.pop_front();
    Unregister(page);
  } else {
    return absl::ResourceExhaustedError(absl::StrCat("all ", info_.size(), " KV pages are in use"));
  }
  info_[page].refs = 1;
  ++referenced_;
  return page;
}

void PagePool::Retain(int32_t page) {
  PageInfo& p = info_[page];
  if (p.refs++ == 0) {
    ++referenced_;
    if (p.registered) lru_.erase(p.lru);
  }
}

void PagePool::Release(int32_t page) {
  PageInfo& p = info_[page];
  if (--p.refs > 0) return;
  --referenced_;
  if (p.registered) {
    p.lru = lru_.insert(lru_.end(), page);
  } else {
    free_.push_back(page);
  }
}

void PagePool::Unregister(int32_t page) {
  PageInfo& p = info_[page];
  if (!p.registered) return;
  auto it = children_.find(p.parent);
  if (it != children_.end()) {
    std::vector<int32_t>& kids = it->second;
    kids.erase(std::remove(kids.begin(), kids.end(), page), kids.end());
    if (kids.empty()) children_.erase(it);
  }
  p.registered = false;
  p.tokens.clear();
}

int32_t PagePool::FindChild(uint64_t parent, const int32_t* tokens, int32_t n) const {
  auto it = children_.find(parent);
  if (it == children_.end()) return -1;
  for (int32_t page : it->second) {
    const PageInfo& p = info_[page];
    if (static_cast<int32_t>(p.tokens.size()) == n && std::equal(p.tokens.begin(), p.tokens.end(), tokens)) return page;
  }
  return -1;
}

PagePool::Match PagePool::Lookup(uint64_t epoch, const std::vector<int32_t>& tokens, int32_t limit) {
  Match m;
  m.page_tokens = static_cast<int32_t>(page_tokens_);
  const int32_t P = static_cast<int32_t>(page_tokens_);
  limit = std::min<int32_t>(limit, static_cast<int32_t>(tokens.size()));
  uint64_t parent = Root(epoch);
  for (int32_t at = 0; at < limit; at += P) {
    if (limit - at >= P) {
      const int32_t page = FindChild(parent, &tokens[at], P);
      if (page >= 0) {
        Retain(page);
        m.shared.push_back(page);
        parent = info_[page].key;
        continue;
      }
    }
    // The block where the prompt diverges (or ends): the child sharing the most leading tokens.
    auto it = children_.find(parent);
    if (it == children_.end()) break;
    const int32_t room = std::min(P, limit - at);
    for (int32_t page : it->second) {
      const PageInfo& p = info_[page];
      const int32_t n = std::min(room, static_cast<int32_t>(p.tokens.size()));
      int32_t same = 0;
      while (same < n && p.tokens[same] == tokens[at + same]) ++same;
      if (same > m.copy_tokens) {
        m.copy_tokens = same;
        m.copy_from = page;
      }
    }
    break;
  }
  return m;
}

void PagePool::Register(uint64_t epoch, const std::vector<int32_t>& tokens, const std::vector<int32_t>& pages,
                        int32_t n, bool partial, int32_t* done_blocks, uint64_t* chain) {
  const int32_t P = static_cast<int32_t>(page_tokens_);
  if (*done_blocks == 0) *chain = Root(epoch);
  n = std::min<int32_t>(n, static_cast<int32_t>(tokens.size()));
  for (int32_t b = *done_blocks; b < static_cast<int32_t>(pages.size()); ++b) {
    const int32_t at = b * P, count = std::min(P, n - at);
    if (count <= 0 || (count < P && !partial)) break;
    const int32_t page = pages[b];
    PageInfo& p = info_[page];
    if (count == P) {
      // Already this page (shared from the cache), another page with the same content, or new.
      if (!(p.registered && p.parent == *chain)) {
        if (FindChild(*chain, &tokens[at], P) < 0 && !p.registered) {
          p.registered = true;
          p.parent = *chain;
          p.key = Chain(*chain, &tokens[at], P);
          p.tokens.assign(tokens.begin() + at, tokens.begin() + at + P);
          children_[*chain].push_back(page);
        }
      }
      *chain = Chain(*chain, &tokens[at], P);
      *done_blocks = b + 1;
      continue;
    }
    // A partial last block: worth keeping only if no registered sibling already starts with it.
    if (p.registered) break;
    auto it = children_.find(*chain);
    bool covered = false;
    if (it != children_.end()) {
      for (int32_t other : it->second) {
        const PageInfo& o = info_[other];
        if (static_cast<int32_t>(o.tokens.size()) >= count &&
            std::equal(tokens.begin() + at, tokens.begin() + at + count, o.tokens.begin())) {
          covered = true;
          break;
        }
      }
    }
    if (!covered) {
      p.registered = true;
      p.parent = *chain;
      p.key = 0;
      p.tokens.assign(tokens.begin() + at, tokens.begin() + at + count);
      children_[*chain].push_back(page);
    }
    break;
  }
}

void PagePool::Invalidate() {
  for (int32_t page : lru_) {
    info_[page].registered = false;
    info_[page].tokens.clear();
    free_.push_back(page);
  }
  lru_.clear();
  for (PageInfo& p : info_) {
    p.registered = false;
    p.tokens.clear();
  }
  children_.clear();
}

}  // namespace flotilla::inference
