// MetricsServer: real HTTP over loopback, answered by a Boost.Beast client.
#include "gpubatch/metrics_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>
#include <string>

#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"

namespace gpubatch::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

http::response<http::string_body> fetch(std::uint16_t port, http::verb verb, const std::string& target) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (verb == http::verb::head) {
    http::response_parser<http::string_body> parser;
    parser.skip(true);
    http::read(socket, buffer, parser);
    return parser.release();
  }
  http::read(socket, buffer, res);
  return res;
}

TEST(MetricsServer, ServesTheRenderedTextAtItsPath) {
  std::atomic<int> calls{0};
  MetricsServer server([&] { return "m_total " + std::to_string(++calls) + "\n"; });
  ASSERT_NE(server.port(), 0);
  auto res = fetch(server.port(), http::verb::get, "/metrics");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), "m_total 1\n");
  EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  res = fetch(server.port(), http::verb::get, "/metrics?x=1");  // a query string is ignored
  EXPECT_EQ(res.body(), "m_total 2\n");
  EXPECT_EQ(server.scrapes(), 2u);
}

TEST(MetricsServer, AnswersOtherPathsMethodsAndFailuresWithTheirStatus) {
  std::atomic<bool> fail{false};  // read on the server's thread
  MetricsServer server([&]() -> std::string {
    if (fail) throw std::runtime_error("stats unavailable");
    return "ok 1\n";
  });
  EXPECT_EQ(fetch(server.port(), http::verb::get, "/other").result(), http::status::not_found);
  EXPECT_EQ(fetch(server.port(), http::verb::post, "/metrics").result(), http::status::method_not_allowed);
  const auto head = fetch(server.port(), http::verb::head, "/metrics");
  EXPECT_EQ(head.result(), http::status::ok);
  EXPECT_EQ(head[http::field::content_length], "5");
  fail = true;
  const auto res = fetch(server.port(), http::verb::get, "/metrics");
  EXPECT_EQ(res.result(), http::status::internal_server_error);
  EXPECT_NE(res.body().find("stats unavailable"), std::string::npos);
  fail = false;
  EXPECT_EQ(fetch(server.port(), http::verb::get, "/metrics").result(), http::status::ok) << "it goes on serving";
}

TEST(MetricsServer, BadOptionsAreTypedErrors) {
  auto code_of = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  auto render = [] { return std::string(); };
  EXPECT_EQ(code_of([&] { MetricsServer s(render, {.address = "not-an-ip"}); }), ErrorCode::invalid_config);
  EXPECT_EQ(code_of([&] { MetricsServer s(render, {.path = "metrics"}); }), ErrorCode::invalid_config);
  EXPECT_EQ(code_of([&] { MetricsServer s(std::function<std::string()>{}); }), ErrorCode::invalid_config);
  MetricsServer first(render);
  EXPECT_EQ(code_of([&] { MetricsServer s(render, {.port = first.port()}); }), ErrorCode::invalid_config)
      << "the port is taken";
}

TEST(MetricsServer, StopClosesTheListenerAndIsIdempotent) {
  MetricsServer server([] { return std::string("x 1\n"); });
  const auto port = server.port();
  server.stop();
  server.stop();
  asio::io_context io;
  tcp::socket socket(io);
  beast::error_code ec;
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  EXPECT_TRUE(ec) << "nobody listens after stop()";
}

TEST(MetricsServer, ServesAnExecutorsStats) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::latency());
  MetricsServer server(executor);
  ASSERT_EQ(executor.handle().relu({1.0f, -1.0f}).get(), (std::vector<float>{1.0f, 0.0f}));
  const auto res = fetch(server.port(), http::verb::get, "/metrics");
  ASSERT_EQ(res.result(), http::status::ok);
  EXPECT_NE(res.body().find("gpubatch_requests_submitted_total 1\n"), std::string::npos) << res.body();
}

}  // namespace
}  // namespace gpubatch::testing
