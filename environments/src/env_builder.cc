#include "flotilla/environments/env_builder.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base_images.h"
#include "build_sandbox.h"
#include "copy_plan.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"
#include "flotilla/environments/dockerfile.h"
#include "flotilla/policies/policy.h"
#include "hashing.h"
#include "registry_hint.h"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct Stage {
  std::string name;
  std::string top;
  ImageConfig config;
  std::map<std::string, std::string> args;  // ARG values in effect
  std::string key;                          // the cache key of the last step
  uint64_t bytes = 0;
};

// The host names of this machine's apt sources: the build sandboxes' mirror proxy allows them.
std::set<std::string> MirrorHosts() {
  auto hosts = policies::AptSourceHosts("/");
  if (!hosts.ok()) return {};
  return std::set<std::string>(hosts->begin(), hosts->end());
}

void SetEnv(ImageConfig* c, const std::string& name, const std::string& value) {
  for (auto& [k, v] : c->env) {
    if (k == name) {
      v = value;
      return;
    }
  }
  c->env.emplace_back(name, value);
}

// "K=V K2=V2" (quotes allowed) or the legacy "K V" form.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> KeyValues(const std::string& args,
                                                                          const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> words = SplitWords(args);
  if (words.empty()) return absl::InvalidArgumentError(where + ": needs NAME=VALUE");
  if (words[0].find('=') == std::string::npos) {
    size_t sp = args.find_first_of(" \t");
    if (sp == std::string::npos) return absl::InvalidArgumentError(where + ": needs NAME=VALUE or NAME VALUE");
    std::vector<std::string> v = SplitWords(args.substr(sp));
    out.emplace_back(words[0], absl::StrJoin(v, " "));
    return out;
  }
  for (const std::string& w : words) {
    size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0) return absl::InvalidArgumentError(where + ": '" + w + "' is not NAME=VALUE");
    out.emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
  return out;
}

std::string AbsoluteIn(const std::string& workdir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  std::string base = workdir.empty() ? "/" : workdir;
  bool dir = absl::EndsWith(path, "/");
  std::string joined = (fs::path(base) / path).lexically_normal().string();
  if (dir && !absl::EndsWith(joined, "/")) joined += "/";
  return joined;
}

}  // namespace

class EnvBuilder::Run {
 public:
  Run(EnvBuilder& b, const Dockerfile& df, std::string context, const BuildOptions& o)
      : b_(b), df_(df), context_(std::move(context)), o_(o) {}

  absl::StatusOr<BuildResult> Go() {
    auto t0 = std::chrono::steady_clock::now();
    std::map<std::string, std::string> global_args;
    for (const Instruction& in : df_.instructions) {
      loc_ = absl::StrCat(df_.file, ":", in.line, ": ", in.keyword);
      absl::Status s = Step(in, &global_args);
      if (!s.ok()) return s;
    }
    if (stages_.empty()) return absl::InvalidArgumentError(df_.file + ": no FROM");
    Stage& last = stages_.back();
    BuildResult r = result_;
    r.image.tag = o_.tag;
    r.image.top = last.top;
    r.image.config = last.config;
    r.image.bytes = last.bytes;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.image.build_seconds = r.seconds;
    r.image.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    if (!o_.tag.empty()) RETURN_IF_ERROR(b_.store_.Save(r.image));
    return r;
  }

 private:
  void Progress(const std::string& line) {
    if (o_.progress) o_.progress(line);
  }

