#include "jinja/operators.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jinja/limits.h"
#include "flotilla/common/status.h"
#include "jinja/py_str.h"

namespace flotilla::inference::jinja {
namespace {

absl::Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ", std::string(op), ": '", a.TypeName(),
                                                 "' and '", b.TypeName(), "'"));
}

bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }

absl::Status TooLarge(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " larger than the render allows (",
                                                 kMaxStringBytes, " bytes, ", kMaxListItems, " items)"));
}

// The size of a string or list of `unit` elements repeated `times`, checked against `limit`.
bool FitsRepeated(size_t unit, int64_t times, size_t limit) {
  return times <= 0 || unit == 0 || static_cast<uint64_t>(times) <= limit / unit;
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t times) {
  // An empty sequence repeated any number of times is empty: no loop of `times` rounds.
  if (seq.is_string()) {
    if (!FitsRepeated(seq.str().size(), times, kMaxStringBytes)) return TooLarge("repeated string");
    std::string out;
    if (!seq.str().empty()) {
      out.reserve(seq.str().size() * static_cast<size_t>(std::max<int64_t>(0, times)));
      for (int64_t i = 0; i < times; ++i) out += seq.str();
    }
    return Value::String(std::move(out));
  }
  if (!FitsRepeated(seq.list().size(), times, kMaxListItems)) return TooLarge("repeated list");
  ValueList out;
  if (!seq.list().empty()) {
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  }
  return Value::List(std::move(out), seq.is_tuple());
}

absl::StatusOr<Value> ConcatStrings(const std::string& a, const std::string& b) {
  if (a.size() + b.size() > kMaxStringBytes) return TooLarge("concatenated string");
  return Value::String(a + b);
}

absl::StatusOr<Value> Overflow(std::string_view op) {
  return absl::InvalidArgumentError(absl::StrCat("integer overflow in '", std::string(op), "'"));
}

absl::StatusOr<Value> Contains(const Value& needle, const Value& haystack) {
  if (haystack.is_undefined()) return Value::Bool(false);  // jinja2's undefined iterates as empty
  if (haystack.is_string()) {
    if (!needle.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'in <string>' requires string as left operand, not ", needle.TypeName()));
    }
    return Value::Bool(haystack.str().find(needle.str()) != std::string::npos);
  }
  if (haystack.is_list()) {
    for (const Value& item : haystack.list()) {
      if (item.Equals(needle)) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (haystack.is_dict()) {
    if (needle.is_dict() || (needle.is_list() && !needle.is_tuple())) {
      return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", needle.TypeName(), "'"));
    }
    if (!needle.is_string()) return Value::Bool(false);
    return Value::Bool(haystack.dict().Find(needle.str()) != nullptr);
  }
  return absl::InvalidArgumentError(absl::StrCat("argument of type '", haystack.TypeName(), "' is not iterable"));
}

}  // namespace

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(v.str().empty() ? std::string("value is undefined") : v.str());
}

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return ConcatStrings(a.ToString(), b.ToString());
  if (op == "==") return Value::Bool(a.Equals(b));
  if (op == "!=") return Value::Bool(!a.Equals(b));
  if (op == "in") return Contains(a, b);
  if (op == "not in") {
    ASSIGN_OR_RETURN(Value v, Contains(a, b));
    return Value::Bool(!v.bool_value());
  }
  if (op == "%" && a.is_string()) {
    ASSIGN_OR_RETURN(std::string s, PercentFormat(a.str(), b));
    return Value::String(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "<") {
    ASSIGN_OR_RETURN(bool r, Less(a, b));
    return Value::Bool(r);
  }
  if (op == ">") {
    ASSIGN_OR_RETURN(bool r, Less(b, a));
    return Value::Bool(r);
  }
  if (op == "<=" || op == ">=") {
    ASSIGN_OR_RETURN(bool r, op == "<=" ? Less(a, b) : Less(b, a));
    return Value::Bool(r || a.Equals(b));
  }
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = IsIntLike(a) && IsIntLike(b);
  if (op == "+") {
    int64_t r = 0;
    if (ints) return __builtin_add_overflow(a.int_value(), b.int_value(), &r) ? Overflow(op) : Value::Int(r);
    if (numbers) return Value::Float(a.number() + b.number());
    if (a.is_string() && b.is_string()) return ConcatStrings(a.str(), b.str());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      if (a.list().size() + b.list().size() > kMaxListItems) return TooLarge("concatenated list");
      ValueList out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return Value::List(std::move(out), a.is_tuple());
    }
    if (a.is_string() || b.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("can only concatenate str (not \"",
                                                     (a.is_string() ? b : a).TypeName(), "\") to str"));
    }
    return Unsupported(op, a, b);
  }
  if (op == "-") {
    int64_t r = 0;
    if (ints) return __builtin_sub_overflow(a.int_value(), b.int_value(), &r) ? Overflow(op) : Value::Int(r);
    if (numbers) return Value::Float(a.number() - b.number());
    return Unsupported(op, a, b);
  }
  if (op == "*") {
    int64_t r = 0;
    if (ints) return __builtin_mul_overflow(a.int_value(), b.int_value(), &r) ? Overflow(op) : Value::Int(r);
    if (numbers) return Value::Float(a.number() * b.number());
    if ((a.is_string() || a.is_list()) && IsIntLike(b)) return Repeat(a, b.int_value());
    if ((b.is_string() || b.is_list()) && IsIntLike(a)) return Repeat(b, a.int_value());
    return Unsupported(op, a, b);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (!numbers) return Unsupported(op, a, b);
    if (b.number() == 0) return absl::InvalidArgumentError("division by zero");
    if (op == "/") return Value::Float(a.number() / b.number());
    if (ints) {
      int64_t x = a.int_value(), y = b.int_value();
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return Overflow(op);
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value::Int(op == "//" ? q : r);
    }
    // CPython's float divmod, so that 2.5 // 0.1 is 24.0 as there.
    double x = a.number(), y = b.number();
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    if (op == "%") return Value::Float(mod);
    double floordiv = std::copysign(0.0, x / y);
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    }
    return Value::Float(floordiv);
  }
  if (op == "**") {
    if (ints && b.int_value() >= 0) {
      const int64_t base = a.int_value(), exp = b.int_value();
      // 0, 1 and -1 never overflow, however large the exponent; any other base does within 64 steps.
      if (base == 0) return Value::Int(exp == 0 ? 1 : 0);
      if (base == 1) return Value::Int(1);
      if (base == -1) return Value::Int(exp % 2 == 0 ? 1 : -1);
      int64_t r = 1;
      for (int64_t i = 0; i < exp; ++i) {
        if (__builtin_mul_overflow(r, base, &r)) return Overflow(op);
      }
      return Value::Int(r);
    }
    if (numbers) return Value::Float(std::pow(a.number(), b.number()));
    return Unsupported(op, a, b);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown operator '", std::string(op), "'"));
}

