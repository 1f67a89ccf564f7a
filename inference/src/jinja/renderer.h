// Executes a parsed template: statements write text, expressions compute values, with
// jinja2's scoping (a for loop's body runs in a fresh scope per iteration, `if` opens none,
// a macro sees the scope it was defined in, namespace() objects carry values out of loops).
//
// Not thread-safe; one Renderer per render call.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "jinja/ast.h"
#include "jinja/limits.h"
#include "jinja/value.h"

namespace flotilla::inference::jinja {

struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  const Value* Find(const std::string& name) const;
};

class Renderer {
 public:
  explicit Renderer(std::string_view template_name) : name_(template_name) {}

  // Renders `body` with `globals` (the outermost scope) under it.
  absl::StatusOr<std::string> Render(const Body& body, std::shared_ptr<Scope> globals);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out, Flow& flow);
  absl::Status ExecOne(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out, Flow& flow);
  absl::Status ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  absl::Status Assign(const Target& target, const Value& value, const std::shared_ptr<Scope>& scope, int line);
  Value MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value MakeCaller(const Stmt& s, const std::shared_ptr<Scope>& scope);

  absl::StatusOr<Value> Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalUnlocated(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope);
  // A filter chain whose innermost operand is null applied to `block` (a block's output).
  absl::StatusOr<Value> EvalFilter(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* block);

  // One level deeper for the guard's lifetime; InvalidArgument at `line` past kMaxRenderDepth.
  class DepthGuard {
   public:
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    bool exceeded() const { return depth_ > kMaxRenderDepth; }

   private:
    int& depth_;
  };
  absl::Status TooDeep(int line) const;

  // Prefixes "<name>:<line>: " unless the error already names a place in this template.
  absl::Status Locate(const absl::Status& s, int line) const;

  std::string name_;
  // The render's budget (limits.h): how deep Exec and Eval are nested now, and the loop
  // iterations run so far.
  int depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace flotilla::inference::jinja
