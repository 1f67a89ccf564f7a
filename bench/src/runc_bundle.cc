#include "runc_bundle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "child_process.h"

namespace flotilla::bench {
namespace fs = std::filesystem;
namespace {

absl::Status WriteFile(const fs::path& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

// The generated /etc: what programs need, nothing of the host's own configuration.
absl::Status WriteEtc(const fs::path& etc) {
  std::error_code ec;
  fs::create_directories(etc / "ssl" / "certs", ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", etc.string(), ": ", ec.message()));
  const std::pair<const char*, const char*> files[] = {
      {"passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
      {"group", "root:x:0:\nnogroup:x:65534:\n"},
      {"hosts", "127.0.0.1 localhost\n::1 localhost\n"},
      {"resolv.conf", "nameserver 127.0.0.1\n"},
      {"hostname", "sandbox\n"},
      {"nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n"},
  };
  for (const auto& [name, content] : files) {
    absl::Status s = WriteFile(etc / name, content);
    if (!s.ok()) return s;
  }
  // Caches and public certificates only (no secrets): the same files the sandbox image carries.
  fs::copy_file("/etc/ld.so.cache", etc / "ld.so.cache", ec);
  fs::copy_file("/etc/ssl/certs/ca-certificates.crt", etc / "ssl" / "certs" / "ca-certificates.crt", ec);
  return absl::OkStatus();
}

nlohmann::json Config(const RuncBundleOptions& o) {
  using nlohmann::json;
  json caps = json::array({"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"});
  json resources = {{"devices", json::array({{{"allow", false}, {"access", "rwm"}}})}};
  if (o.memory_bytes > 0) resources["memory"] = {{"limit", o.memory_bytes}};
  if (o.pids > 0) resources["pids"] = {{"limit", o.pids}};
  return {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", o.args},
        {"env", json::array({"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=dumb"})},
        {"cwd", "/"},
        {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
        {"rlimits", json::array({{{"type", "RLIMIT_NOFILE"}, {"hard", 1024}, {"soft", 1024}}})},
        {"noNewPrivileges", true}}},
      {"root", {{"path", "rootfs"}, {"readonly", false}}},
      {"hostname", "sandbox"},
      {"mounts",
       json::array({
           {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
           {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"},
            {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
           {{"destination", "/dev/pts"}, {"type", "devpts"}, {"source", "devpts"},
            {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
           {{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"},
            {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}},
           {{"destination", "/sys"}, {"type", "sysfs"}, {"source", "sysfs"},
            {"options", {"nosuid", "noexec", "nodev", "ro"}}},
           {{"destination", "/usr"}, {"type", "bind"}, {"source", "/usr"}, {"options", {"rbind", "ro"}}},
       })},
      {"linux",
       {{"resources", resources},
        {"namespaces", json::array({{{"type", "pid"}}, {{"type", "network"}}, {{"type", "ipc"}},
                                    {{"type", "uts"}}, {{"type", "mount"}}, {{"type", "cgroup"}}})},
        {"maskedPaths", {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                         "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"}},
        {"readonlyPaths", {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<RuncBundle>> RuncBundle::Create(const RuncBundleOptions& options) {
  if (options.runc.empty()) return absl::InvalidArgumentError("runc: no runc binary given");
  fs::path dir = options.dir;
  std::error_code ec;
  if (!fs::create_directories(dir / "rootfs", ec) || ec) {
    return absl::InternalError(absl::StrCat("cannot create bundle ", dir.string(), ": ", ec.message()));
  }
  std::unique_ptr<RuncBundle> bundle(new RuncBundle(options));
  fs::path rootfs = dir / "rootfs";
  for (const char* sub : {"usr", "proc", "dev", "sys", "tmp", "root", "run"}) fs::create_directory(rootfs / sub, ec);
  for (const char* link : {"bin", "lib", "lib32", "lib64", "sbin"}) {
    std::string target = std::string("usr/") + link;
    if (fs::exists(fs::path("/usr") / link)) fs::create_symlink(target, rootfs / link, ec);
  }
  absl::Status s = WriteEtc(rootfs / "etc");
  if (!s.ok()) return s;
  s = WriteFile(dir / "config.json", Config(options).dump(1));
  if (!s.ok()) return s;
  return bundle;
}

RuncBundle::~RuncBundle() {
  std::error_code ec;
  fs::remove_all(options_.dir, ec);
}

absl::Status RuncBundle::Run(const std::string& container_id) const {
  return RunChild({options_.runc, "--root", options_.dir + "/state", "run", "--bundle", options_.dir, container_id});
}

}  // namespace flotilla::bench