absl::StatusOr<std::string> PercentFormat(const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  if (args.is_tuple()) {
    positional = args.list();
  } else if (!args.is_dict()) {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !args.is_dict()) return absl::InvalidArgumentError("format requires a mapping");
      arg = args.dict().Find(fmt.substr(i + 1, close - i - 1));
      if (arg == nullptr) return absl::InvalidArgumentError(absl::StrCat("'", fmt.substr(i + 1, close - i - 1), "'"));
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[i]) != std::string_view::npos) {
      spec.push_back(fmt[i++]);
    }
    if (i >= fmt.size()) return absl::InvalidArgumentError("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (arg == nullptr) {
      if (next >= positional.size()) return absl::InvalidArgumentError("not enough arguments for format string");
      arg = &positional[next++];
    }
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string text = conv == 's' ? arg->ToString() : arg->Repr();
      if (spec.size() == 1) {
        out += text;
      } else {
        spec += "s";
        std::vector<char> padded(text.size() + 600);
        std::snprintf(padded.data(), padded.size(), spec.c_str(), text.c_str());
        out += padded.data();
      }
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!arg->is_number()) return absl::InvalidArgumentError(absl::StrCat("%", std::string(1, conv), " format: a number is required, not ", arg->TypeName()));
      spec += "ll";
      spec.push_back(conv == 'i' ? 'd' : conv);
      long long v = arg->is_float() ? static_cast<long long>(arg->number()) : arg->int_value();
      std::snprintf(buf, sizeof(buf), spec.c_str(), v);
      out += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!arg->is_number()) return absl::InvalidArgumentError(absl::StrCat("must be real number, not ", arg->TypeName()));
      spec.push_back(conv);
      std::snprintf(buf, sizeof(buf), spec.c_str(), arg->number());
      out += buf;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unsupported format character '", std::string(1, conv), "'"));
    }
  }
  // Python lets a mapping-like argument (a dict, a list) go unused; a tuple or a scalar not.
  if (next < positional.size() && (args.is_tuple() || (!args.is_dict() && !args.is_list() && !args.is_undefined()))) {
    return absl::InvalidArgumentError("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace flotilla::inference::jinja
