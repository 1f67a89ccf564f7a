#include "jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "jinja/attributes.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {
namespace {

// A dotted attribute path ("a.b" or "0") looked up as jinja2's make_attrgetter does.
absl::StatusOr<Value> Attr(const Value& item, const std::string& path) {
  Value v = item;
  for (const std::string& part : PySplit(path, std::string("."), -1, false)) {
    if (v.is_undefined()) return v;
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    ASSIGN_OR_RETURN(v, GetItem(v, digits ? Value::Int(std::stoll(part)) : Value::String(part)));
  }
  return v;
}

// The key a sort, unique, min or max compares: the attribute, lowercased unless case-sensitive.
absl::StatusOr<Value> SortKey(const Value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  Value v = item;
  if (attribute) {
    ASSIGN_OR_RETURN(v, Attr(item, *attribute));
  }
  if (!case_sensitive && v.is_string()) return Value::String(PyLower(v.str()));
  return v;
}

absl::StatusOr<ValueList> Sorted(ValueList items, const std::optional<std::string>& attribute, bool case_sensitive,
                                 bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    ASSIGN_OR_RETURN(Value key, SortKey(item, attribute, case_sensitive));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  absl::Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    absl::StatusOr<bool> r = reverse ? Less(b.first, a.first) : Less(a.first, b.first);
    if (!r.ok()) {
      error = r.status();
      return false;
    }
    return *r;
  });
  RETURN_IF_ERROR(error);
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

