#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::optional<std::string> StringArg(const CallArgs& args, size_t index, std::string_view name) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none() || v->is_undefined()) return std::nullopt;
  return v->ToString();
}

int64_t IntArg(const CallArgs& args, size_t index, std::string_view name, int64_t dflt) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || !v->is_number()) return dflt;
  return v->is_float() ? static_cast<int64_t>(v->number()) : v->int_value();
}

bool BoolArg(const CallArgs& args, size_t index, std::string_view name, bool dflt) {
  const Value* v = args.Get(index, name);
  return v == nullptr ? dflt : v->Truthy();
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::List(ValueList items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::Dict(ValueDict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>(std::move(dict));
  return v;
}
Value Value::Callable(Function fn, std::string name) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::boolean: return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Int(static_cast<int64_t>(u));
      return Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      d.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.items.emplace_back(k, FromJson(e));
      return Dict(std::move(d));
    }
    default: return None();
  }
}

double Value::number() const {
  if (kind_ == Kind::kFloat) return f_;
  return static_cast<double>(int_value());
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp >= 0) {
      if (digits.size() < static_cast<size_t>(exp) + 1) digits.append(exp + 1 - digits.size(), '0');
      out = digits.substr(0, exp + 1);
      std::string frac = digits.substr(exp + 1);
      out += "." + (frac.empty() ? std::string("0") : frac);
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return sign + out + ebuf;
}

namespace {

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || (c >= 0x200B && c <= 0x200F) || (c >= 0x2028 && c <= 0x202E) ||
      (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF)) {
    return false;
  }
  return !IsPySpace(c) || c == ' ';
}

std::string PyStringRepr(const std::string& s) {
  char quote = '\'';
  if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) quote = '"';
  std::string out(1, quote);
  for (char32_t c : Utf8Decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (IsPrintable(c)) {
      AppendUtf8(out, c);
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return PyFloatRepr(f_);
    case Kind::kString: return s_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return PyStringRepr(s_);
    case Kind::kList: {
      std::string out(1, tuple_ ? '(' : '[');
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple_ && list_->size() == 1) out += ",";
      out.push_back(tuple_ ? ')' : ']');
      return out;
    }
    case Kind::kDict: {
      if (dict_->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i) out += ", ";
        out += PyStringRepr(dict_->items[i].first) + ": " + dict_->items[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction: return absl::StrCat("<function ", s_, ">");
    default: return ToString();
  }
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return number() == o.number();
    return int_value() == o.int_value();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return s_ == o.s_;
    case Kind::kList: {
      if (tuple_ != o.tuple_ || list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_ == o.dict_) return true;
      if (dict_->is_namespace || o.dict_->is_namespace) return false;
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* other = o.dict_->Find(k);
        if (other == nullptr || !v.Equals(*other)) return false;
      }
      return true;
    }
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

absl::StatusOr<int64_t> Value::Length() const {
  switch (kind_) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return CodePointCount(s_);
    case Kind::kList: return static_cast<int64_t>(list_->size());
    case Kind::kDict: return static_cast<int64_t>(dict_->items.size());
    default: return absl::InvalidArgumentError(absl::StrCat("object of type '", TypeName(), "' has no len()"));
  }
}

absl::StatusOr<ValueList> Value::Iterate() const {
  switch (kind_) {
    case Kind::kUndefined: return ValueList{};
    case Kind::kList: return *list_;
    case Kind::kDict: {
      ValueList keys;
      for (const auto& [k, v] : dict_->items) keys.push_back(String(k));
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      for (char32_t c : Utf8Decode(s_)) {
        std::string one;
        AppendUtf8(one, c);
        chars.push_back(String(std::move(one)));
      }
      return chars;
    }
    default: return absl::InvalidArgumentError(absl::StrCat("'", TypeName(), "' object is not iterable"));
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "object";
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number() < b.number();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].Equals(y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '", b.TypeName(), "'"));
}

namespace {

void JsonString(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : Utf8Decode(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (c < 0x20 || (ensure_ascii && c > 0x7E && c < 0x10000)) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else if (ensure_ascii && c >= 0x10000) {
      char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    } else {
      AppendUtf8(out, c);
    }
  }
  out.push_back('"');
}

absl::Status Dump(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  const bool pretty = o.indent >= 0;
  const std::string item_sep = o.custom_separators ? o.item_separator : (pretty ? "," : ", ");
  const std::string key_sep = o.custom_separators ? o.key_separator : ": ";
  auto newline = [&](int lvl) {
    if (pretty) out += "\n" + std::string(static_cast<size_t>(o.indent) * lvl, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: out += v.bool_value() ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: out += std::to_string(v.int_value()); return absl::OkStatus();
    case Value::Kind::kFloat: {
      double d = v.number();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : PyFloatRepr(d);
      return absl::OkStatus();
    }
    case Value::Kind::kString: JsonString(out, v.str(), o.ensure_ascii); return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.list().empty()) {
        out += "[]";
        return absl::OkStatus();
      }
      out.push_back('[');
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        if (absl::Status s = Dump(out, v.list()[i], o, level + 1); !s.ok()) return s;
      }
      newline(level);
      out.push_back(']');
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.dict().is_namespace) break;
      if (v.dict().items.empty()) {
        out += "{}";
        return absl::OkStatus();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.dict().items) items.push_back(&item);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        JsonString(out, items[i]->first, o.ensure_ascii);
        out += key_sep;
        if (absl::Status s = Dump(out, items[i]->second, o, level + 1); !s.ok()) return s;
      }
      newline(level);
      out.push_back('}');
      return absl::OkStatus();
    }
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
}

}  // namespace

absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  if (absl::Status s = Dump(out, v, options, 0); !s.ok()) return s;
  return out;
}

}  // namespace flotilla::inference::jinja
