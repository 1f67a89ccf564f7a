#include "jinja/renderer.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "jinja/attributes.h"
#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

namespace {

// Binds a macro's (or a call block's) parameters from a call into `frame`: positional first,
// then by keyword, then the default (evaluated in the frame, so it may use earlier
// parameters); the rest go to varargs, kwargs and caller.
template <typename EvalFn>
absl::Status BindParams(const std::vector<MacroParam>& params, const CallArgs& args, Scope& frame,
                        const std::shared_ptr<Scope>& frame_ptr, EvalFn eval) {
  for (size_t i = 0; i < params.size(); ++i) {
    const MacroParam& p = params[i];
    const Value* given = i < args.positional.size() ? &args.positional[i] : nullptr;
    for (const auto& [k, v] : args.keyword) {
      if (given == nullptr && k == p.name) given = &v;
    }
    if (given != nullptr) {
      frame.vars[p.name] = *given;
    } else if (p.default_value != nullptr) {
      ASSIGN_OR_RETURN(Value d, eval(*p.default_value, frame_ptr));
      frame.vars[p.name] = std::move(d);
    } else {
      frame.vars[p.name] = Value::Undefined(absl::StrCat("parameter '", p.name, "' was not provided"));
    }
  }
  ValueList varargs;
  for (size_t i = params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  ValueDict kwargs;
  for (const auto& [k, v] : args.keyword) {
    bool is_param = false;
    for (const MacroParam& p : params) is_param = is_param || p.name == k;
    if (k == "caller") {
      frame.vars["caller"] = v;
    } else if (!is_param) {
      kwargs.Set(k, v);
    }
  }
  frame.vars["varargs"] = Value::List(std::move(varargs), /*tuple=*/true);
  frame.vars["kwargs"] = Value::Dict(std::move(kwargs));
  return absl::OkStatus();
}

absl::StatusOr<Value> Slice(const Value& obj, const SliceSpec& spec) {
  if (spec.step && *spec.step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  if (obj.is_list()) {
    ValueList out;
    for (int64_t i : SliceIndices(spec, static_cast<int64_t>(obj.list().size()))) {
      out.push_back(obj.list()[static_cast<size_t>(i)]);
    }
    return Value::List(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    std::u32string u = Utf8Decode(obj.str());
    std::u32string out;
    for (int64_t i : SliceIndices(spec, static_cast<int64_t>(u.size()))) out.push_back(u[static_cast<size_t>(i)]);
    return Value::String(Utf8Encode(out));
  }
  return absl::InvalidArgumentError(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
}

}  // namespace

absl::Status Renderer::Locate(const absl::Status& s, int line) const {
  if (s.ok() || absl::StartsWith(s.message(), absl::StrCat(name_, ":"))) return s;
  return absl::Status(s.code(), absl::StrCat(name_, ":", line, ": ", s.message()));
}

absl::StatusOr<std::string> Renderer::Render(const Body& body, std::shared_ptr<Scope> globals) {
  auto root = std::make_shared<Scope>(std::move(globals));
  std::string out;
  Flow flow = Flow::kNormal;
  RETURN_IF_ERROR(Exec(body, root, out, flow));
  return out;
}

absl::Status Renderer::TooDeep(int line) const {
  return Locate(absl::InvalidArgumentError(absl::StrCat("recursion deeper than ", kMaxRenderDepth, " levels")), line);
}

absl::Status Renderer::Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out, Flow& flow) {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return TooDeep(body.empty() ? 0 : body.front()->line);
  for (const auto& s : body) {
    RETURN_IF_ERROR(ExecOne(*s, scope, out, flow));
    if (out.size() > kMaxStringBytes) {
      return Locate(absl::InvalidArgumentError(absl::StrCat("output larger than ", kMaxStringBytes, " bytes")), s->line);
    }
    if (flow != Flow::kNormal) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Renderer::ExecOne(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out, Flow& flow) {
  switch (s.kind) {
    case Stmt::Kind::kText: out += s.text; return absl::OkStatus();
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      out += v.ToString();
      return absl::OkStatus();
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(Value c, Eval(*s.conditions[i], scope));
        if (c.Truthy()) return Exec(s.bodies[i], scope, out, flow);
      }
      return Exec(s.else_body, scope, out, flow);
    case Stmt::Kind::kFor: return ExecFor(s, scope, out);
    case Stmt::Kind::kSet: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      return Assign(s.target, v, scope, s.line);
    }
    case Stmt::Kind::kSetBlock:
    case Stmt::Kind::kFilterBlock: {
      std::string text;
      Flow inner = Flow::kNormal;
      RETURN_IF_ERROR(Exec(s.bodies[0], scope, text, inner));
      Value v = Value::String(std::move(text));
      if (s.expr != nullptr) {
        ASSIGN_OR_RETURN(v, EvalFilter(*s.expr, scope, &v));
      }
      if (s.kind == Stmt::Kind::kFilterBlock) {
        out += v.ToString();
        return absl::OkStatus();
      }
      return Assign(s.target, v, scope, s.line);
    }
    case Stmt::Kind::kMacro: scope->vars[s.name] = MakeMacro(s, scope); return absl::OkStatus();
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *s.expr;
      ASSIGN_OR_RETURN(Value callee, Eval(*call.items[0], scope));
      if (!callee.is_function()) return Locate(absl::InvalidArgumentError("call block needs a macro"), s.line);
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1, scope));
      args.keyword.emplace_back("caller", MakeCaller(s, scope));
      absl::StatusOr<Value> v = callee.function()(args);
      if (!v.ok()) return Locate(v.status(), s.line);
      out += v->ToString();
      return absl::OkStatus();
    }
    case Stmt::Kind::kBreak: flow = Flow::kBreak; return absl::OkStatus();
    case Stmt::Kind::kContinue: flow = Flow::kContinue; return absl::OkStatus();
    case Stmt::Kind::kScope: return Exec(s.bodies[0], scope, out, flow);
  }
  return absl::OkStatus();
}

