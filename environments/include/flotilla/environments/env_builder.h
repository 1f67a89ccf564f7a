// EnvBuilder: builds a task environment from a Dockerfile into content-addressed layers.
//
//   EnvBuilder b({.store_dir = "/var/lib/flotilla"});
//   ASSIGN_OR_RETURN(BuildResult r, b.Build("task/environment", "task/environment/Dockerfile",
//                                           {.tag = "my-task"}));
//   // SandboxOptions::image = "my-task" (with RuntimeOptions::image_dir = the store dir)
//
// The Dockerfile subset (dockerfile.h parses it):
//   FROM name [AS stage]   a known Debian-based name (base_images.h: debootstrapped once per
//                          suite, variant and mirror, then cached), an environment built
//                          before (its tag), or an earlier stage
//   RUN                    shell or exec form, or a here-document; runs in a build sandbox as
//                          root (or USER), over the layers so far, under the "build" policy:
//                          apt-get reaches the machine's apt mirrors and nothing else reaches
//                          the network. A non-zero exit stops the build with the Dockerfile
//                          line and the command's last output.
//   COPY/ADD               files of the build context (globs in the last path element),
//                          --chown, --chmod, --from=<stage|tag>; ADD extracts local tar
//                          archives; ADD of a URL is refused (no network to reach it)
//   WORKDIR ENV ARG USER SHELL   applied (ARG defaults, BuildOptions::build_args override)
//   ENTRYPOINT CMD EXPOSE LABEL  recorded in the image config; VOLUME, STOPSIGNAL,
//                                HEALTHCHECK and MAINTAINER are accepted and ignored
// Every other instruction (ONBUILD, RUN --mount...) is an error naming its line.
//
// Each RUN, COPY, ADD and WORKDIR makes one layer, cached under a key that hashes the parent
// layer, the instruction as evaluated (ARG/ENV values, USER, WORKDIR, SHELL) and the content
// of the files it copies: an unchanged Dockerfile and context are rebuilt from the cache
// without starting any sandbox.
//
// Thread-safety: one Build at a time per builder. The builder opens its sandbox runtime the
// first time a step needs a sandbox and keeps it until it is destroyed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/environments/env_store.h"
#include "flotilla/sandbox/runtime.h"

namespace flotilla::environments {

struct EnvBuilderOptions {
  std::string store_dir = "/var/lib/flotilla";  // layers, images, base root filesystems, cache
  // The build sandboxes' runtime; its state_dir defaults to <store_dir>/build-sandboxes and
  // its image_dir is always the store dir.
  sandbox::RuntimeOptions runtime;
  // The RUN steps' class: best effort (SCHED_IDLE, behind all other work) by default; a caller
  // that waits on its builds (the synthesizer, one build per task) asks for latency-sensitive.
  sandbox::ExecutionClass execution_class = sandbox::ExecutionClass::kBestEffort;
};

struct BuildOptions {
  std::string tag;                                // names the result (a safe id); empty: none
  std::map<std::string, std::string> build_args;  // --build-arg NAME=VALUE
  bool no_cache = false;
  std::function<void(std::string_view)> progress;  // step lines and the commands' output
};

struct BuildResult {
  EnvImage image;      // image.tag is BuildOptions::tag
  int layer_steps = 0;  // steps that make a layer (RUN, COPY, ADD, WORKDIR, a base's packages)
  int cached_steps = 0; // of those, taken from the cache
  bool base_built = false;  // a debootstrap ran
  double seconds = 0;
};

class EnvBuilder {
 public:
  explicit EnvBuilder(EnvBuilderOptions options);
  ~EnvBuilder();
  EnvBuilder(const EnvBuilder&) = delete;
  EnvBuilder& operator=(const EnvBuilder&) = delete;

  // Builds `dockerfile` (a path) with `context_dir` as the build context. Errors name the
  // Dockerfile (as given) and line: InvalidArgument for what the subset does not accept,
  // NotFound for an unknown base or a missing COPY source, FailedPrecondition for a failing
  // RUN (with its exit status and last output), Unavailable when no sandbox can be started.
  absl::StatusOr<BuildResult> Build(const std::string& context_dir, const std::string& dockerfile,
                                    const BuildOptions& options);

  const EnvStore& store() const { return store_; }

 private:
  class Run;  // one Build's state (env_builder.cc)
  absl::StatusOr<sandbox::Runtime*> runtime();

  EnvBuilderOptions options_;
  EnvStore store_;
  std::unique_ptr<sandbox::Runtime> runtime_;
};

}  // namespace flotilla::environments
