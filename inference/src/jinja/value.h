// The values a template computes with, modelled on the Python objects jinja2 hands around:
// undefined, None, bool, int, float, str, list (or tuple), dict (insertion-ordered, string
// keys), and callables (built-in functions, bound methods, macros). Lists and dicts share
// their storage on copy: templates run in transformers' immutable sandbox, so only a
// namespace() object is ever changed after it is made, and every holder must see that change.
//
// Not thread-safe; a value lives within one render.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference::jinja {

class Value;
using ValueList = std::vector<Value>;

// A dict in insertion order, as Python's.
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // a namespace() object: the one thing `set a.b = ...` may change

  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name` (removed from the call), or nullptr.
  const Value* Get(size_t index, std::string_view name) const;
};

using Function = std::function<absl::StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(ValueList items, bool tuple = false);
  static Value Dict(ValueDict dict);
  static Value Callable(Function fn, std::string name);
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double number() const;  // int, float or bool as a double
  const std::string& str() const { return s_; }  // a string's text; an undefined's hint
  const ValueList& list() const { return *list_; }
  const ValueDict& dict() const { return *dict_; }
  ValueDict& mutable_dict() const { return *dict_; }
  const Function& function() const { return *fn_; }

  // Python's bool(x); undefined is false.
  bool Truthy() const;
  // Python's str(x) (jinja2 prints undefined as "").
  std::string ToString() const;
  // Python's repr(x).
  std::string Repr() const;
  // Python's ==.
  bool Equals(const Value& other) const;
  // Python's len(x); an error for values without a length.
  absl::StatusOr<int64_t> Length() const;
  // The items a for loop visits: a list's items, a dict's keys, a string's characters.
  absl::StatusOr<ValueList> Iterate() const;
  // A type name for messages, as Python's: "str", "dict", "NoneType", "undefined".
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> fn_;
};

// Call arguments by position or keyword: nullopt (or the default) when absent or None.
std::optional<std::string> StringArg(const CallArgs& args, size_t index, std::string_view name);
int64_t IntArg(const CallArgs& args, size_t index, std::string_view name, int64_t dflt);
bool BoolArg(const CallArgs& args, size_t index, std::string_view name, bool dflt);

// Python's float repr: the shortest text that reads back as the same double.
std::string PyFloatRepr(double d);
// Python's < on two values; an error for values Python cannot order.
absl::StatusOr<bool> Less(const Value& a, const Value& b);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  int indent = -1;  // < 0: one line
  bool sort_keys = false;
  std::string item_separator;  // empty: Python's default for the indent
  std::string key_separator;
  bool custom_separators = false;
};
// Python's json.dumps.
absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonDumpOptions& options);

}  // namespace flotilla::inference::jinja