absl::Status Renderer::ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, scope));
  absl::StatusOr<ValueList> all = iterable.Iterate();
  if (!all.ok()) return Locate(all.status(), s.line);
  ValueList items;
  auto count = [&]() -> absl::Status {
    if (++iterations_ <= kMaxLoopIterations) return absl::OkStatus();
    return Locate(absl::InvalidArgumentError(absl::StrCat("more than ", kMaxLoopIterations, " loop iterations")), s.line);
  };
  if (s.condition != nullptr) {
    for (const Value& item : *all) {
      RETURN_IF_ERROR(count());
      auto probe = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(Assign(s.target, item, probe, s.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*s.condition, probe));
      if (keep.Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(*all);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(count());
    auto frame = std::make_shared<Scope>(scope);
    RETURN_IF_ERROR(Assign(s.target, items[static_cast<size_t>(i)], frame, s.line));
    ValueDict loop;
    loop.Set("index", Value::Int(i + 1));
    loop.Set("index0", Value::Int(i));
    loop.Set("revindex", Value::Int(n - i));
    loop.Set("revindex0", Value::Int(n - i - 1));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i == n - 1));
    loop.Set("length", Value::Int(n));
    loop.Set("depth", Value::Int(1));
    loop.Set("depth0", Value::Int(0));
    loop.Set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("there is no previous item"));
    loop.Set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::Undefined("there is no next item"));
    loop.Set("cycle", Value::Callable(
                          [i](const CallArgs& a) -> absl::StatusOr<Value> {
                            if (a.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
                            return a.positional[static_cast<size_t>(i) % a.positional.size()];
                          },
                          "loop.cycle"));
    frame->vars["loop"] = Value::Dict(std::move(loop));
    Flow flow = Flow::kNormal;
    RETURN_IF_ERROR(Exec(s.bodies[0], frame, out, flow));
    if (flow == Flow::kBreak) break;
  }
  if (n == 0) {
    Flow flow = Flow::kNormal;
    return Exec(s.else_body, std::make_shared<Scope>(scope), out, flow);
  }
  return absl::OkStatus();
}

