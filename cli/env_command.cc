// `flotilla env build|ls|rm|prune`: task environments built from Dockerfiles.
//
//   flotilla env build DIR|Dockerfile [-t TAG] [--build-arg NAME=VALUE]... [--no-cache]
//   flotilla env ls
//   flotilla env rm TAG...
//   flotilla env prune [--bases]
//
// DIR is a build context holding a Dockerfile, or a task folder (Harbor 2.x: environment/
// with its Dockerfile; Terminal-Bench 1.x: the Dockerfile beside task.yaml). A Dockerfile path
// builds with its folder as the context. The tag defaults to the folder's name (the task's).
// Step lines and the commands' output go to stderr; the last line, on stdout, is
//   env: tag=T top=sha256:... steps=N cached=M size_mib=X seconds=S
// Exit status: 0 built, 1 the build failed, 2 bad arguments.
#include <filesystem>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "flotilla/environments/env_builder.h"
#include "task_environment.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

struct EnvFlags {
  std::string store = "/var/lib/flotilla";
  std::string path;
  std::string tag;
  std::vector<std::string> build_args;
  bool no_cache = false;
  bool quiet = false;
  std::vector<std::string> tags;
  bool bases = false;
};

int Build(const EnvFlags& f) {
  fs::path p = fs::absolute(f.path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string context, dockerfile, name;
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    dockerfile = p.string();
    context = p.parent_path().string();
    name = p.parent_path().filename().string();
    if (name == "environment") name = p.parent_path().parent_path().filename().string();
  } else if (fs::is_regular_file(p / "environment" / "Dockerfile", ec)) {
    context = (p / "environment").string();
    dockerfile = (p / "environment" / "Dockerfile").string();
    name = p.filename().string();
  } else if (fs::is_regular_file(p / "Dockerfile", ec)) {
    context = p.string();
    dockerfile = (p / "Dockerfile").string();
    name = p.filename().string();
    if (name == "environment") name = p.parent_path().filename().string();
  } else {
    std::cerr << "flotilla env build: " << f.path << ": no Dockerfile there (nor environment/Dockerfile)\n";
    return 2;
  }
  environments::BuildOptions bo;
  bo.tag = f.tag.empty() ? EnvTagOf(name) : f.tag;
  bo.no_cache = f.no_cache;
  for (const std::string& a : f.build_args) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "flotilla env build: --build-arg " << a << ": expected NAME=VALUE\n";
      return 2;
    }
    bo.build_args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  if (!f.quiet) bo.progress = [](std::string_view l) { std::cerr << l << "\n"; };
  environments::EnvBuilder builder(CliEnvBuilderOptions(f.store));
  auto r = builder.Build(context, dockerfile, bo);
  if (!r.ok()) {
    std::cerr << "flotilla env build: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat("env: tag=%s top=%s steps=%d cached=%d size_mib=%.1f seconds=%.2f%s\n", r->image.tag,
                               r->image.top.substr(0, 19), r->layer_steps, r->cached_steps,
                               static_cast<double>(r->image.bytes) / (1 << 20), r->seconds,
                               r->base_built ? " base=built" : "");
  return 0;
}

int List(const EnvFlags& f) {
  environments::EnvStore store(f.store);
  auto all = store.List();
  if (!all.ok()) {
    std::cerr << "flotilla env ls: " << all.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat("%-32s %-19s %10s %8s %s\n", "TAG", "TOP", "SIZE_MIB", "BUILD_S", "WORKDIR");
  for (const auto& im : *all) {
    std::cout << absl::StrFormat("%-32s %-19s %10.1f %8.2f %s\n", im.tag, im.top.substr(0, 19),
                                 static_cast<double>(im.bytes) / (1 << 20), im.build_seconds,
                                 im.config.workdir.empty() ? "/" : im.config.workdir);
  }
  return 0;
}

}  // namespace

void AddEnvCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<EnvFlags>();
  CLI::App* env = app.add_subcommand("env", "Task environments built from Dockerfiles");
  env->require_subcommand(1);
  env->add_option("--store", f->store, "where layers, images and the build cache live")->capture_default_str();
  CLI::App* build = env->add_subcommand("build", "Build a Dockerfile (or a task folder's) into layers");
  build->add_option("path", f->path, "build context folder, task folder or Dockerfile")->required();
  build->add_option("-t,--tag", f->tag, "tag of the result (default: the folder's name)");
  build->add_option("--build-arg", f->build_args, "NAME=VALUE for an ARG (repeatable)");
  build->add_flag("--no-cache", f->no_cache, "run every step again");
  build->add_flag("-q,--quiet", f->quiet, "only the result line");
  build->callback([f, exit_code] { *exit_code = Build(*f); });
  CLI::App* ls = env->add_subcommand("ls", "List built environments");
  ls->callback([f, exit_code] { *exit_code = List(*f); });
  CLI::App* rm = env->add_subcommand("rm", "Remove environments' tags (prune frees their layers)");
  rm->add_option("tags", f->tags, "tags")->required();
  rm->callback([f, exit_code] {
    environments::EnvStore store(f->store);
    *exit_code = 0;
    for (const std::string& t : f->tags) {
      absl::Status s = store.Remove(t);
      if (!s.ok()) {
        std::cerr << "flotilla env rm: " << s.message() << "\n";
        *exit_code = 1;
      }
    }
  });
  CLI::App* prune = env->add_subcommand("prune", "Remove layers and cache entries no environment uses");
  prune->add_flag("--bases", f->bases, "also debootstrapped bases no environment uses");
  prune->callback([f, exit_code] {
    environments::EnvStore store(f->store);
    auto r = store.Prune(f->bases);
    if (!r.ok()) {
      std::cerr << "flotilla env prune: " << r.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << absl::StrFormat("env prune: layers=%d cache_entries=%d bases=%d freed_mib=%.1f\n", r->layers,
                                 r->cache_entries, r->bases, static_cast<double>(r->bytes) / (1 << 20));
    *exit_code = 0;
  });
}

}  // namespace flotilla::cli
