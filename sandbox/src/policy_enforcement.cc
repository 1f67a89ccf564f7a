// PolicyEnforcement over policies/: a sandbox's policy resolved once per name, compiled once
// per policy (seccomp BPF, Landlock plan, AppArmor profile where the kernel has AppArmor),
// applied by init on itself (the AppArmor profile after pivot_root; Landlock, then seccomp as
// its last set-up step) and attached from outside (eBPF network programs on the sandbox's v2
// cgroup, the seccomp listener to the supervisor that answers and counts denied calls).
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "enforcement.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/apparmor.h"
#include "flotilla/policies/landlock.h"
#include "flotilla/policies/network.h"
#include "flotilla/policies/policy.h"
#include "flotilla/policies/seccomp.h"
#include "init_plan.h"
#include "flotilla/common/unique_fd.h"

namespace flotilla::sandbox {
namespace {

namespace pol = flotilla::policies;

// The host's enforcers. Immutable after PoliciesEnforcement::Init, except the network
// enforcer: its BPF programs load on a thread of their own (the kernel verifies them) while
// the runtime opens and the first sandbox is created; Network() waits for that load.
struct HostEnforcers {
  bool seccomp = false;
  bool landlock = false;
  bool apparmor = false;
  std::unique_ptr<pol::SeccompSupervisor> supervisor;  // null: violations not counted
  std::vector<std::string> inactive;                   // "name: why"

  // The eBPF network enforcer, null when there is none here (*why_not says why). Thread-safe.
  pol::NetworkEnforcer* Network(std::string* why_not) {
    std::unique_lock<std::mutex> lock(network_mu);
    network_cv.wait(lock, [&] { return network_ready; });
    *why_not = network_error;
    return network.get();
  }
  void StartNetworkLoad(std::string pin_dir) {
    network_loading = std::thread([this, pin_dir = std::move(pin_dir)] {
      auto net = pol::NetworkEnforcer::Create(
          pol::NetworkEnforcer::Options{.max_rules = 65536, .keep_hooks_warm = true, .pin_dir = pin_dir});
      pol::NetworkEnforcer* ready = nullptr;
      {
        std::lock_guard<std::mutex> lock(network_mu);
        if (net.ok()) {
          network = std::move(*net);
          ready = network.get();
        } else {
          network_error = absl::StrCat("ebpf-net: ", net.status().message());
        }
        network_ready = true;
      }
      network_cv.notify_all();
      // The shared maps may hold entries of a process that died attached: cleared here, after
      // the Creates waiting for the programs have them.
      if (ready != nullptr && !pin_dir.empty()) ready->PurgeDeadCgroups(&network_closing);
    });
  }
  ~HostEnforcers() {
    network_closing = true;  // a purge still running stops; the next runtime's finishes it
    if (network_loading.joinable()) network_loading.join();
  }

  // The AppArmor profile of `policy`, loaded once per distinct policy and shared by every
  // sandbox under it (loading runs apparmor_parser); unloaded when the last one goes.
  absl::StatusOr<std::shared_ptr<pol::LoadedAppArmorProfile>> AppArmorProfile(const pol::Policy& policy) {
    const std::string name = "flotilla-" + policy.Fingerprint().substr(0, 16);
    std::lock_guard<std::mutex> lock(apparmor_mu);
    if (auto live = apparmor_profiles[name].lock()) return live;
    ASSIGN_OR_RETURN(std::string text, pol::RenderAppArmorProfile(policy, name));
    ASSIGN_OR_RETURN(std::unique_ptr<pol::LoadedAppArmorProfile> loaded,
                     pol::LoadedAppArmorProfile::Load(name, std::move(text)));
    std::shared_ptr<pol::LoadedAppArmorProfile> shared = std::move(loaded);
    apparmor_profiles[name] = shared;
    return shared;
  }

 private:
  std::mutex apparmor_mu;
  std::map<std::string, std::weak_ptr<pol::LoadedAppArmorProfile>> apparmor_profiles;  // by name
  std::mutex network_mu;
  std::condition_variable network_cv;
  bool network_ready = false;                     // guarded by network_mu
  std::atomic<bool> network_closing{false};
  std::thread network_loading;
  std::unique_ptr<pol::NetworkEnforcer> network;  // written by network_loading, then read-only
  std::string network_error;
};

class PoliciesSandboxEnforcement final : public SandboxEnforcement {
 public:
  PoliciesSandboxEnforcement(HostEnforcers* host, pol::Policy policy, std::string id)
      : host_(host), policy_(std::move(policy)), id_(std::move(id)) {}

