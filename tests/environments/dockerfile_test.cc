// The Dockerfile subset's parser, variable expansion, the base-image table, the registry hint,
// env.json and the cache key of context copies.
#include "flotilla/environments/dockerfile.h"

#include <fstream>

#include "base_images.h"
#include "copy_plan.h"
#include "flotilla/environments/env_store.h"
#include "gtest/gtest.h"
#include "registry_hint.h"
#include "testing/temp_dir.h"

namespace flotilla::environments {
namespace {

TEST(DockerfileTest, ParsesContinuationsFlagsExecFormAndHereDocs) {
  const std::string text =
      "# syntax=docker/dockerfile:1\n"
      "ARG BASE=debian:bookworm-slim\n"
      "from $BASE AS build\n"
      "RUN apt-get update && \\\n"
      "# a comment inside the continuation\n"
      "    apt-get install -y git\n"
      "COPY --chown=app:app --from=build /out/ /app/\n"
      "CMD [\"python3\", \"-m\", \"http.server\"]\n"
      "RUN <<EOF\n"
      "echo one\n"
      "echo two\n"
      "EOF\n"
      "ENV A=1\n";
  auto df = ParseDockerfile(text, "Dockerfile");
  ASSERT_TRUE(df.ok()) << df.status();
  ASSERT_EQ(df->instructions.size(), 7u);
  EXPECT_EQ(df->instructions[1].keyword, "FROM");
  EXPECT_EQ(df->instructions[1].line, 3);
  EXPECT_EQ(df->instructions[2].args, "apt-get update &&     apt-get install -y git");
  EXPECT_EQ(df->instructions[2].line, 4);
  EXPECT_EQ(df->instructions[3].flags.at("chown"), "app:app");
  EXPECT_EQ(df->instructions[3].flags.at("from"), "build");
  EXPECT_EQ(df->instructions[3].args, "/out/ /app/");
  EXPECT_TRUE(df->instructions[4].exec_form);
  EXPECT_EQ(df->instructions[4].exec_args, (std::vector<std::string>{"python3", "-m", "http.server"}));
  ASSERT_EQ(df->instructions[5].heredocs.size(), 1u);
  EXPECT_EQ(df->instructions[5].heredocs[0].body, "echo one\necho two\n");
  EXPECT_EQ(df->instructions[6].line, 13);
}

TEST(DockerfileTest, ErrorsNameTheFileAndLine) {
  auto unclosed = ParseDockerfile("FROM debian:bookworm\nRUN cat <<EOF\nhello\n", "env/Dockerfile");
  EXPECT_EQ(unclosed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unclosed.status().message(), "env/Dockerfile:2: RUN: here-document <<EOF is never closed");
  auto no_from = ParseDockerfile("RUN true\n", "Dockerfile");
  EXPECT_EQ(no_from.status().message(), "Dockerfile:1: the first instruction must be FROM (or ARG before FROM)");
  EXPECT_EQ(ParseDockerfile("# only a comment\n", "Dockerfile").status().message(), "Dockerfile: no instructions");
}

TEST(DockerfileTest, ExpandsVariablesLikeDocker) {
  std::map<std::string, std::string> vars = {{"A", "x"}, {"EMPTY", ""}};
  struct Case {
    std::string in, out;
  } cases[] = {
      {"$A/${A}", "x/x"},       {"${B:-def}", "def"},    {"${EMPTY:-def}", "def"}, {"${A:+alt}", "alt"},
      {"${B:+alt}", ""},        {"\\$A", "$A"},         {"$", "$"},               {"a$B-c", "a-c"},
      {"${B:-${A}y}", "xy"},
  };
  for (const Case& c : cases) {
    auto r = ExpandVariables(c.in, vars);
    ASSERT_TRUE(r.ok()) << c.in;
    EXPECT_EQ(*r, c.out) << c.in;
  }
  EXPECT_EQ(ExpandVariables("${A", vars).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitWords("a 'b c'  \"d\"e"), (std::vector<std::string>{"a", "b c", "de"}));
}

// Found by fuzzing (tests/fuzz/corpus/dockerfile): ${A:-${A:-...}} nested thousands deep took
// quadratic time and as much stack as it had levels. Sixteen levels expand; deeper is refused.
TEST(DockerfileTest, DeeplyNestedSubstitutionIsRefused) {
  const std::map<std::string, std::string> vars;
  auto nested = [](int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += "${B:-";
    s += "end";
    for (int i = 0; i < levels; ++i) s += "}";
    return s;
  };
  auto ok = ExpandVariables(nested(16), vars);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "end");
  auto deep = ExpandVariables(nested(20000), vars);
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), "variable substitution nested deeper than 16 levels");
}