CallArgs Shift(const CallArgs& args, size_t n) {
  CallArgs rest;
  if (args.positional.size() > n) rest.positional.assign(args.positional.begin() + n, args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

absl::StatusOr<Value> Select(const Value& v, const CallArgs& args, bool by_attribute, bool keep) {
  if (!v.Truthy()) return Value::List({});  // jinja2 iterates only a truthy value
  ASSIGN_OR_RETURN(ValueList items, v.Iterate());
  size_t skip = by_attribute ? 1 : 0;
  std::optional<std::string> attribute = by_attribute ? StringArg(args, 0, "attribute") : std::nullopt;
  std::optional<std::string> test = StringArg(args, skip, "test");
  CallArgs test_args = Shift(args, skip + 1);
  test_args.keyword.clear();
  ValueList out;
  for (const Value& item : items) {
    Value subject = item;
    if (attribute) {
      ASSIGN_OR_RETURN(subject, Attr(item, *attribute));
    }
    bool pass = subject.Truthy();
    if (test) {
      ASSIGN_OR_RETURN(pass, ApplyTest(*test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Map(const Value& v, const CallArgs& args) {
  if (!v.Truthy()) return Value::List({});  // jinja2 iterates only a truthy value
  ASSIGN_OR_RETURN(ValueList items, v.Iterate());
  ValueList out;
  std::optional<std::string> attribute;
  for (const auto& [k, val] : args.keyword) {
    if (k == "attribute") attribute = val.ToString();
  }
  if (attribute) {
    const Value* dflt = args.Get(SIZE_MAX, "default");
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value got, Attr(item, *attribute));
      out.push_back(got.is_undefined() && dflt != nullptr ? *dflt : got);
    }
    return Value::List(std::move(out));
  }
  std::optional<std::string> filter = StringArg(args, 0, "");
  if (!filter) return absl::InvalidArgumentError("map requires a filter name or attribute=");
  CallArgs rest = Shift(args, 1);
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value mapped, ApplyFilter(*filter, item, rest));
    out.push_back(std::move(mapped));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> ToJson(const Value& v, const CallArgs& args) {
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(args, 0, "ensure_ascii", false);
  const Value* indent = args.Get(1, "indent");
  if (indent != nullptr && indent->is_number()) o.indent = static_cast<int>(indent->int_value());
  const Value* separators = args.Get(2, "separators");
  if (separators != nullptr && separators->is_list() && separators->list().size() == 2) {
    o.custom_separators = true;
    o.item_separator = separators->list()[0].ToString();
    o.key_separator = separators->list()[1].ToString();
  }
  o.sort_keys = BoolArg(args, 3, "sort_keys", false);
  ASSIGN_OR_RETURN(std::string text, JsonDumps(v, o));
  return Value::String(std::move(text));
}

absl::StatusOr<Value> Round(const Value& v, const CallArgs& args) {
  if (!v.is_number()) return absl::InvalidArgumentError(absl::StrCat("round: a number is required, not ", v.TypeName()));
  int64_t precision = IntArg(args, 0, "precision", 0);
  std::string method = StringArg(args, 1, "method").value_or("common");
  double x = v.number();
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
  if (method != "common") return absl::InvalidArgumentError("method must be 'common', 'ceil' or 'floor'");
  if (!v.is_float()) return Value::Int(v.int_value());
  // Python's round(): the exact decimal rounding, ties to even, as printf performs it.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::max<int64_t>(precision, 0)), x);
  return Value::Float(std::strtod(buf, nullptr));
}

absl::StatusOr<Value> IntFilter(const Value& v, const CallArgs& args) {
  const Value* dflt_arg = args.Get(0, "default");
  Value dflt = dflt_arg != nullptr ? *dflt_arg : Value::Int(0);
  int base = static_cast<int>(IntArg(args, 1, "base", 10));
  if (v.is_int() || v.is_bool()) return Value::Int(v.int_value());
  if (v.is_float()) {
    double t = std::trunc(v.number());
    if (!(t >= -9.2233720368547758e18 && t < 9.2233720368547758e18)) {
      return absl::InvalidArgumentError(absl::StrCat("int: ", PyFloatRepr(v.number()), " is outside the 64-bit range"));
    }
    return Value::Int(static_cast<int64_t>(t));
  }
  if (!v.is_string()) return dflt;
  std::string s = PyStrip(v.str(), std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return dflt;
  char* end = nullptr;
  long long i = std::strtoll(s.c_str(), &end, base);
  if (*end == '\0') return Value::Int(i);
  double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && std::isfinite(d)) return Value::Int(static_cast<int64_t>(std::trunc(d)));
  return dflt;
}

absl::StatusOr<Value> FloatFilter(const Value& v, const CallArgs& args) {
  const Value* dflt_arg = args.Get(0, "default");
  Value dflt = dflt_arg != nullptr ? *dflt_arg : Value::Float(0.0);
  if (v.is_number()) return Value::Float(v.number());
  if (!v.is_string()) return dflt;
  std::string s = PyStrip(v.str(), std::nullopt, true, true);
  if (s.empty()) return dflt;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return dflt;
  return Value::Float(d);
}

std::string Indent(const std::string& s, const CallArgs& args) {
  const Value* width = args.Get(0, "width");
  std::string pad = width == nullptr ? "    " : width->is_string() ? width->str() : std::string(static_cast<size_t>(std::max<int64_t>(width->int_value(), 0)), ' ');
  bool first = BoolArg(args, 1, "first", false);
  bool blank = BoolArg(args, 2, "blank", false);
  std::vector<std::string> lines = PySplitLines(s + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return out;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<Value> Extreme(const Value& v, const CallArgs& args, bool max) {
  ASSIGN_OR_RETURN(ValueList items, v.Iterate());
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  ASSIGN_OR_RETURN(ValueList sorted, Sorted(items, StringArg(args, 1, "attribute"), case_sensitive, max));
  return sorted.front();
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, const CallArgs& args) {
  if (name == "tojson") return ToJson(v, args);
  if (name == "safe") return v;
  if (name == "string") return Value::String(v.ToString());
  if (name == "trim") return Value::String(PyStrip(v.ToString(), StringArg(args, 0, "chars"), true, true));
  if (name == "length" || name == "count") {
    ASSIGN_OR_RETURN(int64_t n, v.Length());
    return Value::Int(n);
  }
  if (name == "lower") return Value::String(PyLower(v.ToString()));
  if (name == "upper") return Value::String(PyUpper(v.ToString()));
  if (name == "capitalize") return Value::String(PyCapitalize(v.ToString()));
  if (name == "title") {
    // jinja2 capitalizes each run after whitespace, '-', '(', '{', '[' or '<'.
    std::u32string u = Utf8Decode(v.ToString());
    bool start = true;
    for (char32_t& c : u) {
      bool boundary = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      c = boundary ? c : start ? PyUpper(c) : PyLower(c);
      start = boundary;
    }
    return Value::String(Utf8Encode(u));
  }
  if (name == "replace") {
    std::optional<std::string> old = StringArg(args, 0, "old"), repl = StringArg(args, 1, "new");
    if (!old || !repl) return absl::InvalidArgumentError("replace needs old and new");
    return Value::String(PyReplace(v.ToString(), *old, *repl, IntArg(args, 2, "count", -1)));
  }
  if (name == "join") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    std::string sep = StringArg(args, 0, "d").value_or("");
    std::optional<std::string> attribute = StringArg(args, 1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += sep;
      Value item = items[i];
      if (attribute) {
        ASSIGN_OR_RETURN(item, Attr(item, *attribute));
      }
      out += item.ToString();
    }
    return Value::String(std::move(out));
  }
  if (name == "first" || name == "last") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    const Value* dflt = args.Get(0, "default_value");
    bool boolean = BoolArg(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.Truthy())) return dflt != nullptr ? *dflt : Value::String("");
    return v;
  }
  if (name == "list") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    return Value::List(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::List({});
    if (!v.is_dict()) return absl::InvalidArgumentError(absl::StrCat("items: a mapping is required, not ", v.TypeName()));
    ValueList out;
    for (const auto& [k, val] : v.dict().items) out.push_back(Value::List({Value::String(k), val}, true));
    return Value::List(std::move(out));
  }
  if (name == "map") return Map(v, args);
  if (name == "select" || name == "reject") return Select(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return Select(v, args, true, name == "selectattr");
  if ((name == "int" || name == "float") && v.is_undefined()) return UndefinedError(v);
  if (name == "int") return IntFilter(v, args);
  if (name == "float") return FloatFilter(v, args);
  if (name == "abs") {
    if (v.is_float()) return Value::Float(std::fabs(v.number()));
    if (v.is_number()) return Value::Int(std::llabs(v.int_value()));
    return absl::InvalidArgumentError(absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
  }
  if (name == "round") return Round(v, args);
  if (name == "indent") {
    if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat("indent: a string is required, not ", v.TypeName()));
    return Value::String(Indent(v.str(), args));
  }
  if (name == "unique") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
    std::optional<std::string> attribute = StringArg(args, 1, "attribute");
    ValueList out, seen;
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value key, SortKey(item, attribute, case_sensitive));
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(key); })) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (name == "sort") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    ASSIGN_OR_RETURN(ValueList sorted, Sorted(std::move(items), StringArg(args, 2, "attribute"),
                                              BoolArg(args, 1, "case_sensitive", false), BoolArg(args, 0, "reverse", false)));
    return Value::List(std::move(sorted));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return absl::InvalidArgumentError(absl::StrCat("dictsort: a mapping is required, not ", v.TypeName()));
    bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
    std::string by = StringArg(args, 1, "by").value_or("key");
    bool reverse = BoolArg(args, 2, "reverse", false);
    ValueList pairs;
    for (const auto& [k, val] : v.dict().items) pairs.push_back(Value::List({Value::String(k), val}, true));
    ASSIGN_OR_RETURN(ValueList sorted, Sorted(std::move(pairs), by == "value" ? "1" : "0", case_sensitive, reverse));
    return Value::List(std::move(sorted));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = Utf8Decode(v.str());
      std::reverse(u.begin(), u.end());
      return Value::String(Utf8Encode(u));
    }
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : Utf8Decode(v.ToString())) {
      bool w = IsPyAlnum(c) || c == '_';
      words += w && !in_word;
      in_word = w;
    }
    return Value::Int(words);
  }
  if (name == "sum") {
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    std::optional<std::string> attribute = StringArg(args, 0, "attribute");
    const Value* start = args.Get(1, "start");
    Value total = start != nullptr ? *start : Value::Int(0);
    for (const Value& item : items) {
      Value x = item;
      if (attribute) {
        ASSIGN_OR_RETURN(x, Attr(item, *attribute));
      }
      ASSIGN_OR_RETURN(total, BinaryOp("+", total, x));
    }
    return total;
  }
  if (name == "min" || name == "max") return Extreme(v, args, name == "max");
  if (name == "batch") {
    int64_t size = IntArg(args, 0, "linecount", 0);
    if (size <= 0) return absl::InvalidArgumentError("batch: linecount must be positive");
    const Value* fill = args.Get(1, "fill_with");
    ASSIGN_OR_RETURN(ValueList items, v.Iterate());
    ValueList out;
    for (size_t i = 0; i < items.size(); i += static_cast<size_t>(size)) {
      ValueList chunk(items.begin() + i, items.begin() + std::min(items.size(), i + static_cast<size_t>(size)));
      while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(chunk.size()) < size) chunk.push_back(*fill);
      out.push_back(Value::List(std::move(chunk)));
    }
    return Value::List(std::move(out));
  }
  if (name == "escape" || name == "e") return Value::String(HtmlEscape(v.ToString()));
  if (name == "format") {
    ASSIGN_OR_RETURN(std::string s, PercentFormat(v.ToString(), Value::List(args.positional, true)));
    return Value::String(std::move(s));
  }
  if (name == "attr") {
    std::optional<std::string> attribute = StringArg(args, 0, "name");
    if (!attribute) return absl::InvalidArgumentError("attr needs a name");
    if (v.is_undefined()) return UndefinedError(v);
    return GetAttribute(v, *attribute);
  }
  return absl::InvalidArgumentError(absl::StrCat("no filter named '", std::string(name), "'"));
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const Value* arg = args.Get(0, "other");
  if (arg == nullptr) arg = args.Get(0, "value");
  Value other = arg != nullptr ? *arg : Value::Undefined();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (!v.is_number()) return absl::InvalidArgumentError(absl::StrCat(std::string(name), " test needs a number"));
    ASSIGN_OR_RETURN(Value rem, BinaryOp("%", v, Value::Int(2)));
    return rem.Equals(Value::Int(name == "odd" ? 1 : 0));
  }
  if (name == "divisibleby") {
    if (!v.is_number() || !other.is_number() || other.number() == 0) {
      return absl::InvalidArgumentError("divisibleby needs two numbers, the divisor not 0");
    }
    return std::fmod(v.number(), other.number()) == 0;
  }
  if (name == "lower" || name == "upper") {
    std::string s = v.ToString();
    return name == "lower" ? PyLower(s) == s : PyUpper(s) == s;
  }
  if (name == "escaped") return false;
  if (name == "sameas") {
    if (v.kind() != other.kind()) return false;
    if (v.is_list() || v.is_dict() || v.is_function()) return v.Equals(other);
    return v.Equals(other);
  }
  if (name == "in") {
    ASSIGN_OR_RETURN(Value r, BinaryOp("in", v, other));
    return r.bool_value();
  }
  static const std::pair<const char*, const char*> kCompare[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="}, {"lt", "<"}, {"lessthan", "<"},
      {"<", "<"}, {"le", "<="}, {"<=", "<="}, {"gt", ">"}, {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
  for (const auto& [test, op] : kCompare) {
    if (name == test) {
      ASSIGN_OR_RETURN(Value r, BinaryOp(op, v, other));
      return r.bool_value();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("no test named '", std::string(name), "'"));
}

}  // namespace flotilla::inference::jinja
