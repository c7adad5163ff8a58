#pragma once
// A small HTTP endpoint that serves Prometheus text for scrapers: GET /metrics answers with
// whatever `render` returns (to_prometheus(executor.stats()) for an executor). One thread of its
// own, one connection at a time served to the end (a scrape is a few KiB every few seconds), each
// connection closed after its answer and given at most `io_timeout` to send its request.
//
//   gpubatch::MetricsServer metrics(executor, {.port = 9464});
//   // or, for several executors or a prefix of your own:
//   gpubatch::MetricsServer metrics([&] { return gpubatch::to_prometheus(a.stats(), "a") +
//                                                gpubatch::to_prometheus(b.stats(), "b"); });
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gpubatch {

class BatchExecutor;

struct MetricsServerOptions {
  // Where to listen. The default serves this host only; "0.0.0.0" (or "::") serves every
  // interface. Port 0 takes any free port (port() says which).
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;
  std::string path = "/metrics";
  std::chrono::milliseconds io_timeout{5000};
};

class MetricsServer {
 public:
  // Listens at once; throws Error(invalid_config) when the address is not an IP address or the
  // port cannot be bound. `render` runs on the server's thread, once per scrape; an exception
  // from it answers 500 and is not propagated.
  explicit MetricsServer(std::function<std::string()> render, MetricsServerOptions options = {});
  // Serves to_prometheus(executor.stats()). The executor must outlive the server.
  explicit MetricsServer(const BatchExecutor& executor, MetricsServerOptions options = {});
  ~MetricsServer();  // stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const noexcept;
  // Scrapes answered with 200 so far.
  std::uint64_t scrapes() const noexcept;
  // Closes the listener and the connection being served, and joins the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpubatch
