// The bounds every parse and render keeps to, whatever the template. A chat template comes with
// a model folder: a broken or hostile one must end in an InvalidArgument naming its line, never
// in a stack overflow, an exhausted memory or a render that does not end. Real templates stay
// far below each bound (they nest a few levels and loop over the messages and tools: two passes
// over a 10,000-message conversation are 20,000 iterations).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flotilla::inference::jinja {

constexpr int kMaxExpressionDepth = 128;         // levels of one parsed expression
constexpr int kMaxParseNesting = 128;            // blocks and parenthesised expressions inside one another
constexpr int kMaxRenderDepth = 256;             // bodies and expressions evaluating inside one another
constexpr int64_t kMaxLoopIterations = 50'000;     // for-loop iterations per render
constexpr size_t kMaxStringBytes = 16u << 20;    // any string a render builds, and its output
constexpr size_t kMaxListItems = 1u << 20;       // any list a render builds with + or *

}  // namespace flotilla::inference::jinja
