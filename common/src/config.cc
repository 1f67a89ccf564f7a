#include "flotilla/common/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flotilla {

namespace {
// A missing key yields an "invalid" yaml-cpp node that throws on use (even on assignment);
// keep a valid undefined node instead so every accessor stays safe.
YAML::Node Sanitize(const YAML::Node& n) {
  if (!n.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  return n;
}
}  // namespace

ConfigNode::ConfigNode(YAML::Node node, std::string file, std::string path)
    : node_(Sanitize(node)), file_(std::move(file)), path_(std::move(path)) {
  if (node_.IsDefined()) line_ = node_.Mark().line + 1;
}

ConfigNode ConfigNode::operator[](std::string_view key) const {
  std::string child_path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", std::string(key));
  // const lookup: never inserts into the shared document.
  const YAML::Node& cnode = node_;
  ConfigNode out(node_.IsMap() ? cnode[std::string(key)] : YAML::Node(YAML::NodeType::Undefined),
                 file_, child_path);
  if (!out.present()) out.line_ = line_;
  return out;
}

ConfigNode ConfigNode::operator[](size_t index) const {
  std::string child_path = absl::StrCat(path_, "[", index, "]");
  const YAML::Node& cnode = node_;
  ConfigNode out((node_.IsSequence() && index < node_.size()) ? cnode[index]
                                                               : YAML::Node(YAML::NodeType::Undefined),
                 file_, child_path);
  if (!out.present()) out.line_ = line_;
  return out;
}

size_t ConfigNode::size() const {
  return (node_.IsSequence() || node_.IsMap()) ? node_.size() : 0;
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) {
    // A key that is itself a list or map ("? [a]: 1") has no text: as<std::string>() threw and
    // the exception ended the process. It is named so CheckKeys refuses it as an unknown field.
    out.push_back(kv.first.IsScalar() ? kv.first.Scalar() : kv.first.IsNull() ? "" : "(a list or map as a key)");
  }
  return out;
}

absl::StatusOr<std::vector<ConfigNode>> ConfigNode::Items() const {
  std::vector<ConfigNode> out;
  if (!present() || node_.IsNull()) return out;
  if (!node_.IsSequence()) return Error("expected a list");
  for (size_t i = 0; i < node_.size(); ++i) out.push_back((*this)[i]);
  return out;
}

absl::Status ConfigNode::Error(std::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(file_, ":", line_, ": ", path_.empty() ? "(top level)" : path_, ": ", std::string(what)));
}

