// EnvBuilder end to end: real debootstrap base (cached in the store), real build sandboxes,
// real layers. Needs root and debootstrap; skips visibly otherwise.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "flotilla/environments/env_builder.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;

std::string StoreDir() {
  const char* s = std::getenv("FLOTILLA_ENV_STORE");
  return s != nullptr ? s : "/var/lib/flotilla";
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

class EnvBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, debootstrap)";
    if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
    if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror to build from";
    EnvBuilderOptions o;
    o.store_dir = StoreDir();
    o.runtime.state_dir = state_.file("build");
    o.runtime.cgroup_prefix = "flotilla-envtest";
    builder_ = std::make_unique<EnvBuilder>(o);
  }
  void TearDown() override {
    if (builder_ != nullptr) {
      for (const std::string& t : tags_) (void)builder_->store().Remove(t);
    }
  }

  absl::StatusOr<BuildResult> Build(const std::string& dockerfile, const std::string& tag,
                                    std::map<std::string, std::string> args = {}) {
    Write(ctx_.file("Dockerfile"), dockerfile);
    BuildOptions bo;
    bo.tag = tag;
    bo.build_args = std::move(args);
    bo.progress = [this](std::string_view l) { log_ += std::string(l) + "\n"; };
    if (!tag.empty()) tags_.push_back(tag);
    return builder_->Build(ctx_.path().string(), ctx_.file("Dockerfile"), bo);
  }

  std::unique_ptr<sandbox::Runtime> OpenRuntime() {
    sandbox::RuntimeOptions ro;
    ro.state_dir = state_.file("run");
    ro.image_dir = StoreDir();
    ro.cgroup_prefix = "flotilla-envtest-run";
    auto rt = sandbox::Runtime::Open(ro);
    EXPECT_TRUE(rt.ok()) << rt.status();
    return rt.ok() ? std::move(*rt) : nullptr;
  }

  static std::string Sh(sandbox::Runtime& rt, const std::string& id, const std::string& cmd) {
    sandbox::ExecOptions ex;
    ex.argv = {"/bin/sh", "-c", cmd};
    std::string out;
    auto r = rt.Exec(id, ex, [&](sandbox::OutputStream, std::string_view d) { out.append(d); });
    EXPECT_TRUE(r.ok()) << r.status();
    return out;
  }

  testing::TempDir ctx_, state_;
  std::unique_ptr<EnvBuilder> builder_;
  std::vector<std::string> tags_;
  std::string log_;
};

// Layer steps: the builder's RUN; WORKDIR, 3 COPY and 4 RUN of the final stage.
constexpr const char* kFullDockerfile = R"DF(ARG SUITE_TAG=bookworm-slim
FROM debian:${SUITE_TAG} AS builder
RUN mkdir -p /out && printf 'built\n' > /out/artifact.txt
FROM debian:bookworm-slim
ARG GREETING=hello
ENV APP_HOME=/srv/app GREETING_ENV=${GREETING}
WORKDIR $APP_HOME
COPY files/ ./
COPY --chown=1000:1000 --chmod=600 secret.txt /srv/secret.txt
COPY --from=builder /out/artifact.txt /opt/
RUN useradd -m -u 1000 runner && echo "$GREETING $GREETING_ENV" > greeting.txt
USER runner
RUN id -un > /tmp/whoami && echo "$HOME" > /tmp/home
USER root
SHELL ["/bin/bash", "-c"]
RUN [[ -n "$BASH_VERSION" ]] && echo bash > /shell.txt
RUN <<EOF
echo from-heredoc > /heredoc.txt
EOF
EXPOSE 8080
LABEL purpose="flotilla test"
CMD ["sleep", "1"]
)DF";