TEST(BaseImagesTest, MapsDebianBasedNamesAndRefusesOthers) {
  struct Case {
    std::string name;
    std::string suite;  // "" when refused
    size_t packages;
  } cases[] = {
      {"debian:bookworm", "bookworm", 0},        {"debian:bookworm-slim", "bookworm", 0},
      {"debian:12", "bookworm", 0},              {"debian:12.5-slim", "bookworm", 0},
      {"debian:bookworm-20240513", "bookworm", 0}, {"docker.io/library/debian:bookworm", "bookworm", 0},
      {"debian:11", "bullseye", 0},              {"debian:latest", "trixie", 0},
      {"python:3.11-slim-bookworm", "bookworm", 4}, {"python:3.11.9-slim", "bookworm", 4},
      {"buildpack-deps:bookworm", "bookworm", 12}, {"python:3.12-slim", "", 0},
      {"ubuntu:22.04", "", 0},                   {"alpine:3.19", "", 0},
      {"debian:sid-ish", "", 0},
  };
  for (const Case& c : cases) {
    auto b = KnownBase(c.name);
    if (c.suite.empty()) {
      EXPECT_FALSE(b.has_value()) << c.name;
      continue;
    }
    ASSERT_TRUE(b.has_value()) << c.name;
    EXPECT_EQ(b->suite, c.suite) << c.name;
    EXPECT_EQ(b->packages.size(), c.packages) << c.name;
  }
  EXPECT_EQ(BaseSetupCommand(*KnownBase("debian:bookworm")), "");
  EXPECT_EQ(BaseSetupCommand(*KnownBase("python:3.11")),
            "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 "
            "python3-pip python3-venv python-is-python3 && apt-get clean && rm -rf /var/lib/apt/lists/* && "
            "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED");
}

TEST(RegistryHintTest, NamesTheRegistryOfLanguageInstallers) {
  EXPECT_NE(RegistryHint("pip install requests").find("PyPI (pip) is unreachable from the build sandbox"),
            std::string::npos);
  EXPECT_NE(RegistryHint("cd app && npm install").find("the npm registry is unreachable"), std::string::npos);
  EXPECT_EQ(RegistryHint("apt-get install -y python3-requests"), "");
}

TEST(EnvStoreTest, EnvJsonRoundTripsAndNamesBadFields) {
  EnvImage im;
  im.tag = "t";
  im.top = "sha256:" + std::string(64, 'a');
  im.config.env = {{"PATH", "/usr/bin"}, {"A", "b c"}};
  im.config.workdir = "/app";
  im.config.user = "deploy";
  im.config.cmd = {"python3", "x.py"};
  im.config.expose = {"9000/tcp"};
  im.config.labels["k"] = "v";
  im.bytes = 1234;
  auto back = EnvImageFromJson(EnvImageToJson(im), "env.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->top, im.top);
  EXPECT_EQ(back->config.env, im.config.env);
  EXPECT_EQ(back->config.workdir, "/app");
  EXPECT_EQ(back->config.user, "deploy");
  EXPECT_EQ(back->config.cmd, im.config.cmd);
  EXPECT_EQ(back->config.expose, im.config.expose);
  EXPECT_EQ(back->config.labels, im.config.labels);
  EXPECT_EQ(back->bytes, 1234u);
  EXPECT_EQ(EnvImageFromJson("{}", "x/env.json").status().message(), "x/env.json: top: required string");
  EXPECT_EQ(EnvImageFromJson("{\"top\": \"dir:/r\", \"env\": [1]}", "e.json").status().message(),
            "e.json: env: expected [name, value] pairs");
}

TEST(CopyPlanTest, KeyFollowsContentAndErrorsNameTheInstruction) {
  testing::TempDir ctx;
  std::filesystem::create_directories(ctx.file("src/sub"));
  std::ofstream(ctx.file("src/a.txt")) << "one";
  std::ofstream(ctx.file("src/sub/b.txt")) << "two";
  Instruction in;
  auto p1 = PlanContextCopy(ctx.path().string(), {"src/"}, "/app/", false, in, "Dockerfile:3: COPY");
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_EQ(p1->files.size(), 2u);
  EXPECT_EQ(p1->files[0].dest, "/app/a.txt");
  EXPECT_EQ(p1->files[1].dest, "/app/sub/b.txt");
  EXPECT_EQ(p1->dest_dirs, std::vector<std::string>{"/app/"});
  auto same = PlanContextCopy(ctx.path().string(), {"src/"}, "/app/", false, in, "Dockerfile:3: COPY");
  EXPECT_EQ(same->key, p1->key);
  std::ofstream(ctx.file("src/sub/b.txt")) << "changed";
  auto changed = PlanContextCopy(ctx.path().string(), {"src/"}, "/app/", false, in, "Dockerfile:3: COPY");
  EXPECT_NE(changed->key, p1->key);
  auto glob = PlanContextCopy(ctx.path().string(), {"src/*.txt"}, "/x/y", false, in, "Dockerfile:3: COPY");
  ASSERT_TRUE(glob.ok()) << glob.status();
  EXPECT_TRUE(glob->single_file);
  EXPECT_EQ(glob->files[0].dest, "/x/y");
  auto missing = PlanContextCopy(ctx.path().string(), {"nope.txt"}, "/app/", false, in, "Dockerfile:3: COPY");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "Dockerfile:3: COPY: nope.txt: no such file in the build context " + ctx.path().string());
  auto escape = PlanContextCopy(ctx.path().string(), {"../etc/passwd"}, "/app/", false, in, "Dockerfile:3: COPY");
  EXPECT_EQ(escape.status().message(), "Dockerfile:3: COPY: ../etc/passwd is outside the build context");
  auto url = PlanContextCopy(ctx.path().string(), {"https://x/y"}, "/app/", true, in, "Dockerfile:4: ADD");
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::environments
