#include "trainer_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::cli {

std::string FlotillaSourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s != nullptr ? s : FLOTILLA_BUILD_SOURCE_DIR;
}

std::string FlotillaBinaryDir() {
  const char* s = std::getenv("FLOTILLA_BINARY_DIR");
  return s != nullptr ? s : FLOTILLA_BUILD_BINARY_DIR;
}

absl::StatusOr<TrainerProcess> TrainerProcess::Spawn(const std::vector<std::string>& argv,
                                                     const std::map<std::string, std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("trainer.command: empty");
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!env.contains(key)) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork for the trainer");
  if (pid == 0) {
    // Its own process group: a terminal's Ctrl-C reaches only `flotilla run`, which then stops
    // the trainer in order.
    setpgid(0, 0);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  return TrainerProcess(pid);
}

std::optional<int> TrainerProcess::Poll() {
  if (exit_ || pid_ < 0) return exit_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_;
}

int TrainerProcess::Terminate(int grace_ms) {
  if (pid_ < 0) return -1;
  if (Poll()) return *exit_;
  kill(pid_, SIGTERM);
  for (int waited = 0; waited < grace_ms; waited += 20) {
    if (Poll()) return *exit_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return *exit_;
}

TrainerProcess::~TrainerProcess() {
  if (pid_ >= 0 && !exit_) Terminate(2000);
}

}  // namespace flotilla::cli