  absl::Status Compile() {
    if (host_->seccomp) {
      pol::SeccompOptions so;
      so.count_violations = host_->supervisor != nullptr;
      ASSIGN_OR_RETURN(program_, pol::SeccompCompiler::Get(policy_, so));
      if (program_->uses_notify()) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair");
        listener_parent_.Reset(sv[0]);
        listener_child_.Reset(sv[1]);
      }
      seccomp_data_ = EncodeSeccompHook(program_->instructions().data(), program_->instructions().size(),
                                        program_->uses_notify());
      active_.push_back("seccomp");
    }
    if (host_->landlock) {
      auto plan = pol::LandlockPlan::Create(policy_.filesystem);
      if (plan.ok()) {
        landlock_ = std::make_unique<pol::LandlockPlan>(std::move(*plan));
        active_.push_back("landlock");
      } else {
        inactive_.push_back(absl::StrCat("landlock: ", plan.status().message()));
      }
    }
    if (host_->apparmor) {
      auto profile = host_->AppArmorProfile(policy_);
      if (profile.ok()) {
        apparmor_ = std::move(*profile);
        active_.push_back("apparmor");
      } else {
        inactive_.push_back(absl::StrCat("apparmor: ", profile.status().message()));
      }
    }
    inactive_.insert(inactive_.end(), host_->inactive.begin(), host_->inactive.end());
    return absl::OkStatus();
  }

  void AddChildHooks(InitPlan* plan) override {
    // After pivot_root (the profile's paths are the sandbox's) and before no_new_privs.
    if (apparmor_) plan->before_userns.push_back(ChildHook{ChildHookKind::kAppArmor, apparmor_->name(), -1});
    if (landlock_) plan->last.push_back(ChildHook{ChildHookKind::kLandlock, landlock_->encoded(), -1});
    if (program_) plan->last.push_back(ChildHook{ChildHookKind::kSeccomp, seccomp_data_, listener_child_.get()});
  }

  absl::Status AfterStart() override {
    listener_child_.Reset();
    if (listener_parent_.valid() && host_->supervisor) {
      ASSIGN_OR_RETURN(UniqueFd fd, pol::ReceiveListenerFd(listener_parent_.get()));
      ASSIGN_OR_RETURN(seccomp_watch_, host_->supervisor->Watch(id_, std::move(fd)));
      listener_parent_.Reset();
    }
    return absl::OkStatus();
  }

  absl::Status Rearm(const std::string& sandbox_id) override {
    id_ = sandbox_id;
    seccomp_watch_.reset();
    listener_parent_.Reset();
    listener_child_.Reset();
    if (program_ && program_->uses_notify()) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair");
      listener_parent_.Reset(sv[0]);
      listener_child_.Reset(sv[1]);
    }
    return absl::OkStatus();
  }

  absl::Status AttachToCgroup(const std::string& cgroup_v2_dir) override {
    std::string why_not;
    pol::NetworkEnforcer* network = host_->Network(&why_not);
    if (network == nullptr) inactive_.push_back(why_not);
    if (network && !cgroup_v2_dir.empty()) {
      int fd = ::open(cgroup_v2_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus("open " + cgroup_v2_dir);
      auto att = network->Attach(policy_.network, fd);
      ::close(fd);
      if (!att.ok()) return Annotate(att.status(), "attaching the network policy");
      network_ = std::move(*att);
      active_.push_back("ebpf-net");
    }
    return absl::OkStatus();
  }

  uint64_t Violations() const override {
    return (seccomp_watch_ ? seccomp_watch_->violations() : 0) + (network_ ? network_->denials() : 0);
  }
  const std::vector<std::string>& active() const override { return active_; }
  const std::vector<std::string>& inactive() const override { return inactive_; }

 private:
  HostEnforcers* host_;
  pol::Policy policy_;
  std::string id_;
  std::shared_ptr<const pol::SeccompProgram> program_;
  UniqueFd listener_parent_, listener_child_;
  std::string seccomp_data_;
  std::unique_ptr<pol::LandlockPlan> landlock_;
  std::shared_ptr<pol::LoadedAppArmorProfile> apparmor_;
  std::unique_ptr<pol::SeccompWatch> seccomp_watch_;
  std::unique_ptr<pol::NetworkAttachment> network_;
  std::vector<std::string> active_, inactive_;
};

class PoliciesEnforcement final : public PolicyEnforcement {
 public:
  PoliciesEnforcement(std::string policies_dir, std::string bpf_pin_dir)
      : policies_dir_(std::move(policies_dir)), bpf_pin_dir_(std::move(bpf_pin_dir)) {}
  ~PoliciesEnforcement() override {
    if (prefetch_.joinable()) prefetch_.join();
  }

