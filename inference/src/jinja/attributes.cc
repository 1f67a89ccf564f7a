#include "jinja/attributes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {
namespace {

Value Bound(std::string name, Function fn) { return Value::Callable(std::move(fn), std::move(name)); }

absl::StatusOr<bool> StartsOrEnds(const std::string& s, const Value& affixes, bool start) {
  std::vector<std::string> options;
  if (affixes.is_string()) {
    options.push_back(affixes.str());
  } else if (affixes.is_tuple()) {
    for (const Value& v : affixes.list()) {
      if (!v.is_string()) return absl::InvalidArgumentError("startswith/endswith takes strings");
      options.push_back(v.str());
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(start ? "startswith" : "endswith",
                                                   " first arg must be str or a tuple of str, not ", affixes.TypeName()));
  }
  for (const std::string& o : options) {
    if (o.size() > s.size()) continue;
    if (start ? s.compare(0, o.size(), o) == 0 : s.compare(s.size() - o.size(), o.size(), o) == 0) return true;
  }
  return false;
}

bool AllChars(const std::string& s, bool (*pred)(char32_t)) {
  std::u32string u = Utf8Decode(s);
  return !u.empty() && std::all_of(u.begin(), u.end(), pred);
}

absl::StatusOr<Value> StringMethod(const std::string& s, const std::string& name, const CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::String(PyStrip(s, StringArg(a, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    std::optional<std::string> sep = StringArg(a, 0, "sep");
    if (sep && sep->empty()) return absl::InvalidArgumentError("empty separator");
    ValueList parts;
    for (std::string& p : PySplit(s, sep, IntArg(a, 1, "maxsplit", -1), name == "rsplit")) {
      parts.push_back(Value::String(std::move(p)));
    }
    return Value::List(std::move(parts));
  }
  if (name == "splitlines") {
    ValueList parts;
    for (std::string& p : PySplitLines(s, BoolArg(a, 0, "keepends", false))) parts.push_back(Value::String(std::move(p)));
    return Value::List(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* affix = a.Get(0, "prefix");
    if (affix == nullptr) affix = a.Get(0, "suffix");
    if (affix == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, "() takes at least 1 argument"));
    ASSIGN_OR_RETURN(bool r, StartsOrEnds(s, *affix, name == "startswith"));
    return Value::Bool(r);
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "replace") {
    std::optional<std::string> old = StringArg(a, 0, "old"), repl = StringArg(a, 1, "new");
    if (!old || !repl) return absl::InvalidArgumentError("replace() takes at least 2 arguments");
    return Value::String(PyReplace(s, *old, *repl, IntArg(a, 2, "count", -1)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    std::optional<std::string> sub = StringArg(a, 0, "sub");
    if (!sub) return absl::InvalidArgumentError(absl::StrCat(name, "() takes at least 1 argument"));
    int64_t at = PyFind(s, *sub, name[0] == 'r');
    if (at < 0 && name.find("index") != std::string::npos) return absl::InvalidArgumentError("substring not found");
    return Value::Int(at);
  }
  if (name == "count") {
    std::optional<std::string> sub = StringArg(a, 0, "sub");
    if (!sub) return absl::InvalidArgumentError("count() takes at least 1 argument");
    return Value::Int(PyCount(s, *sub));
  }
  if (name == "join") {
    const Value* items = a.Get(0, "iterable");
    if (items == nullptr) return absl::InvalidArgumentError("join() takes exactly one argument");
    ASSIGN_OR_RETURN(ValueList list, items->Iterate());
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("sequence item ", i, ": expected str instance, ",
                                                       list[i].TypeName(), " found"));
      }
      if (i) out += s;
      out += list[i].str();
    }
    return Value::String(std::move(out));
  }
  if (name == "format") {
    ASSIGN_OR_RETURN(std::string out, StrFormat(s, a));
    return Value::String(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string affix = StringArg(a, 0, "affix").value_or("");
    bool prefix = name == "removeprefix";
    if (affix.size() <= s.size() &&
        (prefix ? s.compare(0, affix.size(), affix) == 0 : s.compare(s.size() - affix.size(), affix.size(), affix) == 0)) {
      return Value::String(prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
    }
    return Value::String(s);
  }
  if (name == "isdigit") return Value::Bool(AllChars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isspace") return Value::Bool(AllChars(s, IsPySpace));
  if (name == "isalnum") return Value::Bool(AllChars(s, IsPyAlnum));
  if (name == "isalpha") {
    return Value::Bool(AllChars(s, [](char32_t c) { return IsPyAlnum(c) && !(c >= '0' && c <= '9'); }));
  }
  if (name == "islower" || name == "isupper") {
    bool want_lower = name == "islower", cased = false;
    for (char32_t c : Utf8Decode(s)) {
      if (PyUpper(c) == c && PyLower(c) == c) continue;
      cased = true;
      if ((PyLower(c) == c) != want_lower) return Value::Bool(false);
    }
    return Value::Bool(cased);
  }
  return absl::InvalidArgumentError(absl::StrCat("'str' object has no attribute '", name, "'"));
}

bool IsStringMethod(const std::string& n) {
  static const char* const kNames[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                       "endswith", "upper", "lower", "title", "capitalize", "replace", "find",
                                       "rfind", "index", "rindex", "count", "join", "format", "removeprefix",
                                       "removesuffix", "isdigit", "isspace", "isalnum", "isalpha", "islower",
                                       "isupper"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

ValueList ItemTuples(const ValueDict& d) {
  ValueList items;
  for (const auto& [k, v] : d.items) items.push_back(Value::List({Value::String(k), v}, /*tuple=*/true));
  return items;
}

}  // namespace

Value GetAttribute(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    if (!IsStringMethod(name)) return Value::Undefined(absl::StrCat("'str object' has no attribute '", name, "'"));
    std::string s = obj.str();
    return Bound(name, [s, name](const CallArgs& a) { return StringMethod(s, name, a); });
  }
  if (obj.is_dict()) {
    const ValueDict& d = obj.dict();
    if (!d.is_namespace) {
      if (name == "items") return Bound(name, [obj](const CallArgs&) -> absl::StatusOr<Value> { return Value::List(ItemTuples(obj.dict())); });
      if (name == "keys" || name == "values") {
        bool keys = name == "keys";
        return Bound(name, [obj, keys](const CallArgs&) -> absl::StatusOr<Value> {
          ValueList out;
          for (const auto& [k, v] : obj.dict().items) out.push_back(keys ? Value::String(k) : v);
          return Value::List(std::move(out));
        });
      }
      if (name == "get") {
        return Bound(name, [obj](const CallArgs& a) -> absl::StatusOr<Value> {
          const Value* key = a.Get(0, "key");
          const Value* dflt = a.Get(1, "default");
          const Value* found = key != nullptr && key->is_string() ? obj.dict().Find(key->str()) : nullptr;
          if (found != nullptr) return *found;
          return dflt != nullptr ? *dflt : Value::None();
        });
      }
    }
    if (const Value* v = d.Find(name)) return *v;
    return Value::Undefined(absl::StrCat("'", d.is_namespace ? "Namespace" : "dict object",
                                         "' has no attribute '", name, "'"));
  }
  if (obj.is_list() && (name == "index" || name == "count")) {
    bool index = name == "index";
    return Bound(name, [obj, index](const CallArgs& a) -> absl::StatusOr<Value> {
      const Value* needle = a.Get(0, "value");
      int64_t n = 0;
      for (size_t i = 0; i < obj.list().size(); ++i) {
        if (needle == nullptr || !obj.list()[i].Equals(*needle)) continue;
        if (index) return Value::Int(static_cast<int64_t>(i));
        ++n;
      }
      if (index) return absl::InvalidArgumentError("value is not in list");
      return Value::Int(n);
    });
  }
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
    Value attr = GetAttribute(obj, key.str());
    if (!attr.is_undefined()) return attr;
    return Value::Undefined(absl::StrCat("'dict object' has no attribute '", key.str(), "'"));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().size());
      int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
      if (i < 0 || i >= n) return Value::Undefined(absl::StrCat("list object has no element ", key.int_value()));
      return obj.list()[static_cast<size_t>(i)];
    }
    std::u32string u = Utf8Decode(obj.str());
    int64_t n = static_cast<int64_t>(u.size());
    int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
    if (i < 0 || i >= n) return Value::Undefined(absl::StrCat("str object has no element ", key.int_value()));
    std::string one;
    AppendUtf8(one, u[static_cast<size_t>(i)]);
    return Value::String(std::move(one));
  }
  if (key.is_string()) return GetAttribute(obj, key.str());
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element ", key.Repr()));
}

absl::StatusOr<std::string> StrFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') return absl::InvalidArgumentError("single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return absl::InvalidArgumentError("single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
      return absl::InvalidArgumentError("format specs in str.format are not supported");
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field);
      v = k < args.positional.size() ? &args.positional[k] : nullptr;
    } else {
      for (const auto& [name, value] : args.keyword) {
        if (name == field) v = &value;
      }
    }
    if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("format field '{", field, "}' has no argument"));
    out += v->ToString();
    i = close;
  }
  return out;
}

}  // namespace flotilla::inference::jinja
