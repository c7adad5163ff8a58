// MetricsServer: Boost.Beast HTTP/1.1 on one io_context thread of its own. Every connection is
// a Session that reads one request (bounded by io_timeout and Beast's header limit), answers it
// and closes; the scrape itself is `render()`, called on this thread.
#include "gpubatch/metrics_server.hpp"

#include "log.hpp"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Shared {
  std::function<std::string()> render;
  MetricsServerOptions options;
  std::atomic<std::uint64_t> scrapes{0};
};

http::response<http::string_body> answer(Shared& shared, const http::request<http::string_body>& req) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(false);
  res.set(http::field::server, "gpubatch");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != shared.options.path) {
    res.result(http::status::not_found);
    res.body() = "not found; metrics are at " + shared.options.path + "\n";
  } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, "GET, HEAD");
    res.body() = "use GET\n";
  } else {
    try {
      res.body() = shared.render();
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      shared.scrapes.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      res.result(http::status::internal_server_error);
      res.body() = std::string("rendering the metrics failed: ") + e.what() + "\n";
    } catch (...) {
      res.result(http::status::internal_server_error);
      res.body() = "rendering the metrics failed\n";
    }
  }
  res.prepare_payload();
  if (req.method() == http::verb::head) res.body().clear();  // Content-Length stays the GET's
  return res;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {}

  void start() {
    stream_.expires_after(shared_->options.io_timeout);
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec) return;  // timed out, closed, or not HTTP: drop the connection
    response_ = answer(*shared_, request_);
    stream_.expires_after(shared_->options.io_timeout);
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, std::size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace

struct MetricsServer::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::uint16_t port = 0;
  std::thread thread;
  std::mutex stop_mutex;

  void listen() {
    const auto& o = shared->options;
    beast::error_code ec;
    const auto address = asio::ip::make_address(o.address, ec);
    if (ec) throw Error(ErrorCode::invalid_config, "metrics server: '" + o.address + "' is not an IP address");
    const tcp::endpoint endpoint(address, o.port);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw Error(ErrorCode::invalid_config, "metrics server: cannot listen on " + o.address + ":" +
                                                 std::to_string(o.port) + ": " + ec.message());
    port = acceptor.local_endpoint().port();
  }

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), shared)->start();
      accept();
    });
  }
};

MetricsServer::MetricsServer(std::function<std::string()> render, MetricsServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!render) throw Error(ErrorCode::invalid_config, "metrics server: no render function");
  if (options.path.empty() || options.path.front() != '/')
    throw Error(ErrorCode::invalid_config, "metrics server: path '" + options.path + "' must start with '/'");
  impl_->shared->render = std::move(render);
  impl_->shared->options = std::move(options);
  impl_->listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->io.run();
    } catch (const std::exception& e) {
      log::error("gpubatch metrics server stopped: {}", e.what());
    }
  });
}

MetricsServer::MetricsServer(const BatchExecutor& executor, MetricsServerOptions options)
    : MetricsServer([&executor] { return to_prometheus(executor.stats()); }, std::move(options)) {}

MetricsServer::~MetricsServer() { stop(); }

std::uint16_t MetricsServer::port() const noexcept { return impl_->port; }

std::uint64_t MetricsServer::scrapes() const noexcept {
  return impl_->shared->scrapes.load(std::memory_order_relaxed);
}

void MetricsServer::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (!impl_->thread.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();  // sessions in progress are dropped with the io_context's handlers
  });
  impl_->thread.join();
}

}  // namespace gpubatch
