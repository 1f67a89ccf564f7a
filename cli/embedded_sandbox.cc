#include "embedded_sandbox.h"

#include "absl/strings/str_cat.h"

namespace flotilla::cli {
namespace {

class RemoteSandbox final : public EmbeddedSandbox {
 public:
  explicit RemoteSandbox(std::shared_ptr<grpc::Channel> ch) : stub_(v1::NodeAgent::NewStub(ch)) {}
  std::shared_ptr<v1::NodeAgent::StubInterface> stub() override { return stub_; }

 private:
  std::shared_ptr<v1::NodeAgent::StubInterface> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddedSandbox>> StartSandbox(const std::string& address, const std::string& state_dir) {
  if (!address.empty()) {
    auto ch = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return absl::UnavailableError(absl::StrCat("node agent at '", address, "' is not reachable"));
    }
    return std::unique_ptr<EmbeddedSandbox>(new RemoteSandbox(ch));
  }
  (void)state_dir;
  return absl::UnavailableError("this build has no in-process sandbox runtime; pass --node-agent ADDRESS");
}

}  // namespace flotilla::cli
