// YAML -> Policy. Every error names the file, the line and the field.
#include <seccomp.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "policy_internal.h"

namespace flotilla::policies {
namespace {

absl::StatusOr<std::vector<std::string>> ParsePaths(const ConfigNode& node) {
  std::vector<std::string> out;
  ASSIGN_OR_RETURN(std::vector<ConfigNode> items, node.Items());
  for (const auto& item : items) {
    ASSIGN_OR_RETURN(std::string raw, item.AsString());
    std::filesystem::path p(raw);
    if (!p.is_absolute()) return item.Error(absl::StrCat("path '", raw, "' must be absolute"));
    for (const auto& part : p) {
      if (part == "..") return item.Error(absl::StrCat("path '", raw, "' must not contain '..'"));
    }
    std::string norm = p.lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
    if (std::find(out.begin(), out.end(), norm) == out.end()) out.push_back(norm);
  }
  return out;
}

absl::StatusOr<FilesystemPolicy> ParseFilesystem(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"read_only", "read_write", "hidden"}));
  FilesystemPolicy fs;
  ASSIGN_OR_RETURN(fs.read_only, ParsePaths(node["read_only"]));
  ASSIGN_OR_RETURN(fs.read_write, ParsePaths(node["read_write"]));
  ASSIGN_OR_RETURN(fs.hidden, ParsePaths(node["hidden"]));
  for (const auto& h : fs.hidden) {
    if (h == "/") return node["hidden"].Error("'/' cannot be hidden");
  }
  return fs;
}

absl::StatusOr<std::vector<PortRange>> ParsePorts(const ConfigNode& node) {
  std::vector<PortRange> out;
  if (!node.present()) {
    out.push_back(PortRange{});
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<ConfigNode> items, node.Items());
  if (items.empty()) return node.Error("empty port list (leave 'ports' out for every port)");
  for (const auto& item : items) {
    ASSIGN_OR_RETURN(std::string text, item.AsString());
    auto r = ParsePortRange(text);
    if (!r.ok()) return item.Error(std::string(r.status().message()));
    out.push_back(*r);
  }
  return out;
}

absl::StatusOr<std::vector<Cidr>> NamedList(const ConfigNode& node, const PolicyLoadOptions& options,
                                            NetworkPolicy* net) {
  ASSIGN_OR_RETURN(std::string name, node.AsString());
  size_t before = net->unresolved_hosts.size();
  auto list = ResolveNamedList(name, options, &net->unresolved_hosts);
  for (size_t i = before; i < net->unresolved_hosts.size(); ++i) {
    FLOG(warn, "policy: host in a named address list does not resolve; skipped",
         {{"field", node.path()}, {"list", name}, {"host", net->unresolved_hosts[i]}});
  }
  if (!list.ok()) {
    absl::Status err = node.Error(std::string(list.status().message()));
    // An unknown list name is bad input; a failed name lookup keeps its own code.
    if (list.status().code() == absl::StatusCode::kNotFound) return err;
    return absl::Status(list.status().code(), err.message());
  }
  return list;
}

absl::StatusOr<NetworkPolicy> ParseNetwork(const ConfigNode& node, const PolicyLoadOptions& options) {
  RETURN_IF_ERROR(node.CheckKeys({"allow", "deny_lists"}));
  NetworkPolicy net;
  ASSIGN_OR_RETURN(std::vector<ConfigNode> rules, node["allow"].Items());
  for (const auto& rule : rules) {
    if (!rule.is_map()) return rule.Error("expected a map with 'cidr' or 'list', and 'ports'");
    RETURN_IF_ERROR(rule.CheckKeys({"cidr", "list", "ports"}));
    ASSIGN_OR_RETURN(std::vector<PortRange> ports, ParsePorts(rule["ports"]));
    if (rule["cidr"].present() == rule["list"].present()) {
      return rule.Error("give exactly one of 'cidr' and 'list'");
    }
    std::vector<Cidr> cidrs;
    if (rule["cidr"].present()) {
      ASSIGN_OR_RETURN(std::string text, rule["cidr"].AsString());
      auto c = Cidr::Parse(text);
      if (!c.ok()) return rule["cidr"].Error(std::string(c.status().message()));
      cidrs.push_back(*c);
    } else {
      ASSIGN_OR_RETURN(cidrs, NamedList(rule["list"], options, &net));
    }
    for (const auto& c : cidrs) net.allow.push_back(NetworkRule{c, ports});
  }
  ASSIGN_OR_RETURN(std::vector<ConfigNode> lists, node["deny_lists"].Items());
  net.deny_pending = options.defer_moot_deny_lists && !lists.empty() && OnlyLoopbackAllowed(net);
  for (const auto& item : lists) {
    ASSIGN_OR_RETURN(std::string name, item.AsString());
    if (net.deny_pending) {
      // Checked now, resolved later: an unknown name is still an error of this document.
      if (name != "package_mirrors" && name != "loopback") {
        return item.Error("unknown address list '" + name + "' (known: package_mirrors, loopback)");
      }
      net.deny_lists.push_back(name);
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<Cidr> cidrs, NamedList(item, options, &net));
    net.deny_lists.push_back(name);
    for (const auto& c : cidrs) {
      if (std::find(net.deny.begin(), net.deny.end(), c) == net.deny.end()) net.deny.push_back(c);
    }
  }
  return net;
}

