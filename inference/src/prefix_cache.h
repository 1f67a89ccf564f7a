// The KV pages of one model: allocation, reference counts, and the prefix cache that lets a new
// sequence reuse pages whose K/V another sequence already computed for the same leading tokens.
//
// A page that holds the K/V of tokens [b*P, b*P + n) of some sequence can be registered under
// its content: the chain key of its parent (the block before it; the first block's parent is
// the root of the weights epoch) and its n tokens. A full block (n = P) has a chain key of its
// own that its successors hang from. Keys start from the weights epoch, so K/V computed under
// one set of weights is never found under another; Invalidate drops every registration.
//
// A registered page is immutable: sequences share full blocks by reference, and a partial match
// (the block where a new prompt diverges, or a partial last block) is copied by the caller into
// a fresh page (copy on write). Pages nobody references stay registered, least recently
// released first in line for eviction when Allocate finds no free page.
//
// Not thread-safe: the engine calls it under its mutex.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::inference {

class PagePool {
 public:
  PagePool(uint32_t num_pages, uint32_t page_tokens);

  // A page with one reference: a free one, else the least recently released cached one
  // (dropped from the cache). RESOURCE_EXHAUSTED when every page is referenced.
  absl::StatusOr<int32_t> Allocate();
  void Retain(int32_t page);
  // Drops a reference; at zero the page is free, or cached (evictable) when registered.
  void Release(int32_t page);

  struct Match {
    std::vector<int32_t> shared;  // full blocks to use as they are (each retained once)
    int32_t copy_from = -1;       // a page whose first copy_tokens positions continue the match
    int32_t copy_tokens = 0;
    int32_t tokens() const;       // positions covered: shared blocks then the copied part
    int32_t page_tokens = 0;
  };
  // The longest cached prefix of tokens[0, limit): whole blocks by reference, then the best
  // partial block to copy. The caller retains copy_from while it copies, if it allocates.
  Match Lookup(uint64_t epoch, const std::vector<int32_t>& tokens, int32_t limit);

  // Registers the blocks of a sequence (pages[i] holds positions [i*P, (i+1)*P)) whose K/V is
  // final for tokens[0, n): the full blocks, and the partial last block when `partial`.
  // `done_blocks` (in/out) counts the leading full blocks already handled and `chain` (in/out)
  // is the chain key after them, so a live sequence registers each block once.
  void Register(uint64_t epoch, const std::vector<int32_t>& tokens, const std::vector<int32_t>& pages, int32_t n,
                bool partial, int32_t* done_blocks, uint64_t* chain);

  // Forgets every registration (new weights): cached pages become free.
  void Invalidate();

  uint32_t referenced() const { return referenced_; }
  uint32_t cached() const { return static_cast<uint32_t>(lru_.size()); }
  uint32_t num_pages() const { return static_cast<uint32_t>(info_.size()); }

 private:
  struct PageInfo {
    int32_t refs = 0;
    bool registered = false;
    uint64_t parent = 0;          // chain key of the block before
    uint64_t key = 0;             // own chain key (full blocks)
    std::vector<int32_t> tokens;  // the block's tokens (1..P)
    std::list<int32_t>::iterator lru;
  };
  static uint64_t Root(uint64_t epoch);
  static uint64_t Chain(uint64_t parent, const int32_t* tokens, int32_t n);
  void Unregister(int32_t page);
  // The registered child of `parent` holding exactly tokens[0, n), or -1.
  int32_t FindChild(uint64_t parent, const int32_t* tokens, int32_t n) const;

  uint32_t page_tokens_;
  std::vector<PageInfo> info_;
  std::vector<int32_t> free_;
  std::list<int32_t> lru_;  // registered pages with no reference, oldest first
  std::unordered_map<uint64_t, std::vector<int32_t>> children_;
  uint32_t referenced_ = 0;
};

}  // namespace flotilla::inference