TEST_F(EnvBuildTest, AppliesEveryInstructionAndRebuildsFromTheCache) {
  // A value of this run only: the store's cache outlives the test, and the first build must
  // make the layers that depend on the context and the build argument.
  const std::string nonce = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  Write(ctx_.file("files/a.txt"), "alpha\n");
  Write(ctx_.file("files/sub/b.txt"), "beta " + nonce + "\n");
  Write(ctx_.file("secret.txt"), "s3cret\n");
  const std::string hi = "hi-" + nonce;
  auto r = Build(kFullDockerfile, "flotilla-test-full", {{"GREETING", hi}});
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log_;
  EXPECT_EQ(r->layer_steps, 9);
  EXPECT_EQ(r->image.config.workdir, "/srv/app");
  EXPECT_EQ(r->image.config.expose, std::vector<std::string>{"8080/tcp"});
  EXPECT_EQ(r->image.config.cmd, (std::vector<std::string>{"sleep", "1"}));
  EXPECT_EQ(r->image.config.labels.at("purpose"), "flotilla test");
  EXPECT_EQ(r->image.config.shell, (std::vector<std::string>{"/bin/bash", "-c"}));
  std::map<std::string, std::string> env(r->image.config.env.begin(), r->image.config.env.end());
  EXPECT_EQ(env["GREETING_ENV"], hi);
  EXPECT_EQ(env["APP_HOME"], "/srv/app");
  std::printf("env.build_first_s=%.3f cached_steps=%d base_built=%d\n", r->seconds, r->cached_steps,
              r->base_built ? 1 : 0);

  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  sandbox::SandboxOptions so;
  so.image = "flotilla-test-full";
  auto c = rt->Create(so);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Sh(*rt, c->id, "cat /srv/app/a.txt /srv/app/sub/b.txt"), "alpha\nbeta " + nonce + "\n");
  EXPECT_EQ(Sh(*rt, c->id, "stat -c '%u:%g %a' /srv/secret.txt"), "1000:1000 600\n");
  EXPECT_EQ(Sh(*rt, c->id, "cat /opt/artifact.txt /srv/app/greeting.txt /tmp/whoami /tmp/home"),
            "built\n" + hi + " " + hi + "\nrunner\n/home/runner\n");
  EXPECT_EQ(Sh(*rt, c->id, "cat /shell.txt /heredoc.txt"), "bash\nfrom-heredoc\n");
  // The image's /etc/hosts is the base's: builds reach the mirrors through a proxy, not by name.
  EXPECT_EQ(Sh(*rt, c->id, "cat /etc/hosts"), "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  ASSERT_TRUE(rt->Destroy(c->id).ok());

  // Unchanged: every step from the cache, no sandbox, same image.
  auto again = Build(kFullDockerfile, "flotilla-test-full", {{"GREETING", hi}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cached_steps, again->layer_steps);
  EXPECT_EQ(again->image.top, r->image.top);
  EXPECT_LE(again->seconds, 1.0);
  std::printf("env.build_cached_s=%.4f\n", again->seconds);

  // Another build argument: the steps before its first use stay cached.
  auto other = Build(kFullDockerfile, "flotilla-test-full", {{"GREETING", "ho-" + nonce}});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->image.top, r->image.top);
  EXPECT_EQ(other->cached_steps, 5);  // up to the RUN that reads $GREETING
  EXPECT_LT(other->cached_steps, other->layer_steps);

  // A changed context file: its COPY and everything after is rebuilt; the steps before are not.
  Write(ctx_.file("files/sub/b.txt"), "beta 2 " + nonce + "\n");
  auto changed = Build(kFullDockerfile, "flotilla-test-full", {{"GREETING", hi}});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->cached_steps, 2);  // the builder's RUN and WORKDIR
  EXPECT_NE(changed->image.top, r->image.top);
}

TEST_F(EnvBuildTest, RunStepsTakeTheBuildersExecutionClass) {
  // A value of this run only, so the RUN steps are not taken from the cache.
  const std::string nonce = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  auto idle = Build("FROM debian:bookworm-slim\nRUN echo " + nonce + "-a && chrt -p $$\n", "");
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_NE(log_.find("current scheduling policy: SCHED_IDLE"), std::string::npos) << log_;
  EnvBuilderOptions o;
  o.store_dir = StoreDir();
  o.runtime.state_dir = state_.file("build-ls");
  o.runtime.cgroup_prefix = "flotilla-envtest";
  o.execution_class = sandbox::ExecutionClass::kLatencySensitive;
  builder_ = std::make_unique<EnvBuilder>(o);
  log_.clear();
  auto normal = Build("FROM debian:bookworm-slim\nRUN echo " + nonce + "-b && chrt -p $$\n", "");
  ASSERT_TRUE(normal.ok()) << normal.status();
  EXPECT_NE(log_.find("current scheduling policy: SCHED_OTHER"), std::string::npos) << log_;
}

