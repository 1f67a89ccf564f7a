// The engine interrupts a sequence (a checkpoint switch, an operator's Interrupt) while a client
// streams its chat completion over HTTP: the client gets the API's error event naming the
// interruption and a well-formed end of stream instead of a cut-off turn passed off as finished;
// once the session closes the engine holds no sequence and no KV page; the server keeps serving.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine_harness.h"
#include "flotilla/common/unique_fd.h"
#include "gtest/gtest.h"
#include "testing/http_client.h"
#include "testing/temp_dir.h"

namespace flotilla::worker {
namespace {

// POSTs `body` to /v1/chat/completions and reads the answer until the server closes.
std::string PostAndReadAll(int port, const std::string& session, const std::string& body) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return "connect failed";
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                              "Connection: close\r\nX-Flotilla-Session: " + session + "\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return "send failed";
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(StreamInterruptTest, InterruptedStreamEndsWithAnErrorEventAndFreesTheSequence) {
  flotilla::testing::TempDir dir;
  testing::EngineHarness h;
  h.Start(dir);
  if (::testing::Test::HasFatalFailure()) return;
  const int port = std::stoi(h.base_url().substr(h.base_url().rfind(':') + 1));
  const std::string body =
      R"({"model":"default","stream":true,"max_tokens":4000,"ignore_eos":true,"messages":[{"role":"user","content":"count"}]})";
  // ignore_eos keeps the random model from ending its turn on its own; 4,000 tokens still end
  // on a fast host, so a few sessions are tried until one is interrupted mid-generation.
  bool interrupted = false;
  for (int attempt = 0; attempt < 5 && !interrupted; ++attempt) {
    const std::string session = "interrupt-" + std::to_string(attempt);
    std::string answer;
    std::atomic<bool> answered{false};
    std::thread client([&] {
      answer = PostAndReadAll(port, session, body);
      answered = true;
    });
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (h.engine().Stats().active_sequences == 0 && !answered && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // some tokens stream first
    interrupted = !h.engine().InterruptAll().empty();
    client.join();
    ASSERT_EQ(answer.substr(0, answer.find("\r\n")), "HTTP/1.1 200 OK");
    if (interrupted) {
      EXPECT_NE(answer.find(R"("error":{"message":"generation was interrupted by the engine after )"),
                std::string::npos)
          << answer.substr(answer.size() > 600 ? answer.size() - 600 : 0);
      EXPECT_NE(answer.find(R"(tokens; the turn is incomplete, retry it","type":"server_error"})"),
                std::string::npos);
      // Chunked transfer's last chunk follows the final SSE line.
      EXPECT_NE(answer.find("data: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos);
      EXPECT_EQ(answer.find(R"("finish_reason":"stop")"), std::string::npos);
    } else {
      // With ignore_eos a turn that was not interrupted runs to max_tokens.
      EXPECT_NE(answer.find(R"("finish_reason":"length")"), std::string::npos)
          << answer.substr(answer.size() > 600 ? answer.size() - 600 : 0);
    }
    auto closed = h.service().CloseSession(session, v1::INTERRUPTED, 0.0, "chaos");
    ASSERT_TRUE(closed.ok()) << closed.status();
  }
  ASSERT_TRUE(interrupted) << "no generation was still running when interrupted in 5 attempts";
  const inference::EngineStats stats = h.engine().Stats();
  EXPECT_EQ(stats.active_sequences, 0u);
  EXPECT_EQ(stats.kv_pages_used, 0u);
  EXPECT_GE(stats.interrupts, 1u);
  // The worker still answers.
  auto next = flotilla::testing::HttpCall(
      port, "POST", "/v1/chat/completions",
      R"({"model":"default","max_tokens":4,"messages":[{"role":"user","content":"again"}]})");
  EXPECT_EQ(next.status, 200) << next.body;
}

}  // namespace
}  // namespace flotilla::worker