absl::Status CheckSyscallName(const ConfigNode& item, const std::string& name) {
  if (seccomp_syscall_resolve_name(name.c_str()) == __NR_SCMP_ERROR) {
    return item.Error(absl::StrCat("unknown syscall '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SyscallPolicy> ParseSyscalls(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"base", "deny", "allow"}));
  SyscallPolicy sc;
  ASSIGN_OR_RETURN(std::string base, node["base"].AsString("docker_default"));
  if (base == "docker_default") {
    sc.deny = DockerDefaultDenyList();
  } else if (base == "none") {
    sc.deny_namespace_flags = sc.deny_personality = sc.deny_tiocsti = false;
  } else {
    return node["base"].Error(absl::StrCat("unknown base '", base, "' (expected docker_default or none)"));
  }
  ASSIGN_OR_RETURN(std::vector<ConfigNode> deny, node["deny"].Items());
  for (const auto& item : deny) {
    ASSIGN_OR_RETURN(std::string name, item.AsString());
    if (name == "namespaces") { sc.deny_namespace_flags = true; continue; }
    if (name == "personality") { sc.deny_personality = true; continue; }
    if (name == "tiocsti") { sc.deny_tiocsti = true; continue; }
    RETURN_IF_ERROR(CheckSyscallName(item, name));
    if (std::find(sc.deny.begin(), sc.deny.end(), name) == sc.deny.end()) sc.deny.push_back(name);
  }
  ASSIGN_OR_RETURN(std::vector<ConfigNode> allow, node["allow"].Items());
  for (const auto& item : allow) {
    ASSIGN_OR_RETURN(std::string name, item.AsString());
    if (name == "namespaces") { sc.deny_namespace_flags = false; continue; }
    if (name == "personality") { sc.deny_personality = false; continue; }
    if (name == "tiocsti") { sc.deny_tiocsti = false; continue; }
    RETURN_IF_ERROR(CheckSyscallName(item, name));
    sc.deny.erase(std::remove(sc.deny.begin(), sc.deny.end(), name), sc.deny.end());
  }
  return sc;
}

absl::StatusOr<ResourcePolicy> ParseResources(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"memory", "pids", "cpu_weight", "cpu_quota", "disk",
                                  "exec_timeout", "sandbox_timeout", "output_limit"}));
  ResourcePolicy r;
  ASSIGN_OR_RETURN(r.memory_bytes, node["memory"].AsBytes(0));
  ASSIGN_OR_RETURN(r.pids, node["pids"].AsInt(0));
  if (r.pids < 0 || r.pids > kMaxPids) return node["pids"].Error(absl::StrCat("must be in 0..", kMaxPids));
  ASSIGN_OR_RETURN(r.cpu_weight, node["cpu_weight"].AsInt(100));
  if (r.cpu_weight < 1 || r.cpu_weight > 10000) return node["cpu_weight"].Error("must be in 1..10000");
  ASSIGN_OR_RETURN(r.cpu_quota, node["cpu_quota"].AsDouble(0));
  if (r.cpu_quota < 0 || r.cpu_quota > kMaxCpuQuota) {
    return node["cpu_quota"].Error(absl::StrCat("must be in 0..", kMaxCpuQuota, " (CPUs)"));
  }
  ASSIGN_OR_RETURN(r.disk_bytes, node["disk"].AsBytes(0));
  ASSIGN_OR_RETURN(r.exec_timeout_ms, node["exec_timeout"].AsDurationMs(0));
  ASSIGN_OR_RETURN(r.sandbox_timeout_ms, node["sandbox_timeout"].AsDurationMs(0));
  for (const auto& [key, ms] : {std::pair<const char*, int64_t>{"exec_timeout", r.exec_timeout_ms},
                                {"sandbox_timeout", r.sandbox_timeout_ms}}) {
    if (ms > kMaxTimeoutMs) return node[key].Error("must be at most 1176h (49 days)");
  }
  ASSIGN_OR_RETURN(r.output_limit_bytes, node["output_limit"].AsBytes(0));
  return r;
}

}  // namespace

