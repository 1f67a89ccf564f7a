// `flotilla policy`: inspect sandbox policies and the enforcers this host supports.
#include <iostream>

#include "commands.h"
#include "flotilla/policies/apparmor.h"
#include "flotilla/policies/enforcers.h"
#include "flotilla/policies/policy.h"
#include "policy_bench.h"

namespace flotilla::cli {
namespace {

void PrintPorts(const std::vector<policies::PortRange>& ports) {
  for (size_t i = 0; i < ports.size(); ++i) {
    std::cout << (i ? "," : "");
    if (ports[i].lo == 0 && ports[i].hi == 65535) std::cout << "all";
    else if (ports[i].lo == ports[i].hi) std::cout << ports[i].lo;
    else std::cout << ports[i].lo << "-" << ports[i].hi;
  }
}

void PrintPolicy(const policies::Policy& p) {
  std::cout << "name: " << p.name << "\nsource: " << p.source << "\nfingerprint: " << p.Fingerprint()
            << "\nexecution_class: " << policies::ExecutionClassName(p.execution_class) << "\n";
  auto list = [](const char* label, const std::vector<std::string>& v) {
    std::cout << label << ":";
    for (const auto& s : v) std::cout << " " << s;
    std::cout << "\n";
  };
  list("filesystem.read_only", p.filesystem.read_only);
  list("filesystem.read_write", p.filesystem.read_write);
  list("filesystem.hidden", p.filesystem.hidden);
  for (const auto& r : p.network.allow) {
    std::cout << "network.allow: " << r.cidr.ToString() << " ports ";
    PrintPorts(r.ports);
    std::cout << "\n";
  }
  for (const auto& d : p.network.deny) std::cout << "network.deny: " << d.ToString() << "\n";
  list("syscalls.deny", p.syscalls.deny);
  std::cout << "syscalls.namespace_flags: " << (p.syscalls.deny_namespace_flags ? "deny" : "allow")
            << "\nsyscalls.personality: " << (p.syscalls.deny_personality ? "deny" : "allow")
            << "\nsyscalls.tiocsti: " << (p.syscalls.deny_tiocsti ? "deny" : "allow") << "\n";
  const auto& r = p.resources;
  std::cout << "resources: memory=" << r.memory_bytes << " pids=" << r.pids << " cpu_weight=" << r.cpu_weight
            << " cpu_quota=" << r.cpu_quota << " disk=" << r.disk_bytes << " exec_timeout_ms=" << r.exec_timeout_ms
            << " sandbox_timeout_ms=" << r.sandbox_timeout_ms << " output_limit=" << r.output_limit_bytes << "\n";
}

}  // namespace

void AddPolicyCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("policy", "Inspect sandbox policies and this host's enforcers");
  cmd->require_subcommand(1);

  auto* show = cmd->add_subcommand("show", "Load a policy (name or .yaml file) and print it resolved");
  static std::string show_name;
  static std::string apt_root = "/";
  show->add_option("policy", show_name, "Shipped policy name or YAML file")->required();
  show->add_option("--apt-root", apt_root, "Root of the apt configuration for package_mirrors");
  show->callback([exit_code] {
    auto p = policies::LoadPolicy(show_name, policies::PolicyLoadOptions{.apt_root = apt_root});
    if (!p.ok()) {
      std::cerr << "flotilla policy show: " << p.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    PrintPolicy(*p);
  });

  auto* enforcers = cmd->add_subcommand("enforcers", "Which enforcers are active on this host, and why not");
  enforcers->callback([exit_code] {
    for (const auto& e : policies::ProbeEnforcers()) {
      std::cout << e.name << " " << (e.active ? "active" : "inactive") << " " << e.detail << "\n";
    }
    *exit_code = 0;
  });

  auto* apparmor = cmd->add_subcommand("apparmor", "Print the AppArmor profile generated from a policy");
  static std::string aa_policy;
  static std::string aa_name = "flotilla-sandbox";
  apparmor->add_option("policy", aa_policy, "Shipped policy name or YAML file")->required();
  apparmor->add_option("--profile-name", aa_name, "Profile name");
  apparmor->callback([exit_code] {
    auto p = policies::LoadPolicy(aa_policy);
    auto text = p.ok() ? policies::RenderAppArmorProfile(*p, aa_name) : p.status();
    if (!text.ok()) {
      std::cerr << "flotilla policy apparmor: " << text.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << *text;
  });

  auto* bench = cmd->add_subcommand("bench", "Per-sandbox cost of each enforcer (name=value lines)");
  static int n = 200;
  bench->add_option("--n", n, "Repetitions")->check(CLI::Range(1, 100000));
  bench->callback([exit_code] { *exit_code = bench::RunPolicyBench(n, std::cout); });
}

}  // namespace flotilla::cli
