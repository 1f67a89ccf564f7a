// The seccomp user-notification supervisor: answers denied syscalls with EPERM and counts them.
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "flotilla/common/logging.h"
#include "flotilla/common/status.h"
#include "flotilla/policies/seccomp.h"

namespace flotilla::policies {

// The epoll loop. Registered watches are in `watches_`; the loop touches a watch only while
// it is registered, and Unregister waits until the loop is no longer inside it.
class SeccompSupervisor::Loop {
 public:
  Loop(UniqueFd epoll, UniqueFd wake) : epoll_(std::move(epoll)), wake_(std::move(wake)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Loop() {
    stop_.store(true);
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
    thread_.join();
  }

  absl::Status Register(SeccompWatch* watch, int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = watch;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoStatus("epoll_ctl(ADD) seccomp listener");
    watches_.insert(watch);
    return absl::OkStatus();
  }

  void Unregister(SeccompWatch* watch, int fd) {
    std::unique_lock<std::mutex> lock(mu_);
    watches_.erase(watch);
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);  // ENOENT after a hang-up: fine
    idle_.wait(lock, [&] { return current_ != watch; });
  }

  uint64_t total() const { return total_.load(std::memory_order_relaxed); }

 private:
  void Run() {
    seccomp_notif_sizes sizes{};
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
      FLOG(error, "seccomp supervisor: SECCOMP_GET_NOTIF_SIZES failed; denied calls will see ENOSYS", {});
      return;
    }
    // The kernel's structs may be larger than this build's headers: size buffers by the kernel.
    std::vector<uint64_t> req_buf((std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)) + 7) / 8);
    std::vector<uint64_t> resp_buf((std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)) + 7) / 8);
    epoll_event wake_ev{};
    wake_ev.events = EPOLLIN;
    wake_ev.data.ptr = nullptr;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &wake_ev);
    epoll_event events[64];
    while (!stop_.load()) {
      int n = epoll_wait(epoll_.get(), events, 64, -1);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        auto* watch = static_cast<SeccompWatch*>(events[i].data.ptr);
        if (watch == nullptr) continue;  // the wake-up eventfd
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (watches_.count(watch) == 0) continue;
          current_ = watch;
        }
        Serve(watch, events[i].events, req_buf, resp_buf);
        {
          std::lock_guard<std::mutex> lock(mu_);
          current_ = nullptr;
        }
        idle_.notify_all();
      }
    }
  }

  void Serve(SeccompWatch* watch, uint32_t events, std::vector<uint64_t>& req_buf,
             std::vector<uint64_t>& resp_buf) {
    int fd = watch->listener_.get();
    if (events & EPOLLIN) {
      // The kernel refuses a receive buffer that is not zeroed.
      std::fill(req_buf.begin(), req_buf.end(), 0);
      auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
      if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
        // ENOENT: the caller was killed between the wake-up and now, nothing to answer.
        if (errno != ENOENT && errno != EINTR) {
          FLOG(error, "seccomp supervisor: receive failed; no longer answering this sandbox",
               {{"sandbox", watch->sandbox_id_}, {"errno", errno}});
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        }
        return;
      }
      std::fill(resp_buf.begin(), resp_buf.end(), 0);
      auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
      resp->id = req->id;
      resp->error = -EPERM;
      watch->last_syscall_.store(req->data.nr, std::memory_order_relaxed);
      watch->violations_.fetch_add(1, std::memory_order_relaxed);
      total_.fetch_add(1, std::memory_order_relaxed);
      ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp);  // ENOENT if the caller died meanwhile
    } else if (events & (EPOLLHUP | EPOLLERR)) {
      // Every task using the filter is gone: stop polling (the count stays readable).
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    }
  }

  UniqueFd epoll_;
  UniqueFd wake_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> total_{0};
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<SeccompWatch*> watches_;  // guarded by mu_
  SeccompWatch* current_ = nullptr;  // guarded by mu_
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<SeccompSupervisor>> SeccompSupervisor::Start() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return ErrnoStatus("epoll_create1");
  UniqueFd epoll(ep);
  int ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ev < 0) return ErrnoStatus("eventfd");
  auto loop = std::make_unique<Loop>(std::move(epoll), UniqueFd(ev));
  return std::unique_ptr<SeccompSupervisor>(new SeccompSupervisor(std::move(loop)));
}

SeccompSupervisor::SeccompSupervisor(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
SeccompSupervisor::~SeccompSupervisor() = default;

absl::StatusOr<std::unique_ptr<SeccompWatch>> SeccompSupervisor::Watch(std::string sandbox_id,
                                                                       UniqueFd listener) {
  if (!listener.valid()) return absl::InvalidArgumentError("seccomp listener fd is not valid");
  int fd = listener.get();
  std::unique_ptr<SeccompWatch> watch(new SeccompWatch(this, std::move(sandbox_id), std::move(listener)));
  RETURN_IF_ERROR(loop_->Register(watch.get(), fd));
  return watch;
}

uint64_t SeccompSupervisor::total_violations() const { return loop_->total(); }

void SeccompSupervisor::Unregister(SeccompWatch* watch) { loop_->Unregister(watch, watch->listener_.get()); }

SeccompWatch::SeccompWatch(SeccompSupervisor* owner, std::string sandbox_id, UniqueFd listener)
    : owner_(owner), sandbox_id_(std::move(sandbox_id)), listener_(std::move(listener)) {}

SeccompWatch::~SeccompWatch() { owner_->Unregister(this); }

}  // namespace flotilla::policies
