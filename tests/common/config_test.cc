#include "flotilla/common/config.h"

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla {
namespace {

constexpr const char* kPolicy = R"(name: demo
resources:
  memory: 256M
  pids: lots
  timeout: 30s
network:
  allow:
    - 10.0.0.0/8
    - {cidr: 127.0.0.1/32, port: 80}
)";

TEST(ConfigTest, ErrorNamesFileLineAndField) {
  auto root = ParseConfig(kPolicy, "policy.yaml");
  ASSERT_TRUE(root.ok());
  auto pids = (*root)["resources"]["pids"].AsInt();
  ASSERT_FALSE(pids.ok());
  EXPECT_EQ(pids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pids.status().message(), "policy.yaml:4: resources.pids: expected an integer, got 'lots'");
}

TEST(ConfigTest, MissingFieldNamesItsPathAndParentLine) {
  auto root = *ParseConfig(kPolicy, "policy.yaml");
  auto v = root["resources"]["cpu"].AsInt();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "policy.yaml:3: resources.cpu: missing required field");
}

TEST(ConfigTest, SequenceIndexInPath) {
  auto root = *ParseConfig(kPolicy, "p.yaml");
  auto port = root["network"]["allow"][1]["port"].AsInt();
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 80);
  auto bad = root["network"]["allow"][1]["cidr"].AsInt();
  EXPECT_EQ(bad.status().message(), "p.yaml:9: network.allow[1].cidr: expected an integer, got '127.0.0.1/32'");
}

TEST(ConfigTest, UnitsAndDefaults) {
  auto root = *ParseConfig(kPolicy, "p.yaml");
  EXPECT_EQ(*root["resources"]["memory"].AsBytes(0), 256ull << 20);
  EXPECT_EQ(*root["resources"]["timeout"].AsDurationMs(0), 30000);
  EXPECT_EQ(*root["resources"]["disk"].AsBytes(1024), 1024u);
  EXPECT_EQ(*root["name"].AsString(), "demo");
  EXPECT_EQ(*root["missing"].AsString("x"), "x");
}

TEST(ConfigTest, UnitParsers) {
  struct Case { const char* text; uint64_t bytes; bool ok; };
  for (const Case& c : {Case{"512", 512, true}, Case{"64k", 65536, true}, Case{"2G", 2ull << 30, true},
                        Case{"1.5M", 1572864, true}, Case{"12Q", 0, false}, Case{"-3M", 0, false}}) {
    auto v = ParseBytes(c.text);
    EXPECT_EQ(v.ok(), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(*v, c.bytes) << c.text;
    }
  }
  EXPECT_EQ(*ParseDurationMs("250ms"), 250);
  EXPECT_EQ(*ParseDurationMs("5m"), 300000);
  EXPECT_EQ(*ParseDurationMs("2"), 2000);
  EXPECT_FALSE(ParseDurationMs("soon").ok());
  // Numbers past what 64 bits hold are refused, not converted (a fuzz finding).
  EXPECT_FALSE(ParseBytes(std::string(80, '1') + "G").ok());
  EXPECT_FALSE(ParseDurationMs(std::string(80, '1') + "h").ok());
}

TEST(ConfigTest, SyntaxErrorNamesFileAndLine) {
  auto root = ParseConfig("a: 1\nb: [1, 2\nc: 3\n", "broken.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(root.status().message(), "broken.yaml:")) << root.status();
  EXPECT_NE(root.status().message().find("YAML syntax error"), std::string::npos);
}

TEST(ConfigTest, UnknownKeysAreRejected) {
  auto root = *ParseConfig("resources:\n  memroy: 1G\n", "r.yaml");
  absl::Status s = root["resources"].CheckKeys({"memory", "pids"});
  EXPECT_EQ(s.message(), "r.yaml:2: resources.memroy: unknown field (expected one of: memory, pids)");
}

TEST(ConfigTest, LoadsFileAndReportsMissingFile) {
  testing::TempDir dir;
  std::string path = dir.file("c.yaml");
  std::ofstream(path) << "x: 3\n";
  auto root = LoadConfigFile(path);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*(*root)["x"].AsInt(), 3);
  EXPECT_EQ(LoadConfigFile(dir.file("nope.yaml")).status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigTest, StringListRejectsMap) {
  auto root = *ParseConfig("l: {a: 1}\nm: [a, b]\n", "l.yaml");
  EXPECT_FALSE(root["l"].AsStringList().ok());
  EXPECT_EQ(*root["m"].AsStringList(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace flotilla
