// Carrying out COPY and ADD in a build sandbox.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "build_sandbox.h"
#include "copy_plan.h"
#include "flotilla/common/status.h"

namespace flotilla::environments {
namespace {

std::string Dirname(const std::string& path) {
  std::string p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "/" : p;
}

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// chown of the paths a copy made (not of directories that were there before), chmod of the
// regular files among them.
std::string OwnerScript(const std::vector<std::string>& paths, const CopyOwner& owner) {
  std::string s;
  for (const std::string& p : paths) {
    if (!owner.chown.empty()) absl::StrAppend(&s, "chown -h ", ShellQuote(owner.chown), " ", ShellQuote(p), " || exit 1\n");
    if (!owner.chmod.empty()) {
      absl::StrAppend(&s, "if [ -f ", ShellQuote(p), " ] && [ ! -L ", ShellQuote(p), " ]; then chmod ", owner.chmod, " ",
                      ShellQuote(p), " || exit 1; fi\n");
    }
  }
  return s;
}

}  // namespace

absl::Status ExecuteCopy(BuildSandbox& sb, const CopyPlan& plan, const CopyOwner& owner) {
  std::vector<CopyPlan::File> files = plan.files;
  if (plan.single_file && files.size() == 1) {
    // COPY file /existing/dir: the file goes into the directory.
    absl::StatusOr<std::string> is_dir =
        sb.Shell(absl::StrCat("[ -d ", ShellQuote(files[0].dest), " ] && echo d || true"));
    if (!is_dir.ok()) return is_dir.status();
    if (absl::StartsWith(*is_dir, "d")) {
      std::string base = std::filesystem::path(files[0].source).filename().string();
      files[0].dest = absl::StrCat(files[0].dest, "/", base);
    }
  }
  std::string script = "set -e\n";
  std::vector<std::string> made;
  for (const std::string& dir : plan.dest_dirs) absl::StrAppend(&script, "mkdir -p ", ShellQuote(dir), "\n");
  for (const auto& [dir, mode] : plan.dirs) {
    absl::StrAppend(&script, "mkdir -p ", ShellQuote(dir), "\n");
    made.push_back(dir);
  }
  RETURN_IF_ERROR(sb.Shell(script).status());
  for (const CopyPlan::File& f : files) {
    std::string content = f.inline_content;
    if (!f.source.empty()) {
      ASSIGN_OR_RETURN(content, Slurp(f.source));
    }
    RETURN_IF_ERROR(Annotate(sb.Put(f.dest, content, f.mode), "copying to " + f.dest));
    made.push_back(f.dest);
  }
  script = "";
  // Directory modes after their files are in (a read-only directory would refuse them).
  for (auto it = plan.dirs.rbegin(); it != plan.dirs.rend(); ++it) {
    absl::StrAppend(&script, "chmod ", absl::StrFormat("%o", it->second), " ", ShellQuote(it->first), " || exit 1\n");
  }
  for (const auto& [dest, target] : plan.symlinks) {
    absl::StrAppend(&script, "mkdir -p ", ShellQuote(Dirname(dest)), " && ln -sfn ", ShellQuote(target), " ",
                    ShellQuote(dest), " || exit 1\n");
    made.push_back(dest);
  }
  int n = 0;
  for (const auto& [host, dest] : plan.archives) {
    ASSIGN_OR_RETURN(std::string content, Slurp(host));
    std::string tmp = absl::StrCat("/tmp/.flotilla-add-", n++);
    RETURN_IF_ERROR(sb.Put(tmp, content, 0600));
    absl::StrAppend(&script, "mkdir -p ", ShellQuote(dest), " && tar -C ", ShellQuote(dest), " -xf ", tmp,
                    " && rm -f ", tmp, " || exit 1\n");
    if (!owner.chown.empty()) {
      absl::StrAppend(&script, "chown -R ", ShellQuote(owner.chown), " ",
                      ShellQuote(dest), " || exit 1\n");
    }
  }
  absl::StrAppend(&script, OwnerScript(made, owner));
  if (script.empty()) return absl::OkStatus();
  return sb.Shell(script).status();
}

absl::Status CopyBetween(BuildSandbox& from, BuildSandbox& to, const std::vector<std::string>& sources,
                         const std::string& dest, const CopyOwner& owner) {
  const bool into_dir = absl::EndsWith(dest, "/") || sources.size() > 1;
  if (sources.size() > 1 && !absl::EndsWith(dest, "/")) {
    return absl::InvalidArgumentError("with several sources the destination must end in '/'");
  }
  for (const std::string& src_in : sources) {
    std::string src = src_in.empty() || src_in[0] != '/' ? "/" + src_in : src_in;
    std::string q = ShellQuote(src);
    ASSIGN_OR_RETURN(std::string kind,
                     from.Shell(absl::StrCat("if [ -d ", q, " ]; then echo d; elif [ -e ", q, " ]; then echo f; fi")));
    if (kind.empty()) return absl::NotFoundError(absl::StrCat("--from: ", src, ": no such file in that image"));
    const bool dir = absl::StartsWith(kind, "d");
    std::string base = std::filesystem::path(src).filename().string();
    std::string tar_cmd = dir ? absl::StrCat("tar -C ", q, " -cf - .")
                              : absl::StrCat("tar -C ", ShellQuote(Dirname(src)), " -cf - ", ShellQuote(base));
    auto data = from.Shell(tar_cmd);
    if (!data.ok()) return Annotate(data.status(), "--from: packing " + src);
    std::string d = ShellQuote(dest);
    std::string script = "set -e\nt=$(mktemp -d /tmp/.flotilla-copy.XXXXXX)\ntar -C \"$t\" -xpf -\n";
    if (!owner.chown.empty()) absl::StrAppend(&script, "find \"$t\" -mindepth 1 -exec chown -h ", ShellQuote(owner.chown), " {} +\n");
    if (!owner.chmod.empty()) absl::StrAppend(&script, "find \"$t\" -mindepth 1 -type f -exec chmod ", owner.chmod, " {} +\n");
    if (dir) {
      absl::StrAppend(&script, "mkdir -p ", d, "\ncp -a \"$t\"/. ", d, "\n");
    } else if (into_dir) {
      absl::StrAppend(&script, "mkdir -p ", d, "\ncp -a \"$t\"/", ShellQuote(base), " ", d, "\n");
    } else {
      absl::StrAppend(&script, "mkdir -p ", ShellQuote(Dirname(dest)), "\nif [ -d ", d, " ]; then cp -a \"$t\"/",
                      ShellQuote(base), " ", d, "/; else cp -a \"$t\"/", ShellQuote(base), " ", d, "; fi\n");
    }
    absl::StrAppend(&script, "rm -rf \"$t\"\n");
    auto put = to.Shell(script, *data);
    if (!put.ok()) return Annotate(put.status(), "--from: unpacking " + src + " to " + dest);
  }
  return absl::OkStatus();
}

}  // namespace flotilla::environments