  absl::StatusOr<std::string> Expand(const std::string& text) {
    std::map<std::string, std::string> vars = stages_.empty() ? global_args_view_ : stages_.back().args;
    if (!stages_.empty()) {
      for (const auto& [k, v] : stages_.back().config.env) vars[k] = v;
    }
    auto r = ExpandVariables(text, vars);
    if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(loc_, ": ", r.status().message()));
    return r;
  }

  absl::Status Step(const Instruction& in, std::map<std::string, std::string>* global_args) {
    const std::string& k = in.keyword;
    if (k == "FROM") return From(in, *global_args);
    if (k == "ARG") return Arg(in, global_args);
    if (stages_.empty()) return absl::InvalidArgumentError(loc_ + ": only ARG may come before the first FROM");
    Stage& st = stages_.back();
    for (const auto& [flag, v] : in.flags) {
      bool ok = ((k == "COPY" || k == "ADD") && (flag == "from" || flag == "chown" || flag == "chmod" || flag == "link")) ||
                (k == "HEALTHCHECK");
      if (!ok) return absl::InvalidArgumentError(absl::StrCat(loc_, ": --", flag, " is not supported"));
    }
    if (k == "RUN") return RunStep(in);
    if (k == "COPY" || k == "ADD") return CopyStep(in);
    if (k == "WORKDIR") {
      ASSIGN_OR_RETURN(std::string dir, Expand(in.args));
      if (dir.empty()) return absl::InvalidArgumentError(loc_ + ": needs a directory");
      dir = AbsoluteIn(st.config.workdir, dir);
      if (dir.size() > 1 && absl::EndsWith(dir, "/")) dir.pop_back();
      st.config.workdir = dir;
      std::string chown;
      if (!st.config.user.empty()) chown = absl::StrCat(" && chown ", ShellQuote(st.config.user), " ", ShellQuote(dir));
      std::string script = absl::StrCat("[ -d ", ShellQuote(dir), " ] || { mkdir -p ", ShellQuote(dir), chown, "; }");
      return LayerStep(in, {"WORKDIR", dir, st.config.user}, [&](BuildSandbox& sb) { return sb.Shell(script).status(); });
    }
    if (k == "ENV") {
      ASSIGN_OR_RETURN(auto kvs, KeyValues(in.args, loc_));
      for (auto& [name, value] : kvs) {
        ASSIGN_OR_RETURN(std::string v, Expand(value));
        SetEnv(&st.config, name, v);
      }
      return absl::OkStatus();
    }
    if (k == "USER") {
      ASSIGN_OR_RETURN(std::string u, Expand(in.args));
      u = std::string(absl::StripAsciiWhitespace(u));
      if (u.empty() || u.find_first_of(" \t") != std::string::npos) {
        return absl::InvalidArgumentError(loc_ + ": needs one user[:group]");
      }
      st.config.user = (u == "root" || u == "0") ? "" : u;
      return absl::OkStatus();
    }
    if (k == "SHELL") {
      if (!in.exec_form || in.exec_args.empty()) {
        return absl::InvalidArgumentError(loc_ + ": must be a JSON array, e.g. [\"/bin/bash\", \"-c\"]");
      }
      st.config.shell = in.exec_args;
      return absl::OkStatus();
    }
    if (k == "ENTRYPOINT" || k == "CMD") {
      std::vector<std::string> v = in.exec_args;
      if (!in.exec_form) {
        v = st.config.shell;
        v.push_back(in.args);
      }
      (k == "CMD" ? st.config.cmd : st.config.entrypoint) = v;
      if (k == "ENTRYPOINT") st.config.cmd.clear();
      return absl::OkStatus();
    }
    if (k == "EXPOSE") {
      ASSIGN_OR_RETURN(std::string e, Expand(in.args));
      for (std::string p : SplitWords(e)) {
        if (p.find('/') == std::string::npos) p += "/tcp";
        st.config.expose.push_back(p);
      }
      return absl::OkStatus();
    }
    if (k == "LABEL") {
      ASSIGN_OR_RETURN(auto kvs, KeyValues(in.args, loc_));
      for (auto& [name, value] : kvs) {
        ASSIGN_OR_RETURN(st.config.labels[name], Expand(value));
      }
      return absl::OkStatus();
    }
    if (k == "VOLUME" || k == "STOPSIGNAL" || k == "HEALTHCHECK" || k == "MAINTAINER") {
      Progress(absl::StrCat(loc_, ": ignored (sandboxes have no volumes, signals or health checks)"));
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(loc_, ": instruction not supported (supported: FROM RUN COPY ADD "
                                                   "WORKDIR ENV ARG USER SHELL ENTRYPOINT CMD EXPOSE LABEL)"));
  }

  absl::Status Arg(const Instruction& in, std::map<std::string, std::string>* global_args) {
    for (const std::string& w : SplitWords(in.args)) {
      size_t eq = w.find('=');
      std::string name = w.substr(0, eq);
      if (name.empty()) return absl::InvalidArgumentError(loc_ + ": needs NAME[=default]");
      std::optional<std::string> value;
      if (auto it = o_.build_args.find(name); it != o_.build_args.end()) {
        value = it->second;
      } else if (eq != std::string::npos) {
        ASSIGN_OR_RETURN(std::string v, Expand(w.substr(eq + 1)));
        value = v;
      } else if (auto g = global_args->find(name); g != global_args->end() && !stages_.empty()) {
        value = g->second;  // a global ARG redeclared in a stage takes its value
      }
      if (stages_.empty()) {
        (*global_args)[name] = value.value_or("");
        global_args_view_ = *global_args;
      } else {
        stages_.back().args[name] = value.value_or("");
      }
    }
    return absl::OkStatus();
  }

  absl::Status From(const Instruction& in, const std::map<std::string, std::string>& global_args) {
    global_args_view_ = global_args;
    std::vector<std::string> words = SplitWords(in.args);
    if (words.empty() || (words.size() != 1 && !(words.size() == 3 && absl::AsciiStrToLower(words[1]) == "as"))) {
      return absl::InvalidArgumentError(loc_ + ": expected FROM image [AS name]");
    }
    std::map<std::string, std::string> saved;
    auto name_or = ExpandVariables(words[0], global_args);
    if (!name_or.ok()) return absl::InvalidArgumentError(absl::StrCat(loc_, ": ", name_or.status().message()));
    std::string name = *name_or;
    Stage st;
    st.name = words.size() == 3 ? absl::AsciiStrToLower(words[2]) : "";
    if (const Stage* prev = FindStage(name)) {
      st.top = prev->top;
      st.config = prev->config;
      st.key = prev->key;
      st.bytes = prev->bytes;
    } else if (auto env = b_.store_.Get(absl::AsciiStrToLower(name)); env.ok()) {
      st.top = env->top;
      st.config = env->config;
      st.key = Sha256Hex("FROM env " + env->top);
      st.bytes = env->bytes;
    } else if (std::optional<BaseSpec> base = KnownBase(name)) {
      Progress(absl::StrCat(loc_, " ", name, ": Debian ", base->suite, " (debootstrap --variant=minbase)"));
      auto root = EnsureDebianBase(b_.store_.dir(), base->suite, o_.progress);
      if (!root.ok()) return Annotate(root.status(), loc_ + " " + name);
      result_.base_built = result_.base_built || root->built_now;
      st.top = root->top;
      st.key = Sha256Hex("FROM base " + root->top);
      st.bytes = root->bytes;
      st.config.env = {{"PATH", kDefaultPath}};
      std::string setup = BaseSetupCommand(*base);
      stages_.push_back(st);
      if (!setup.empty()) {
        Instruction synthetic = in;
        synthetic.keyword = "RUN";
        RETURN_IF_ERROR(LayerStep(synthetic, {"BASE", name, setup}, [&](BuildSandbox& sb) {
          return RunCommand(sb, {"/bin/sh", "-c", setup}, stages_.back(), synthetic);
        }));
      }
      return absl::OkStatus();
    } else {
      return absl::NotFoundError(absl::StrCat(
          loc_, ": unknown base image '", name,
          "' (known: debian:bookworm[-slim], debian:12[-slim], python:3.11[-slim][-bookworm], "
          "buildpack-deps:bookworm[-curl|-scm], an environment built here (flotilla env ls), or an earlier stage)"));
    }
    stages_.push_back(st);
    return absl::OkStatus();
  }

  const Stage* FindStage(const std::string& name) const {
    std::string lower = absl::AsciiStrToLower(name);
    for (size_t i = 0; i < stages_.size(); ++i) {
      if ((!stages_[i].name.empty() && stages_[i].name == lower) || lower == std::to_string(i)) return &stages_[i];
    }
    return nullptr;
  }

  std::map<std::string, std::string> RunEnv(const Stage& st) const {
    std::map<std::string, std::string> env = st.args;
    env["HOME"] = "/root";
    env["PATH"] = kDefaultPath;
    for (const auto& [k, v] : st.config.env) env[k] = v;
    return env;
  }

  absl::Status RunCommand(BuildSandbox& sb, const std::vector<std::string>& argv, const Stage& st,
                          const Instruction& in) {
    ASSIGN_OR_RETURN(StepOutput out, sb.Run(argv, RunEnv(st), st.config.workdir, st.config.user,
                                            [this](std::string_view l) { Progress(absl::StrCat("  | ", std::string(l))); }, true));
    if (out.exit_code == 0 && out.reason.empty()) return absl::OkStatus();
    std::string why = out.reason.empty() ? absl::StrCat("exited with status ", out.exit_code) : out.reason;
    std::string hint = RegistryHint(in.text);
    return absl::FailedPreconditionError(absl::StrCat(loc_, " ", in.args.substr(0, 200), ": ", why,
                                                      hint.empty() ? "" : "\n", hint, "\n--- last output ---\n",
                                                      out.tail));
  }

  absl::Status RunStep(const Instruction& in) {
    Stage& st = stages_.back();
    std::vector<std::string> argv;
    if (in.exec_form) {
      argv = in.exec_args;
      if (argv.empty()) return absl::InvalidArgumentError(loc_ + ": empty command");
    } else if (!in.heredocs.empty() && absl::StartsWith(absl::StripAsciiWhitespace(in.args), "<<") &&
               absl::StripAsciiWhitespace(in.args).find_first_of(" \t") == absl::string_view::npos) {
      argv = st.config.shell;  // RUN <<EOF: the body is the script
      argv.push_back(in.heredocs[0].body);
    } else {
      std::string script = in.args;
      for (const HereDoc& h : in.heredocs) absl::StrAppend(&script, "\n", h.body, h.name);
      if (absl::StripAsciiWhitespace(script).empty()) return absl::InvalidArgumentError(loc_ + ": empty command");
      argv = st.config.shell;
      argv.push_back(script);
    }
    std::vector<std::string> key = {"RUN", absl::StrJoin(argv, std::string(1, '\0')), st.config.user,
                                    st.config.workdir};
    for (const auto& [k, v] : RunEnv(st)) key.push_back(absl::StrCat(k, "=", v));
    return LayerStep(in, key, [&](BuildSandbox& sb) { return RunCommand(sb, argv, stages_.back(), in); });
  }

  absl::Status CopyStep(const Instruction& in) {
    Stage& st = stages_.back();
    std::vector<std::string> words;
    if (in.exec_form) {
      for (const std::string& w : in.exec_args) {
        ASSIGN_OR_RETURN(std::string e, Expand(w));
        words.push_back(e);
      }
    } else {
      ASSIGN_OR_RETURN(std::string e, Expand(in.args));
      words = SplitWords(e);
    }
    if (words.size() < 2) return absl::InvalidArgumentError(loc_ + ": needs a source and a destination");
    std::string dest = AbsoluteIn(st.config.workdir, words.back());
    if (words.back() == "." || absl::EndsWith(words.back(), "/.")) dest += "/";
    words.pop_back();
    CopyOwner owner;
    if (auto it = in.flags.find("chown"); it != in.flags.end()) {
      ASSIGN_OR_RETURN(owner.chown, Expand(it->second));
    }
    if (auto it = in.flags.find("chmod"); it != in.flags.end()) {
      owner.chmod = it->second;
      if (owner.chmod.empty() || owner.chmod.find_first_not_of("01234567") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(loc_, ": --chmod=", it->second, ": expected an octal mode"));
      }
    }
    if (auto it = in.flags.find("from"); it != in.flags.end()) {
      ASSIGN_OR_RETURN(std::string from, Expand(it->second));
      std::string source_top;
      if (const Stage* s = FindStage(from)) {
        source_top = s->top;
      } else if (auto env = b_.store_.Get(absl::AsciiStrToLower(from)); env.ok()) {
        source_top = env->top;
      } else {
        return absl::NotFoundError(absl::StrCat(loc_, ": --from=", from, ": no earlier stage or built environment of that name"));
      }
      std::vector<std::string> key = {"COPY-FROM", source_top, dest, owner.chown, owner.chmod};
      key.insert(key.end(), words.begin(), words.end());
      return LayerStep(in, key, [&](BuildSandbox& sb) -> absl::Status {
        ASSIGN_OR_RETURN(sandbox::Runtime * rt, b_.runtime());
        auto source = BuildSandbox::Start(*rt, source_top, {}, b_.options_.execution_class);
        if (!source.ok()) return Annotate(source.status(), loc_ + ": starting a sandbox of --from=" + from);
        return Annotate(CopyBetween(**source, sb, words, dest, owner), loc_);
      });
    }
    ASSIGN_OR_RETURN(CopyPlan plan, PlanContextCopy(context_, words, dest, in.keyword == "ADD", in, loc_));
    return LayerStep(in, {in.keyword, plan.key, owner.chown, owner.chmod},
                     [&](BuildSandbox& sb) { return Annotate(ExecuteCopy(sb, plan, owner), loc_); });
  }

  // One layer: from the cache under a key of (parent key, `material`), or made by `work` in a
  // build sandbox over the current top and committed.
  absl::Status LayerStep(const Instruction& in, const std::vector<std::string>& material,
                         const std::function<absl::Status(BuildSandbox&)>& work) {
    Stage& st = stages_.back();
    KeyHasher h;
    h.Add(st.key);
    h.Add(st.top);
    for (const std::string& m : material) h.Add(m);
    std::string key = h.Finish();
    result_.layer_steps += 1;
    std::string label = absl::StrCat(loc_, " ", in.args.substr(0, 120));
    if (!o_.no_cache) {
      if (auto hit = b_.store_.CacheLookup(key)) {
        Progress(label + "  [cached " + hit->first.substr(0, 19) + "]");
        st.top = hit->first;
        st.key = key;
        st.bytes += hit->second;
        result_.cached_steps += 1;
        return absl::OkStatus();
      }
    }
    Progress(label);
    ASSIGN_OR_RETURN(sandbox::Runtime * rt, b_.runtime());
    if (mirror_hosts_.empty()) mirror_hosts_ = MirrorHosts();
    auto sb = BuildSandbox::Start(*rt, st.top, mirror_hosts_, b_.options_.execution_class);
    if (!sb.ok()) return Annotate(sb.status(), loc_ + ": starting the build sandbox");
    RETURN_IF_ERROR(work(**sb));
    auto committed = (*sb)->Commit();
    if (!committed.ok()) return Annotate(committed.status(), loc_ + ": committing the layer");
    RETURN_IF_ERROR(b_.store_.CacheStore(key, committed->layer_id, committed->bytes));
    Progress(absl::StrCat("  -> ", committed->layer_id.substr(0, 19), " (", committed->bytes, " bytes)"));
    st.top = committed->layer_id;
    st.key = key;
    st.bytes += committed->bytes;
    return absl::OkStatus();
  }

  EnvBuilder& b_;
  const Dockerfile& df_;
  std::string context_;
  const BuildOptions& o_;
  std::vector<Stage> stages_;
  std::map<std::string, std::string> global_args_view_;
  std::string loc_;
  std::set<std::string> mirror_hosts_;
  BuildResult result_;
};