absl::Status Renderer::Assign(const Target& target, const Value& value, const std::shared_ptr<Scope>& scope, int line) {
  if (!target.attribute.empty()) {
    const Value* ns = scope->Find(target.names[0]);
    if (ns == nullptr || !ns->is_dict() || !ns->dict().is_namespace) {
      return Locate(absl::InvalidArgumentError(
                        absl::StrCat("cannot assign attribute on non-namespace object '", target.names[0], "'")),
                    line);
    }
    ns->mutable_dict().Set(target.attribute, value);
    return absl::OkStatus();
  }
  if (!target.tuple) {
    scope->vars[target.names[0]] = value;
    return absl::OkStatus();
  }
  if (!value.is_list() && !value.is_string() && !value.is_dict()) {
    return Locate(absl::InvalidArgumentError(absl::StrCat("cannot unpack non-iterable ", value.TypeName(), " object")), line);
  }
  ASSIGN_OR_RETURN(ValueList parts, value.Iterate());
  if (parts.size() != target.names.size()) {
    return Locate(absl::InvalidArgumentError(absl::StrCat(parts.size() > target.names.size() ? "too many" : "not enough",
                                                          " values to unpack (expected ", target.names.size(), ", got ",
                                                          parts.size(), ")")),
                  line);
  }
  for (size_t i = 0; i < parts.size(); ++i) scope->vars[target.names[i]] = parts[i];
  return absl::OkStatus();
}

Value Renderer::MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  std::weak_ptr<Scope> defined_in = scope;
  return Value::Callable(
      [this, &s, defined_in](const CallArgs& args) -> absl::StatusOr<Value> {
        std::shared_ptr<Scope> parent = defined_in.lock();
        if (parent == nullptr) return Locate(absl::FailedPreconditionError("macro outlived its scope"), s.line);
        auto frame = std::make_shared<Scope>(parent);
        RETURN_IF_ERROR(BindParams(s.params, args, *frame, frame,
                                   [this](const Expr& e, const std::shared_ptr<Scope>& f) { return Eval(e, f); }));
        std::string out;
        Flow flow = Flow::kNormal;
        RETURN_IF_ERROR(Exec(s.bodies[0], frame, out, flow));
        return Value::String(std::move(out));
      },
      s.name);
}

Value Renderer::MakeCaller(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  std::weak_ptr<Scope> call_site = scope;
  return Value::Callable(
      [this, &s, call_site](const CallArgs& args) -> absl::StatusOr<Value> {
        std::shared_ptr<Scope> parent = call_site.lock();
        if (parent == nullptr) return Locate(absl::FailedPreconditionError("caller outlived its scope"), s.line);
        auto frame = std::make_shared<Scope>(parent);
        RETURN_IF_ERROR(BindParams(s.params, args, *frame, frame,
                                   [this](const Expr& e, const std::shared_ptr<Scope>& f) { return Eval(e, f); }));
        std::string out;
        Flow flow = Flow::kNormal;
        RETURN_IF_ERROR(Exec(s.bodies[0], frame, out, flow));
        return Value::String(std::move(out));
      },
      "caller");
}

absl::StatusOr<Value> Renderer::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return TooDeep(e.line);
  absl::StatusOr<Value> v = EvalUnlocated(e, scope);
  if (!v.ok()) return Locate(v.status(), e.line);
  return v;
}