TEST_F(EnvBuildTest, AFailingStepNamesItsLineAndShowsItsOutput) {
  auto r = Build("FROM debian:bookworm-slim\n\nRUN echo about-to-fail && exit 3\nRUN echo never\n", "");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  std::string m(r.status().message());
  EXPECT_EQ(m.rfind(ctx_.file("Dockerfile") + ":3: RUN echo about-to-fail && exit 3: exited with status 3", 0), 0u)
      << m;
  EXPECT_NE(m.find("--- last output ---\nabout-to-fail\n"), std::string::npos) << m;
  EXPECT_EQ(log_.find("never"), std::string::npos);
}

TEST_F(EnvBuildTest, UnknownBasesAndInstructionsAreNamed) {
  auto r = Build("FROM ubuntu:22.04\n", "");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(r.status().message())
                .rfind(ctx_.file("Dockerfile") + ":1: FROM: unknown base image 'ubuntu:22.04'", 0),
            0u)
      << r.status();
  auto on = Build("FROM debian:bookworm-slim\nONBUILD RUN true\n", "");
  EXPECT_EQ(on.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(on.status().message()).find(":2: ONBUILD: instruction not supported"), std::string::npos)
      << on.status();
  auto mount = Build("FROM debian:bookworm-slim\nRUN --mount=type=cache,target=/x true\n", "");
  EXPECT_NE(std::string(mount.status().message()).find(":2: RUN: --mount is not supported"), std::string::npos)
      << mount.status();
}

TEST_F(EnvBuildTest, AptReachesTheMirrorButNothingElseAndPipSaysItsRegistryIsUnreachable) {
  // The python base installs python3-pip with apt-get in a build sandbox: the mirror is
  // reachable. Any other address is not.
  auto r = Build(
      "FROM python:3.11-slim\n"
      "RUN python3 -c 'import socket; socket.create_connection((\"192.0.2.1\", 80), 3)' || echo blocked > /net.txt\n"
      "RUN test \"$(cat /net.txt)\" = blocked && pip install --retries 0 --timeout 5 requests\n",
      "");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status() << "\n" << log_;
  std::string m(r.status().message());
  EXPECT_NE(m.find(":3: RUN test \"$(cat /net.txt)\" = blocked && pip install --retries 0 --timeout 5 requests: "
                   "exited with status 1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("PyPI (pip) is unreachable from the build sandbox"), std::string::npos) << m;
}

TEST_F(EnvBuildTest, FiftySandboxesOfOneEnvironmentStartTogetherOnSharedLayers) {
  Write(ctx_.file("data.txt"), "shared\n");
  auto r = Build("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY data.txt .\nRUN head -c 1048576 /dev/zero > big.bin\n",
                 "flotilla-test-fifty");
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log_;
  size_t layers_before = 0;
  for (auto& e : fs::directory_iterator(StoreDir() + "/layers")) layers_before += e.is_directory() ? 1 : 0;
  auto rt = OpenRuntime();
  ASSERT_NE(rt, nullptr);
  constexpr int kN = 50;
  std::vector<std::string> ids(kN);
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      sandbox::SandboxOptions so;
      so.image = "flotilla-test-fifty";
      auto c = rt->Create(so);
      if (!c.ok()) {
        failed++;
        ADD_FAILURE() << c.status();
        return;
      }
      ids[i] = c->id;
    });
  }
  for (auto& t : threads) t.join();
  double start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(failed.load(), 0);
  EXPECT_EQ(rt->List().size(), static_cast<size_t>(kN));  // all 50 running at once
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(Sh(*rt, ids[i], "cat /app/data.txt; stat -c %s /app/big.bin"), "shared\n1048576\n") << i;
  }
  // Each writes its own upper layer; the shared layers stay as built.
  EXPECT_EQ(Sh(*rt, ids[0], "echo mine > /app/data.txt && cat /app/data.txt"), "mine\n");
  EXPECT_EQ(Sh(*rt, ids[1], "cat /app/data.txt"), "shared\n");
  size_t layers_after = 0;
  for (auto& e : fs::directory_iterator(StoreDir() + "/layers")) layers_after += e.is_directory() ? 1 : 0;
  EXPECT_EQ(layers_after, layers_before);  // no copy of the image per sandbox
  for (const std::string& id : ids) EXPECT_TRUE(rt->Destroy(id).ok());
  std::printf("env.fifty_sandboxes_start_s=%.3f\n", start_s);
}

}  // namespace
}  // namespace flotilla::environments