  absl::Status Init() {
    // The probes of ProbeEnforcers() without its trial load of the BPF programs: the
    // enforcer below loads them once for real.
    host_.seccomp = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
    if (!host_.seccomp) host_.inactive.push_back("seccomp: not available in this kernel");
    host_.landlock = pol::LandlockAbiVersion() > 0;
    if (!host_.landlock) host_.inactive.push_back("landlock: not available in this kernel");
    host_.apparmor = pol::AppArmorEnabled();
    if (!host_.apparmor) host_.inactive.push_back("apparmor: not enabled in this kernel");
    if (host_.seccomp) {
      auto sup = pol::SeccompSupervisor::Start();
      if (sup.ok()) host_.supervisor = std::move(*sup);
    }
    host_.StartNetworkLoad(bpf_pin_dir_);
    // The default policy's named address lists need name lookups: start them now, so that
    // the first Create (often the only one, in `flotilla sandbox run`) finds them done. A
    // Create that asks meanwhile waits on mu_; a failure here is retried (and reported) there.
    prefetch_ = std::thread([this] { (void)Named("default"); });
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<SandboxEnforcement>> Prepare(const SandboxOptions& options,
                                                              PolicyLimits* limits) override {
    pol::Policy policy;
    if (!options.policy_yaml.empty()) {
      ASSIGN_OR_RETURN(policy, pol::ParsePolicyText(options.policy_yaml, "policy_yaml"));
    } else {
      ASSIGN_OR_RETURN(policy, Named(options.policy_name.empty() ? "default" : options.policy_name));
    }
    for (size_t i = 0; i < options.extra_allow.size(); ++i) {
      const NetworkAllow& a = options.extra_allow[i];
      auto cidr = pol::Cidr::Parse(a.cidr);
      if (!cidr.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("extra_allow[", i, "].cidr: ", cidr.status().message()));
      }
      pol::NetworkRule rule;
      rule.cidr = *cidr;
      rule.ports = {a.port ? pol::PortRange{a.port, a.port} : pol::PortRange{0, 65535}};
      policy.network.allow.push_back(rule);
    }
    if (policy.network.deny_pending && !pol::OnlyLoopbackAllowed(policy.network)) {
      RETURN_IF_ERROR(pol::ResolvePendingDenyLists(&policy.network));
    }
    const pol::ResourcePolicy& r = policy.resources;
    limits->execution_class = policy.execution_class == pol::ExecutionClass::kLatencySensitive
                                  ? ExecutionClass::kLatencySensitive
                                  : ExecutionClass::kBestEffort;
    limits->execution_class_set = true;
    limits->memory_bytes = r.memory_bytes;
    limits->pids = static_cast<uint32_t>(r.pids);
    limits->cpu_weight = static_cast<uint32_t>(r.cpu_weight);
    static_assert(kMaxCpuQuotaMillicores == pol::kMaxCpuQuota * 1000, "the two bounds of a CPU quota agree");
    limits->cpu_quota_millicores = static_cast<uint32_t>(r.cpu_quota * 1000);
    limits->disk_bytes = r.disk_bytes;
    limits->exec_timeout_ms = static_cast<uint32_t>(r.exec_timeout_ms);
    limits->sandbox_timeout_ms = static_cast<uint32_t>(r.sandbox_timeout_ms);
    limits->output_limit_bytes = r.output_limit_bytes;
    auto e = std::make_unique<PoliciesSandboxEnforcement>(&host_, std::move(policy), options.id);
    RETURN_IF_ERROR(e->Compile());
    return e;
  }

 private:
  // Named policies are resolved once (their named address lists need name lookups).
  absl::StatusOr<pol::Policy> Named(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(name); it != cache_.end()) return it->second;
    std::string source = name;
    if (!policies_dir_.empty() && name.find('/') == std::string::npos && name.find(".yaml") == std::string::npos) {
      std::string file = policies_dir_ + "/" + name + ".yaml";
      if (::access(file.c_str(), R_OK) == 0) source = file;
    }
    // The default policy allows only loopback: its package-mirror deny list needs no name
    // lookups unless a caller widens the allow rules (Prepare resolves it then).
    auto p = pol::LoadPolicy(source, pol::PolicyLoadOptions{.apt_root = "/", .defer_moot_deny_lists = true});
    if (!p.ok()) return Annotate(p.status(), "policy_name");
    cache_[name] = *p;
    return *p;
  }

  std::string policies_dir_;
  std::string bpf_pin_dir_;
  HostEnforcers host_;
  std::mutex mu_;
  std::map<std::string, pol::Policy> cache_;
  std::thread prefetch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyEnforcement>> PolicyEnforcement::Create(const RuntimeOptions& options) {
  auto e = std::make_unique<PoliciesEnforcement>(options.policies_dir, options.bpf_pin_dir);
  RETURN_IF_ERROR(e->Init());
  return std::unique_ptr<PolicyEnforcement>(std::move(e));
}

}  // namespace flotilla::sandbox