EnvBuilder::EnvBuilder(EnvBuilderOptions options) : options_(std::move(options)), store_(options_.store_dir) {}

EnvBuilder::~EnvBuilder() = default;

absl::StatusOr<sandbox::Runtime*> EnvBuilder::runtime() {
  if (runtime_ != nullptr) return runtime_.get();
  sandbox::RuntimeOptions ro = options_.runtime;
  if (ro.state_dir.empty() || ro.state_dir == sandbox::RuntimeOptions().state_dir) {
    ro.state_dir = options_.store_dir + "/build-sandboxes";
  }
  ro.image_dir = options_.store_dir;
  ro.start_ahead = false;
  auto rt = sandbox::Runtime::Open(ro);
  if (!rt.ok()) return Annotate(rt.status(), "opening the sandbox runtime for build steps");
  runtime_ = std::move(*rt);
  return runtime_.get();
}

absl::StatusOr<BuildResult> EnvBuilder::Build(const std::string& context_dir, const std::string& dockerfile,
                                              const BuildOptions& options) {
  std::ifstream in(dockerfile, std::ios::binary);
  if (!in) return absl::NotFoundError(dockerfile + ": cannot read the Dockerfile");
  std::stringstream ss;
  ss << in.rdbuf();
  ASSIGN_OR_RETURN(Dockerfile df, ParseDockerfile(ss.str(), dockerfile));
  std::error_code ec;
  if (!fs::is_directory(context_dir, ec)) return absl::NotFoundError("build context " + context_dir + ": not a directory");
  if (!options.tag.empty() && !IsSafeId(options.tag)) {
    return absl::InvalidArgumentError("tag: '" + options.tag + "' is not a tag (a-z, 0-9, '-', '_', '.')");
  }
  Run run(*this, df, context_dir, options);
  return run.Go();
}

}  // namespace flotilla::environments