absl::Status ConfigNode::CheckKeys(std::initializer_list<std::string_view> allowed) const {
  if (!node_.IsMap()) return absl::OkStatus();
  for (const auto& k : keys()) {
    bool ok = false;
    for (auto a : allowed) ok = ok || a == k;
    if (!ok) {
      return (*this)[k].Error(
          absl::StrCat("unknown field (expected one of: ", absl::StrJoin(std::vector<std::string>(allowed.begin(), allowed.end()), ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ConfigNode::Scalar() const {
  if (!present() || node_.IsNull()) return Error("missing required field");
  if (!node_.IsScalar()) return Error("expected a single value, got a list or map");
  return node_.Scalar();
}

absl::StatusOr<std::string> ConfigNode::AsString() const { return Scalar(); }
absl::StatusOr<std::string> ConfigNode::AsString(std::string_view dflt) const {
  if (!present() || node_.IsNull()) return std::string(dflt);
  return Scalar();
}

absl::StatusOr<int64_t> ConfigNode::AsInt() const {
  auto s = Scalar();
  if (!s.ok()) return s.status();
  int64_t v;
  if (!absl::SimpleAtoi(*s, &v)) return Error(absl::StrCat("expected an integer, got '", *s, "'"));
  return v;
}
absl::StatusOr<int64_t> ConfigNode::AsInt(int64_t dflt) const {
  if (!present() || node_.IsNull()) return dflt;
  return AsInt();
}

absl::StatusOr<double> ConfigNode::AsDouble() const {
  auto s = Scalar();
  if (!s.ok()) return s.status();
  double v;
  if (!absl::SimpleAtod(*s, &v) || !std::isfinite(v)) {
    return Error(absl::StrCat("expected a number, got '", *s, "'"));
  }
  return v;
}
absl::StatusOr<double> ConfigNode::AsDouble(double dflt) const {
  if (!present() || node_.IsNull()) return dflt;
  return AsDouble();
}

absl::StatusOr<bool> ConfigNode::AsBool() const {
  auto s = Scalar();
  if (!s.ok()) return s.status();
  std::string v = absl::AsciiStrToLower(*s);
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  return Error(absl::StrCat("expected true or false, got '", *s, "'"));
}
absl::StatusOr<bool> ConfigNode::AsBool(bool dflt) const {
  if (!present() || node_.IsNull()) return dflt;
  return AsBool();
}

absl::StatusOr<uint64_t> ConfigNode::AsBytes(uint64_t dflt) const {
  if (!present() || node_.IsNull()) return dflt;
  auto s = Scalar();
  if (!s.ok()) return s.status();
  auto v = ParseBytes(*s);
  if (!v.ok()) return Error(std::string(v.status().message()));
  return *v;
}

absl::StatusOr<int64_t> ConfigNode::AsDurationMs(int64_t dflt) const {
  if (!present() || node_.IsNull()) return dflt;
  auto s = Scalar();
  if (!s.ok()) return s.status();
  auto v = ParseDurationMs(*s);
  if (!v.ok()) return Error(std::string(v.status().message()));
  return *v;
}

absl::StatusOr<std::vector<std::string>> ConfigNode::AsStringList() const {
  std::vector<std::string> out;
  auto items = Items();
  if (!items.ok()) return items.status();
  for (const auto& item : *items) {
    auto s = item.AsString();
    if (!s.ok()) return s.status();
    out.push_back(*s);
  }
  return out;
}

absl::StatusOr<ConfigNode> ParseConfig(std::string_view text, std::string_view name) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return ConfigNode(root, std::string(name), "");
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), ":", e.mark.line + 1, ": YAML syntax error: ", e.msg));
  }
}

absl::StatusOr<ConfigNode> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open config file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfig(ss.str(), path);
}

namespace {
// Splits "256M" into (256, "M"); the number may be fractional.
bool SplitNumberUnit(std::string_view text, double* number, std::string* unit) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  if (!absl::SimpleAtod(std::string(text.substr(0, i)), number) || *number < 0) return false;
  *unit = absl::AsciiStrToLower(std::string(text.substr(i)));
  return true;
}
}  // namespace

absl::StatusOr<uint64_t> ParseBytes(std::string_view text) {
  double n;
  std::string unit;
  if (!SplitNumberUnit(text, &n, &unit)) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", std::string(text), "' (use e.g. 512M, 2G)"));
  }
  double mult;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "ki" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mi" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gi" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "ti" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else return absl::InvalidArgumentError(absl::StrCat("bad size unit in '", std::string(text), "'"));
  const double bytes = n * mult;
  // 2^63 bytes and up (or inf/nan) cannot be converted; no real size is that large.
  if (!(bytes < 9.2e18)) return absl::InvalidArgumentError(absl::StrCat("size '", std::string(text), "' is too large"));
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<int64_t> ParseDurationMs(std::string_view text) {
  double n;
  std::string unit;
  if (!SplitNumberUnit(text, &n, &unit)) {
    return absl::InvalidArgumentError(absl::StrCat("bad duration '", std::string(text), "' (use e.g. 30s, 5m)"));
  }
  double mult;
  if (unit == "ms") mult = 1;
  else if (unit.empty() || unit == "s") mult = 1000;
  else if (unit == "m" || unit == "min") mult = 60'000;
  else if (unit == "h") mult = 3'600'000;
  else return absl::InvalidArgumentError(absl::StrCat("bad duration unit in '", std::string(text), "'"));
  const double ms = n * mult;
  if (!(ms < 9.2e18)) return absl::InvalidArgumentError(absl::StrCat("duration '", std::string(text), "' is too long"));
  return static_cast<int64_t>(ms);
}

}  // namespace flotilla
