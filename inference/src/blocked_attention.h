// Causal attention of a step's query rows over the paged KV cache, for both CPU backends,
// flash-style: keys and values are visited in tiles of kKeyTile positions (aligned to absolute
// positions), scores of one tile at a time with an online softmax (running max and sum per
// row), so no rows x keys matrix is ever made. Work is cut into jobs of (segment, KV head,
// block of kQueryBlock rows) that share one gathered key tile across the rows and the query
// heads of the group; jobs run on the thread pool.
//
// Each row's result depends only on its own query, its position and the cache's contents (the
// tiles are fixed by absolute position), never on which other rows share its step: a prompt
// prefilled in one chunk, in several, or after a reused prefix gives the same bits.
//
// The products and the exponentials use AVX-512F, else AVX2/FMA, when the CPU has them
// (checked at run time), else portable scalar code (attention_kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention_kernels.h"

namespace flotilla::inference {

class ThreadPool;

// Where one layer's K and V rows of a position sit inside a KV page (all in floats).
struct KvPageLayout {
  int page_tokens = 0;
  size_t k_base = 0, v_base = 0;      // this layer's first K / V row in a page
  size_t k_stride = 0, v_stride = 0;  // between consecutive positions
  size_t k_head = 0, v_head = 0;      // between consecutive KV heads
};

// Query rows [row0, row0 + rows) of the step, at positions pos0, pos0 + 1, ... of one sequence
// whose pages (in order) start at `pages`.
struct AttnSegment {
  int row0 = 0, rows = 0, pos0 = 0;
  std::vector<const float*> pages;
};

struct AttnShape {
  int heads = 0, kv_heads = 0;  // query heads; heads / kv_heads share a KV head
  int k_dim = 0, v_dim = 0;     // per head
  float scale = 1.0f;
  int window = 0;               // > 0: a row at position p sees keys (p - window, p]
};

bool AttentionIsaSupported(AttnIsa isa);

// q: step rows x heads x k_dim; o: step rows x heads x v_dim (only the segments' rows are
// written). The K/V of every row must already be in its page. pool may be null. An isa the
// CPU lacks runs the best it has.
void BlockedAttention(const AttnShape& shape, const KvPageLayout& layout, const std::vector<AttnSegment>& segments,
                      const float* q, float* o, ThreadPool* pool, AttnIsa isa = AttnIsa::kBest);

// Cuts a step's rows into segments: consecutive rows of one sequence at consecutive positions.
// page_base(seq, page_index) gives the start of that page. Used by both CPU backends.
template <class PageBase>
std::vector<AttnSegment> SegmentRows(const std::vector<int32_t>& row_seq, const std::vector<int32_t>& positions,
                                     const std::vector<std::vector<int32_t>>& seq_pages, PageBase page_base) {
  std::vector<AttnSegment> out;
  const int T = static_cast<int>(row_seq.size());
  for (int r = 0; r < T;) {
    int e = r + 1;
    while (e < T && row_seq[e] == row_seq[r] && positions[e] == positions[e - 1] + 1) ++e;
    AttnSegment s;
    s.row0 = r;
    s.rows = e - r;
    s.pos0 = positions[r];
    const std::vector<int32_t>& table = seq_pages[row_seq[r]];
    s.pages.reserve(table.size());
    for (size_t i = 0; i < table.size(); ++i) s.pages.push_back(page_base(table[i]));
    out.push_back(std::move(s));
    r = e;
  }
  return out;
}

}  // namespace flotilla::inference