std::string_view ExecutionClassName(ExecutionClass c) {
  return c == ExecutionClass::kLatencySensitive ? "latency_sensitive" : "best_effort";
}

absl::StatusOr<Policy> ParsePolicy(const ConfigNode& root, const PolicyLoadOptions& options) {
  if (root.present() && !root.is_map()) {
    // An empty document parses as null: the empty policy.
    auto scalar = root.AsString("");
    if (root.is_sequence() || !scalar.ok() || !scalar->empty()) return root.Error("a policy must be a map");
  }
  RETURN_IF_ERROR(root.CheckKeys({"name", "execution_class", "filesystem", "network", "syscalls",
                                  "resources"}));
  Policy p;
  p.source = root.file();
  std::string stem = std::filesystem::path(root.file()).stem().string();
  ASSIGN_OR_RETURN(p.name, root["name"].AsString(stem));
  ASSIGN_OR_RETURN(std::string cls, root["execution_class"].AsString("best_effort"));
  if (cls == "latency_sensitive") {
    p.execution_class = ExecutionClass::kLatencySensitive;
  } else if (cls == "best_effort") {
    p.execution_class = ExecutionClass::kBestEffort;
  } else {
    return root["execution_class"].Error(
        absl::StrCat("unknown class '", cls, "' (expected latency_sensitive or best_effort)"));
  }
  ASSIGN_OR_RETURN(p.filesystem, ParseFilesystem(root["filesystem"]));
  ASSIGN_OR_RETURN(p.network, ParseNetwork(root["network"], options));
  ASSIGN_OR_RETURN(p.syscalls, ParseSyscalls(root["syscalls"]));
  ASSIGN_OR_RETURN(p.resources, ParseResources(root["resources"]));
  return p;
}

absl::StatusOr<Policy> ParsePolicyText(std::string_view yaml, std::string_view file,
                                       const PolicyLoadOptions& options) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseConfig(yaml, file));
  return ParsePolicy(root, options);
}

absl::StatusOr<Policy> LoadPolicyFile(const std::string& path, const PolicyLoadOptions& options) {
  ASSIGN_OR_RETURN(ConfigNode root, LoadConfigFile(path));
  return ParsePolicy(root, options);
}

absl::StatusOr<Policy> LoadPolicy(std::string_view name_or_path, const PolicyLoadOptions& options) {
  if (name_or_path.find('/') != std::string_view::npos || absl::EndsWith(std::string(name_or_path), ".yaml")) {
    return LoadPolicyFile(std::string(name_or_path), options);
  }
  const char* text = BuiltinPolicyText(name_or_path);
  if (text == nullptr) {
    std::string known;
    for (const auto& n : BuiltinPolicyNames()) absl::StrAppend(&known, known.empty() ? "" : ", ", n);
    return absl::NotFoundError(absl::StrCat("no policy named '", std::string(name_or_path),
                                            "' (shipped: ", known, "; or give a .yaml file)"));
  }
  ASSIGN_OR_RETURN(Policy p, ParsePolicyText(text, absl::StrCat(std::string(name_or_path), ".yaml"), options));
  p.source = absl::StrCat("builtin:", std::string(name_or_path), ".yaml");
  return p;
}

bool OnlyLoopbackAllowed(const NetworkPolicy& net) {
  static const Cidr v4 = *Cidr::Parse("127.0.0.0/8");
  static const Cidr v6 = *Cidr::Parse("::1/128");
  return std::all_of(net.allow.begin(), net.allow.end(),
                     [](const NetworkRule& r) { return v4.Contains(r.cidr) || v6.Contains(r.cidr); });
}

absl::Status ResolvePendingDenyLists(NetworkPolicy* net, const PolicyLoadOptions& options) {
  if (!net->deny_pending) return absl::OkStatus();
  for (const std::string& name : net->deny_lists) {
    auto cidrs = ResolveNamedList(name, options, &net->unresolved_hosts);
    if (!cidrs.ok()) return Annotate(cidrs.status(), "network.deny_lists: " + name);
    for (const auto& c : *cidrs) {
      if (std::find(net->deny.begin(), net->deny.end(), c) == net->deny.end()) net->deny.push_back(c);
    }
  }
  net->deny_pending = false;
  return absl::OkStatus();
}

}  // namespace flotilla::policies