absl::StatusOr<CallArgs> Renderer::EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope) {
  CallArgs args;
  for (size_t i = first; i < e.items.size(); ++i) {
    ASSIGN_OR_RETURN(Value v, Eval(*e.items[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, x] : e.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
    args.keyword.emplace_back(k, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Renderer::EvalFilter(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* block) {
  Value operand;
  if (e.items[0] == nullptr) {
    if (block == nullptr) return absl::InternalError("a filter without an operand");
    operand = *block;
  } else if (block != nullptr && e.items[0]->kind == Expr::Kind::kFilter) {
    ASSIGN_OR_RETURN(operand, EvalFilter(*e.items[0], scope, block));
  } else {
    ASSIGN_OR_RETURN(operand, Eval(*e.items[0], scope));
  }
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  absl::StatusOr<Value> v = ApplyFilter(e.name, operand, args);
  if (!v.ok()) return Locate(v.status(), e.line);
  return v;
}

absl::StatusOr<Value> Renderer::EvalUnlocated(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: {
      const Value* v = scope->Find(e.name);
      if (v != nullptr) return *v;
      return Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      for (const auto& item : e.items) {
        ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      ValueDict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        ASSIGN_OR_RETURN(Value k, Eval(*e.items[i], scope));
        ASSIGN_OR_RETURN(Value v, Eval(*e.items[i + 1], scope));
        if (!k.is_string()) return absl::InvalidArgumentError("dict keys must be strings");
        d.Set(k.str(), std::move(v));
      }
      return Value::Dict(std::move(d));
    }
    case Expr::Kind::kGetattr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.items[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      return GetAttribute(obj, e.name);
    }
    case Expr::Kind::kGetitem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.items[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      ASSIGN_OR_RETURN(Value key, Eval(*e.items[1], scope));
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.items[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      SliceSpec spec;
      std::optional<int64_t>* parts[] = {&spec.start, &spec.stop, &spec.step};
      for (int i = 0; i < 3; ++i) {
        if (e.items[1 + i] == nullptr) continue;
        ASSIGN_OR_RETURN(Value v, Eval(*e.items[1 + i], scope));
        if (v.is_none()) continue;
        if (!v.is_int() && !v.is_bool()) return absl::InvalidArgumentError("slice indices must be integers or None");
        *parts[i] = v.int_value();
      }
      return Slice(obj, spec);
    }
    case Expr::Kind::kCall: {
      ASSIGN_OR_RETURN(Value callee, Eval(*e.items[0], scope));
      if (callee.is_undefined()) return UndefinedError(callee);
      if (!callee.is_function()) return absl::InvalidArgumentError(absl::StrCat("'", callee.TypeName(), "' object is not callable"));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      return callee.function()(args);
    }
    case Expr::Kind::kFilter: return EvalFilter(e, scope, nullptr);
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(Value operand, Eval(*e.items[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, operand, args));
      return Value::Bool(r != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.items[0], scope));
      if (!v.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat("bad operand type for unary ", e.kind == Expr::Kind::kNeg ? "-" : "+",
                                                       ": '", v.TypeName(), "'"));
      }
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.int_value()) : v;
      if (v.is_float()) return Value::Float(-v.number());
      if (v.int_value() == std::numeric_limits<int64_t>::min()) {
        return absl::InvalidArgumentError("integer overflow in unary '-'");
      }
      return Value::Int(-v.int_value());
    }
    case Expr::Kind::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.items[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.items[0], scope));
      ASSIGN_OR_RETURN(Value b, Eval(*e.items[1], scope));
      return BinaryOp(e.name, a, b);
    }
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.items[0], scope));
      if (a.Truthy() == (e.kind == Expr::Kind::kOr)) return a;
      return Eval(*e.items[1], scope);
    }
    case Expr::Kind::kCondition: {
      ASSIGN_OR_RETURN(Value c, Eval(*e.items[1], scope));
      if (c.Truthy()) return Eval(*e.items[0], scope);
      if (e.items[2] == nullptr) return Value::Undefined("the inline if expression evaluated to false and no else section was defined");
      return Eval(*e.items[2], scope);
    }
  }
  return absl::InternalError("unknown expression");
}

}  // namespace flotilla::inference::jinja
