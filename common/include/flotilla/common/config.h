// YAML configuration with errors that name the file, the line and the field.
//
//   ASSIGN_OR_RETURN(ConfigNode root, LoadConfigFile("policy.yaml"));
//   ASSIGN_OR_RETURN(int64_t pids, root["resources"]["pids"].AsInt(/*default=*/256));
//   // error: "policy.yaml:12: resources.pids: expected an integer, got 'lots'"
//
// A ConfigNode is a cheap value (it shares the parsed document); not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace flotilla {

class ConfigNode {
 public:
  ConfigNode() = default;
  ConfigNode(YAML::Node node, std::string file, std::string path);

  // True when the key exists in the document (null values count as present).
  [[nodiscard]] bool present() const { return node_.IsDefined(); }
  [[nodiscard]] bool is_map() const { return node_.IsMap(); }
  [[nodiscard]] bool is_sequence() const { return node_.IsSequence(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& file() const { return file_; }
  // 1-based line of this node, or of the nearest present parent when absent.
  [[nodiscard]] int line() const { return line_; }

  // Child by key / by index. An absent child is still a node (present() == false) that
  // remembers where it would have been, so errors about missing fields can name it.
  ConfigNode operator[](std::string_view key) const;
  ConfigNode operator[](size_t index) const;
  [[nodiscard]] size_t size() const;
  // Keys of a map, in document order.
  [[nodiscard]] std::vector<std::string> keys() const;
  // Elements of a sequence; an absent node yields none; a scalar is an error.
  [[nodiscard]] absl::StatusOr<std::vector<ConfigNode>> Items() const;

  // Typed reads. Without a default an absent field is an error naming it.
  [[nodiscard]] absl::StatusOr<std::string> AsString() const;
  [[nodiscard]] absl::StatusOr<std::string> AsString(std::string_view dflt) const;
  [[nodiscard]] absl::StatusOr<int64_t> AsInt() const;
  [[nodiscard]] absl::StatusOr<int64_t> AsInt(int64_t dflt) const;
  [[nodiscard]] absl::StatusOr<double> AsDouble() const;
  [[nodiscard]] absl::StatusOr<double> AsDouble(double dflt) const;
  [[nodiscard]] absl::StatusOr<bool> AsBool() const;
  [[nodiscard]] absl::StatusOr<bool> AsBool(bool dflt) const;
  // Sizes with units: 512, 64k, 256M, 2G, 1Gi (binary multiples).
  [[nodiscard]] absl::StatusOr<uint64_t> AsBytes(uint64_t dflt) const;
  // Durations: 250ms, 30s, 5m, 2h; a bare number is seconds. Returned in milliseconds.
  [[nodiscard]] absl::StatusOr<int64_t> AsDurationMs(int64_t dflt) const;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> AsStringList() const;

  // "file:line: path: what" — the house error format, InvalidArgument.
  [[nodiscard]] absl::Status Error(std::string_view what) const;
  // Error unless every key of this map is in `allowed` (catches typos in configs).
  [[nodiscard]] absl::Status CheckKeys(std::initializer_list<std::string_view> allowed) const;

 private:
  absl::StatusOr<std::string> Scalar() const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  int line_ = 0;
};

// Parses a YAML file; syntax errors name the file and line.
absl::StatusOr<ConfigNode> LoadConfigFile(const std::string& path);
// Parses YAML text; `name` stands in for the file name in errors.
absl::StatusOr<ConfigNode> ParseConfig(std::string_view text, std::string_view name);

// Unit parsers shared with command-line flags ("--memory 256M", "--timeout 30s").
absl::StatusOr<uint64_t> ParseBytes(std::string_view text);
absl::StatusOr<int64_t> ParseDurationMs(std::string_view text);

}  // namespace flotilla
