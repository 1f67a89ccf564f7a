// The HTTP/1.1 side of HttpServer (common/src/http_connection.h): any bytes a client sends on a
// connection are served request by request, or refused with a 4xx, and the connection ends
// cleanly when the bytes do. The bytes go in over a real socket pair; a second thread writes
// them and drains the answers so neither side can block on a full socket buffer.
#include <sys/socket.h>

#include <string>
#include <thread>
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>

#include "fuzz_check.h"
#include "fuzz_target.h"
#include "http_connection.h"

namespace {

namespace asio = boost::asio;
using Socket = asio::local::stream_protocol::socket;

void Handle(const flotilla::HttpRequest& req, flotilla::HttpResponder& out) {
  FUZZ_CHECK(!req.method.empty());
  FUZZ_CHECK(req.path.find('?') == std::string::npos);
  // A path starting /stream answers as server-sent events do; anything else in one piece.
  if (req.path.rfind("/stream", 0) == 0) {
    out.StartStream(200, "text/event-stream");
    out.Write("data: 1\n\n");
    out.Write(req.body.substr(0, 64));
    out.EndStream();
    return;
  }
  out.Send(200, "text/plain", std::to_string(req.body.size()));
}

}  // namespace

FLOTILLA_FUZZ_TARGET(http_request) {
  asio::io_context io;
  Socket server(io), client(io);
  asio::local::connect_pair(server, client);
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string answers;
  std::thread peer([&] {
    boost::system::error_code ec;
    asio::write(client, asio::buffer(input), ec);
    client.shutdown(Socket::shutdown_send, ec);
    char buf[4096];
    while (true) {
      size_t n = client.read_some(asio::buffer(buf), ec);
      if (ec) break;
      answers.append(buf, n);
    }
  });
  flotilla::HttpServerOptions options;
  options.max_body_bytes = 4096;     // small limits, so the fuzzer reaches them
  options.max_header_bytes = 2048;
  flotilla::http_internal::ServeConnection(server, Handle, options, nullptr);
  peer.join();
  // Every answer is an HTTP/1.x status line.
  FUZZ_CHECK(answers.empty() || answers.rfind("HTTP/1.", 0) == 0);
}
