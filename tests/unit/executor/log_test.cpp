// The library's log (include/gpubatch/log.hpp): its own logger, never stdout; a program's handler
// gets the lines at or above the level, from any thread, and can be swapped while threads log.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/log.hpp"
#include "log.hpp"

namespace gpubatch::testing {
namespace {

struct Line {
  LogLevel level;
  std::string message;
};

// Collects what the library logs for one test, then puts stderr and the level back.
class CollectLog {
 public:
  explicit CollectLog(LogLevel level) : before_(log_level()) {
    set_log_level(level);
    set_log_handler([this](LogLevel l, std::string_view m) {
      std::lock_guard lock(mutex_);
      lines_.push_back({l, std::string(m)});
    });
  }
  ~CollectLog() {
    set_log_handler(nullptr);
    set_log_level(before_);
  }
  std::vector<Line> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  LogLevel before_;
  std::mutex mutex_;
  std::vector<Line> lines_;
};

TEST(Log, ParsesTheEnvironmentsWords) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::trace);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::debug);
  EXPECT_EQ(parse_log_level("info"), LogLevel::info);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::error);
  EXPECT_EQ(parse_log_level("critical"), LogLevel::critical);
  EXPECT_EQ(parse_log_level("off"), LogLevel::off);
  EXPECT_EQ(parse_log_level("WARN"), std::nullopt);
  EXPECT_EQ(parse_log_level(""), std::nullopt);
  EXPECT_EQ(parse_log_level("verbose"), std::nullopt);
}

TEST(Log, TheTestsLevelComesFromTheEnvironment) {
  // tests/CMakeLists.txt runs every test with GPUBATCH_LOG_LEVEL=warn.
  const char* env = std::getenv("GPUBATCH_LOG_LEVEL");
  if (!env || std::string(env) != "warn") GTEST_SKIP() << "run outside ctest";
  EXPECT_EQ(log_level(), LogLevel::warn);
}

TEST(Log, AHandlerGetsTheLinesAtOrAboveTheLevel) {
  CollectLog log(LogLevel::warn);
  log::info("dropped {}", 1);
  log::warn("kept {} of {}", 2, 3);
  log::error("and {}", "this");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, LogLevel::warn);
  EXPECT_EQ(lines[0].message, "kept 2 of 3");
  EXPECT_EQ(lines[1].level, LogLevel::error);
  EXPECT_EQ(lines[1].message, "and this");
}

TEST(Log, WithoutAHandlerLinesGoToStderrNeverStdout) {
  const LogLevel before = log_level();
  set_log_level(LogLevel::info);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  log::info("a line for stderr {}", 42);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_level(before);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("[info] a line for stderr 42"), std::string::npos) << err;
}

TEST(Log, OffDropsEverything) {
  CollectLog log(LogLevel::off);
  log::error("not even {}", "this");
  EXPECT_TRUE(log.lines().empty());
}

// A real warning of the library's reaches the handler: GPUBATCH_TRACE naming a file that cannot
// be made (the executor is made and serves; only the trace is dropped).
TEST(Log, TheExecutorsWarningsReachTheHandler) {
  CollectLog log(LogLevel::warn);
  ::setenv("GPUBATCH_TRACE", "/nonexistent-gpubatch-dir/trace.json", 1);
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  ::unsetenv("GPUBATCH_TRACE");
  EXPECT_EQ(executor.handle().relu({-1.0f, 2.0f}).get(), (std::vector<float>{0.0f, 2.0f}));
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, LogLevel::warn);
  EXPECT_NE(lines[0].message.find("GPUBATCH_TRACE ignored"), std::string::npos) << lines[0].message;
}

// Threads log while the handler is swapped and the level changed: no line is lost to a handler
// being swapped (each goes to exactly one of them) and nothing races (this file runs under TSan).
TEST(Log, HandlersAndLevelsChangeWhileThreadsLog) {
  const LogLevel before = log_level();
  set_log_level(LogLevel::warn);
  std::atomic<int> first{0}, second{0};
  constexpr int kThreads = 4, kLines = 500;
  set_log_handler([&](LogLevel, std::string_view) { first.fetch_add(1, std::memory_order_relaxed); });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kLines; ++i) log::warn("line {}", i);
    });
  for (int i = 0; i < 20; ++i) {
    set_log_handler([&](LogLevel, std::string_view) { second.fetch_add(1, std::memory_order_relaxed); });
    set_log_handler([&](LogLevel, std::string_view) { first.fetch_add(1, std::memory_order_relaxed); });
  }
  for (auto& t : threads) t.join();
  set_log_handler(nullptr);
  set_log_level(before);
  EXPECT_EQ(first.load() + second.load(), kThreads * kLines);
}

}  // namespace
}  // namespace gpubatch::testing
