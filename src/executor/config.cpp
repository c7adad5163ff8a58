// BatchConfig: presets, TOML files, environment overrides, validation.
#include "gpubatch/config.hpp"

#include <array>
#include <cctype>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <toml++/toml.h>

#include "gpubatch/error.hpp"

namespace gpubatch {

namespace {

constexpr std::size_t kMaxBatchSizeLimit = std::size_t{1} << 20;
constexpr std::size_t kMaxQueueCapacity = std::size_t{1} << 24;
constexpr std::size_t kMaxInflightLimit = 64;
constexpr std::size_t kMaxThreads = 64;
constexpr std::int64_t kMaxWaitLimitUs = 60'000'000;  // a minute
// Past 10 ms a blocking wait's wake-up (20-30 us) is under 0.3% of the wait: spinning longer only
// burns a core.
constexpr std::int64_t kMaxCompletionSpinUs = 10'000;
constexpr std::int64_t kMinNice = -20, kMaxNice = 19;
// What Linux accepts as a fair task's slice (it clamps sched_runtime to 0.1 .. 100 ms).
constexpr std::chrono::microseconds kMinSlice{100}, kMaxSlice{100'000};

[[noreturn]] void bad(std::string_view key, const std::string& why) {
  throw Error(ErrorCode::invalid_config, std::string(key) + ": " + why);
}

void check(const BatchConfig& c, std::string_view prefix);

// One configuration key: how to set it from an integer or a string. `where` names the source
// in messages ("file.toml: key max_batch_size", "GPUBATCH_MAX_BATCH_SIZE").
enum class Kind { size, micros, millis, policy, overflow, boolean, list, text, nice };
struct Key {
  std::string_view name;
  std::string_view env;
  Kind kind;
};
constexpr Key kKeys[] = {
    {"max_batch_size", "GPUBATCH_MAX_BATCH_SIZE", Kind::size},
    {"max_wait_us", "GPUBATCH_MAX_WAIT_US", Kind::micros},
    {"policy", "GPUBATCH_POLICY", Kind::policy},
    {"queue_capacity", "GPUBATCH_QUEUE_CAPACITY", Kind::size},
    {"max_inflight_batches", "GPUBATCH_MAX_INFLIGHT_BATCHES", Kind::size},
    {"overflow", "GPUBATCH_OVERFLOW", Kind::overflow},
    {"block_timeout_us", "GPUBATCH_BLOCK_TIMEOUT_US", Kind::micros},
    {"block_slice_us", "GPUBATCH_BLOCK_SLICE_US", Kind::micros},
    {"max_batch_bytes", "GPUBATCH_MAX_BATCH_BYTES", Kind::size},
    {"completion_threads", "GPUBATCH_COMPLETION_THREADS", Kind::size},
    {"batch_timeout_ms", "GPUBATCH_BATCH_TIMEOUT_MS", Kind::millis},
    {"completion_spin_us", "GPUBATCH_COMPLETION_SPIN_US", Kind::micros},
    {"resident", "GPUBATCH_RESIDENT", Kind::boolean},
    {"resident_idle_us", "GPUBATCH_RESIDENT_IDLE_US", Kind::micros},
    {"lone_future_waits", "GPUBATCH_LONE_FUTURE_WAITS", Kind::boolean},
    {"shard_per_device", "GPUBATCH_SHARD_PER_DEVICE", Kind::boolean},
    {"deadline_admission", "GPUBATCH_DEADLINE_ADMISSION", Kind::boolean},
    {"direct_bytes", "GPUBATCH_DIRECT_BYTES", Kind::size},
    {"target_p99_us", "GPUBATCH_TARGET_P99_US", Kind::micros},
    {"priority_levels", "GPUBATCH_PRIORITY_LEVELS", Kind::size},
    {"priority_aging_us", "GPUBATCH_PRIORITY_AGING_US", Kind::micros},
    {"level_queue_capacity", "GPUBATCH_LEVEL_QUEUE_CAPACITY", Kind::list},
    {"level_timeout_us", "GPUBATCH_LEVEL_TIMEOUT_US", Kind::list},
    {"devices", "GPUBATCH_DEVICES", Kind::text},
    {"thread_nice", "GPUBATCH_THREAD_NICE", Kind::nice},
    {"thread_slice_us", "GPUBATCH_THREAD_SLICE_US", Kind::micros},
    {"latency_batch_size", "GPUBATCH_LATENCY_BATCH_SIZE", Kind::size},
};

const Key* find_key(std::string_view name) {
  for (const Key& k : kKeys)
    if (k.name == name) return &k;
  return nullptr;
}

void set_integer(BatchConfig& c, const Key& key, std::int64_t v, const std::string& where) {
  if (key.kind == Kind::nice) {  // the one key that may be negative
    if (v < kMinNice || v > kMaxNice)
      bad(where, "must be in [" + std::to_string(kMinNice) + ", " + std::to_string(kMaxNice) + "] (got " +
                     std::to_string(v) + ")");
    c.thread_nice = static_cast<int>(v);
    return;
  }
  if (v < 0) bad(where, "must not be negative (got " + std::to_string(v) + ")");
  const auto u = static_cast<std::uint64_t>(v);
  if (key.name == "max_batch_size") c.max_batch_size = u;
  else if (key.name == "max_wait_us") c.max_wait = std::chrono::microseconds(v);
  else if (key.name == "queue_capacity") c.queue_capacity = u;
  else if (key.name == "max_inflight_batches") c.max_inflight_batches = u;
  else if (key.name == "block_timeout_us") c.block_timeout = std::chrono::microseconds(v);
  else if (key.name == "block_slice_us") c.block_slice = std::chrono::microseconds(v);
  else if (key.name == "max_batch_bytes") c.max_batch_bytes = u;
  else if (key.name == "direct_bytes") c.direct_bytes = u;
  else if (key.name == "completion_threads") c.completion_threads = u;
  else if (key.name == "batch_timeout_ms") c.batch_timeout = std::chrono::milliseconds(v);
  else if (key.name == "completion_spin_us") c.completion_spin = std::chrono::microseconds(v);
  else if (key.name == "resident_idle_us") c.resident_idle = std::chrono::microseconds(v);
  else if (key.name == "target_p99_us") c.target_p99 = std::chrono::microseconds(v);
  else if (key.name == "priority_levels") c.priority_levels = u;
  else if (key.name == "priority_aging_us") c.priority_aging = std::chrono::microseconds(v);
  else if (key.name == "thread_slice_us") c.thread_slice = std::chrono::microseconds(v);
  else if (key.name == "latency_batch_size") c.latency_batch_size = u;
  else if (key.kind == Kind::list) bad(where, "expects a string of comma-separated integers, one per level, such as \"0,2000\"");
  else if (key.kind == Kind::boolean) bad(where, "expects true or false, not an integer");
  else bad(where, "expects a string, not an integer");
}

// "a,b,c": one non-negative integer per priority level (at most kMaxPriorityLevels).
void set_list(BatchConfig& c, const Key& key, std::string_view v, const std::string& where) {
  std::array<std::uint64_t, BatchConfig::kMaxPriorityLevels> values{};
  std::size_t n = 0;
  while (true) {
    const std::size_t comma = v.find(',');
    std::string_view item = v.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (n == values.size())
      bad(where, "more than " + std::to_string(values.size()) + " values (one per priority level)");
    std::uint64_t x = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || x > kMaxWaitLimitUs * 1000)
      bad(where, "expects comma-separated non-negative integers, one per level (bad item \"" +
                     std::string(item) + "\")");
    values[n++] = x;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (key.name == "level_queue_capacity") c.level_queue_capacity[i] = values[i];
    else c.level_timeout[i] = std::chrono::microseconds(values[i]);
  }
}

void set_string(BatchConfig& c, const Key& key, std::string_view v, const std::string& where) {
  if (key.kind == Kind::list) {
    set_list(c, key, v, where);
  } else if (key.kind == Kind::policy) {
    auto p = flush_policy_from_string(v);
    if (!p) bad(where, "unknown policy \"" + std::string(v) + "\" (deadline, adaptive)");
    c.policy = *p;
  } else if (key.kind == Kind::overflow) {
    auto p = overflow_policy_from_string(v);
    if (!p) bad(where, "unknown overflow policy \"" + std::string(v) + "\" (block, block_for, reject)");
    c.overflow = *p;
  } else if (key.kind == Kind::text) {
    parse_device_list(v, where);  // throws naming `where`
    c.devices = std::string(v);
  } else if (key.kind == Kind::boolean) {
    bad(where, "expects true or false, not a string");
  } else {
    bad(where, "expects an integer, not a string");
  }
}

void set_boolean(BatchConfig& c, const Key& key, bool v, const std::string& where) {
  if (key.kind != Kind::boolean) bad(where, "expects " + std::string(key.kind == Kind::policy || key.kind == Kind::overflow || key.kind == Kind::list || key.kind == Kind::text ? "a string" : "an integer") + ", not true/false");
  if (key.name == "lone_future_waits") c.lone_future_waits = v;
  else if (key.name == "shard_per_device") c.shard_per_device = v;
  else if (key.name == "deadline_admission") c.deadline_admission = v;
  else c.resident = v;
}

// GPUBATCH_RESIDENT, GPUBATCH_LONE_FUTURE_WAITS, GPUBATCH_SHARD_PER_DEVICE, GPUBATCH_DEADLINE_ADMISSION: 1|0|true|false|on|off
void set_boolean_from_text(BatchConfig& c, const Key& key, std::string_view v, const std::string& where) {
  if (v == "1" || v == "true" || v == "on") set_boolean(c, key, true, where);
  else if (v == "0" || v == "false" || v == "off") set_boolean(c, key, false, where);
  else bad(where, "expects 1, 0, true, false, on or off");
}

std::string node_where(std::string_view source, std::string_view key, const toml::node& node) {
  std::string s(source);
  // append(), not operator+: GCC 12 warns (-Wrestrict, a false positive) on `":" + to_string()`.
  if (node.source().begin.line > 0) s.append(":").append(std::to_string(node.source().begin.line));
  return s.append(": key ").append(key);
}

BatchConfig from_table(const toml::table& table, std::string_view source) {
  BatchConfig c;  // the defaults (adaptive) unless the file names a preset
  if (const toml::node* p = table.get("preset")) {
    const auto* s = p->as_string();
    if (!s) bad(node_where(source, "preset", *p), "expects a string such as \"latency\"");
    try {
      c = BatchConfig::preset(s->get());
    } catch (const Error& e) {
      bad(node_where(source, "preset", *p), std::string(e.message()));
    }
  }
  for (auto&& [k, node] : table) {
    const std::string_view name = k.str();
    if (name == "preset") continue;
    const std::string where = node_where(source, name, node);
    const Key* key = find_key(name);
    if (!key) bad(where, "unknown key");
    if (const auto* b = node.as_boolean()) set_boolean(c, *key, b->get(), where);
    else if (const auto* i = node.as_integer()) set_integer(c, *key, i->get(), where);
    else if (const auto* s = node.as_string()) set_string(c, *key, s->get(), where);
    else if (node.is_floating_point()) bad(where, "expects an integer, not a floating-point number");
    else bad(where, "has an unsupported type");
  }
  check(c, std::string(source) + ": ");
  return c;
}

}  // namespace

std::string_view to_string(FlushPolicy p) noexcept {
  switch (p) {
    case FlushPolicy::deadline: return "deadline";
    case FlushPolicy::adaptive: return "adaptive";
  }
  return "?";
}

std::string_view to_string(OverflowPolicy p) noexcept {
  switch (p) {
    case OverflowPolicy::block: return "block";
    case OverflowPolicy::block_for: return "block_for";
    case OverflowPolicy::reject: return "reject";
  }
  return "?";
}

std::optional<FlushPolicy> flush_policy_from_string(std::string_view s) noexcept {
  if (s == "deadline") return FlushPolicy::deadline;
  if (s == "adaptive") return FlushPolicy::adaptive;
  return std::nullopt;
}

std::optional<OverflowPolicy> overflow_policy_from_string(std::string_view s) noexcept {
  if (s == "block") return OverflowPolicy::block;
  if (s == "block_for") return OverflowPolicy::block_for;
  if (s == "reject") return OverflowPolicy::reject;
  return std::nullopt;
}

namespace {
// The default (adaptive) and `latency` poll a batch for 200 us before blocking. On the H200 a small
// batch's round trip is 14-60 us (p99 under 90 us), so it is caught by the poll, without the 20-30
// us wake-up of a blocking wait; a batch that takes longer has paid at most 200 us of one core
// (one thread polls at a time), and its blocking wait's wake-up is then a small part of the
// wait. `throughput` and `balanced` batches wait milliseconds to fill: they block at once.
// (BatchConfig{}'s default equals it: BatchConfig.PresetsHaveTheDesignNumbers. Not a static_assert:
// BatchConfig holds a std::string, which clang does not construct in a constant expression.)
constexpr std::chrono::microseconds kLatencySpin{200};
}  // namespace

std::vector<std::string> parse_device_list(std::string_view list, std::string_view where) {
  auto refuse = [&](std::string why) {
    why.append(" in \"").append(list).append(
        "\" (expected \"all\", or comma-separated device indices or name substrings such as \"0,1\")");
    bad(where, why);
  };
  std::vector<std::string> items;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = list.find(',', begin);
    std::string_view item = list.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.empty()) refuse(items.empty() && comma == std::string_view::npos ? "an empty list" : "an empty item");
    for (const char ch : item) {
      const auto u = static_cast<unsigned char>(ch);
      if (!std::isalnum(u) && ch != ' ' && ch != '-' && ch != '_' && ch != '.' && ch != '(' && ch != ')')
        refuse(std::string("the character '").append(1, ch).append("'"));
    }
    if (std::all_of(item.begin(), item.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }) &&
        item.size() > 9)
      refuse(std::string("the index ").append(item).append(" (too large)"));
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (items.size() > 1 && std::find(items.begin(), items.end(), "all") != items.end())
    refuse("\"all\" beside other items");
  return items;
}

BatchConfig BatchConfig::latency() {
  BatchConfig c = balanced();
  c.max_batch_size = 256;
  c.max_wait = std::chrono::milliseconds(1);
  c.queue_capacity = 8192;
  c.block_timeout = std::chrono::milliseconds(2);
  c.max_batch_bytes = std::size_t{64} << 20;
  c.completion_spin = kLatencySpin;
  c.lone_future_waits = true;
  return c;
}

BatchConfig BatchConfig::balanced() {
  BatchConfig c;
  c.max_batch_size = 1024;
  c.max_wait = std::chrono::milliseconds(5);
  c.policy = FlushPolicy::deadline;
  c.queue_capacity = 16384;
  c.max_inflight_batches = 3;
  c.max_batch_bytes = std::size_t{256} << 20;
  c.completion_threads = 2;
  c.completion_spin = std::chrono::microseconds(0);
  c.lone_future_waits = false;  // batches wait ms to fill: a call is never held for a round trip
  return c;
}

BatchConfig BatchConfig::throughput() {
  BatchConfig c = balanced();
  c.max_batch_size = 2048;
  c.max_wait = std::chrono::milliseconds(10);
  c.queue_capacity = 32768;
  c.max_inflight_batches = 4;
  c.block_timeout = std::chrono::milliseconds(20);
  c.max_batch_bytes = std::size_t{512} << 20;
  c.completion_threads = 4;  // big batches: four threads share each one's copies and resolving
  return c;
}

// The defaults: up to 4096 requests, flushing whenever the device has a free slot (2 in flight),
// never past 5 ms; 4 completion threads (big batches under load: see throughput()); polls 200 us.
BatchConfig BatchConfig::adaptive() { return BatchConfig{}; }

BatchConfig BatchConfig::realtime() {
  BatchConfig c = adaptive();
  c.resident = true;
  return c;
}

BatchConfig BatchConfig::preset(std::string_view name) {
  if (name == "latency") return latency();
  if (name == "balanced") return balanced();
  if (name == "throughput") return throughput();
  if (name == "adaptive") return adaptive();
  if (name == "realtime") return realtime();
  throw Error(ErrorCode::invalid_config,
              "preset: unknown preset \"" + std::string(name) +
                  "\" (latency, balanced, throughput, adaptive, realtime)");
}

namespace {

// A configuration is a list of `key = value` lines (value: an integer, true/false, or a string
// without escapes), blank lines and comments. Every line is checked against that grammar here,
// and toml++ is handed only the checked `key = value` lines, comments dropped: fuzzing found
// inputs on which toml++ 3.3 fails an internal assertion (undefined behaviour in a release build)
// instead of reporting an error, so it never sees anything but the simplest TOML.
// One line of a configuration, read left to right; refuse() throws, naming the source and line.
class ConfigLine {
 public:
  ConfigLine(std::string_view line, std::string_view source, std::size_t line_no)
      : line_(line), source_(source), line_no_(line_no) {}

  // Blank, or a comment: nothing to hand on.
  bool empty() { return at_end(); }
  // `key = value`, checked; the caller has seen !empty().
  std::pair<std::string_view, std::string_view> key_value() {
    const std::string_view key = take_key();
    skip_blanks();
    if (i_ == line_.size() || line_[i_] != '=') refuse("expected '=' after the key \"" + std::string(key) + "\"");
    ++i_;
    skip_blanks();
    const std::size_t value_begin = i_;
    take_value(key);
    const std::string_view value = line_.substr(value_begin, i_ - value_begin);
    if (!at_end()) refuse("key \"" + std::string(key) + "\": unexpected text after the value");
    return {key, value};
  }

 private:
  [[noreturn]] void refuse(const std::string& why) const {
    throw Error(ErrorCode::invalid_config, std::string(source_) + ":" + std::to_string(line_no_) + ": " + why);
  }
  void skip_blanks() {
    while (i_ < line_.size() && (line_[i_] == ' ' || line_[i_] == '\t' || line_[i_] == '\r')) ++i_;
  }
  bool at_end() {
    skip_blanks();
    return i_ == line_.size() || line_[i_] == '#';  // a comment may hold anything
  }
  bool digit(std::size_t at) const { return std::isdigit(static_cast<unsigned char>(line_[at])) != 0; }
  std::string_view take_key() {
    const std::size_t begin = i_;
    while (i_ < line_.size() && (std::isalnum(static_cast<unsigned char>(line_[i_])) || line_[i_] == '_' || line_[i_] == '-')) ++i_;
    if (i_ == begin) refuse("expected a key (letters, digits, '_'), found '" + std::string(1, line_[i_]) + "'");
    return line_.substr(begin, i_ - begin);
  }
  // A "string" or 'string' of plain ASCII, true, false, or an integer (digits, '_' between two).
  void take_value(std::string_view key) {
    const std::string k = "key \"" + std::string(key) + "\": ";
    if (i_ < line_.size() && (line_[i_] == '"' || line_[i_] == '\'')) {
      const char quote = line_[i_++];
      while (i_ < line_.size() && line_[i_] != quote) {
        const auto c = static_cast<unsigned char>(line_[i_]);
        if (c < 0x20 || c >= 0x7F || c == '\\') refuse(k + "strings hold plain ASCII, no escapes");
        ++i_;
      }
      if (i_ == line_.size()) refuse(k + "unterminated string");
      ++i_;
    } else if (line_.substr(i_, 4) == "true") {
      i_ += 4;
    } else if (line_.substr(i_, 5) == "false") {
      i_ += 5;
    } else {
      if (i_ < line_.size() && (line_[i_] == '+' || line_[i_] == '-')) ++i_;
      const std::size_t digits = i_;
      while (i_ < line_.size() && (digit(i_) || (line_[i_] == '_' && i_ > digits && digit(i_ - 1)))) ++i_;
      if (i_ == digits || line_[i_ - 1] == '_') refuse(k + "expected an integer, true, false or a \"string\"");
      if (line_[digits] == '0' && i_ - digits > 1) refuse(k + "leading zeros");
    }
  }

  std::string_view line_, source_;
  std::size_t line_no_;
  std::size_t i_ = 0;
};

std::string checked_toml(std::string_view text, std::string_view source) {
  std::string out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    ConfigLine line(text.substr(0, nl), source, line_no);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty()) continue;
    const auto [key, value] = line.key_value();
    out.append(key).append(" = ").append(value).append("\n");
  }
  return out;
}

}  // namespace

BatchConfig BatchConfig::from_string(std::string_view text, std::string_view source) {
  const std::string checked = checked_toml(text, source);
  toml::table table;
  try {
    table = toml::parse(checked, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
       << e.description();
    throw Error(ErrorCode::invalid_config, os.str());
  }
  return from_table(table, source);
}

BatchConfig BatchConfig::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::invalid_config, path.string() + ": cannot open the configuration file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_string(text.str(), path.string());
}

BatchConfig& BatchConfig::apply_environment() {
  if (const char* p = std::getenv("GPUBATCH_PRESET"); p && *p) {
    try {
      *this = preset(p);
    } catch (const Error&) {
      bad("GPUBATCH_PRESET", "unknown preset \"" + std::string(p) +
                                 "\" (latency, balanced, throughput, adaptive, realtime)");
    }
  }
  for (const Key& key : kKeys) {
    const char* raw = std::getenv(std::string(key.env).c_str());
    if (!raw) continue;
    const std::string_view v(raw);
    const std::string where = std::string(key.env) + "=" + std::string(v);
    if (key.kind == Kind::boolean) {
      set_boolean_from_text(*this, key, v, where);
      continue;
    }
    if (key.kind == Kind::policy || key.kind == Kind::overflow || key.kind == Kind::list || key.kind == Kind::text) {
      set_string(*this, key, v, where);
      continue;
    }
    std::int64_t n = 0;
    const char* first = v.data();
    const char* last = v.data() + v.size();
    if (!v.empty() && *first == '+') ++first;
    auto [ptr, ec] = std::from_chars(first, last, n);
    if (v.empty() || ec != std::errc() || ptr != last)
      bad(where, "not an integer");
    set_integer(*this, key, n, where);
  }
  validate();
  return *this;
}

BatchConfig BatchConfig::from_environment(BatchConfig base) {
  base.apply_environment();
  return base;
}

void BatchConfig::validate() const { check(*this, ""); }

namespace {

// What check() says of a bad value: the key (after the source's prefix) and why.
class Checker {
 public:
  explicit Checker(std::string_view prefix) : prefix_(prefix) {}
  [[noreturn]] void bad(std::string_view key, const std::string& why) const {
    ::gpubatch::bad(std::string(prefix_) + std::string(key), why);
  }
  void range(std::string_view key, std::int64_t v, std::int64_t lo, std::int64_t hi) const {
    if (v < lo || v > hi)
      bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " + std::to_string(v) + ")");
  }
  void range(std::string_view key, std::size_t v, std::size_t lo, std::size_t hi) const {
    if (v < lo || v > hi)
      bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " + std::to_string(v) + ")");
  }
  // A scheduler slice: 0 (`zero` says whose slice is kept) or what Linux accepts.
  void slice(std::string_view key, std::chrono::microseconds v, std::string_view zero) const {
    if (v.count() != 0 && (v < kMinSlice || v > kMaxSlice))
      bad(key, "must be 0 (" + std::string(zero) + ") or in [" + std::to_string(kMinSlice.count()) + ", " +
                   std::to_string(kMaxSlice.count()) + "] (got " + std::to_string(v.count()) + ")");
  }

 private:
  std::string_view prefix_;
};

// Batch formation and the queue.
void check_batching(const BatchConfig& c, const Checker& k) {
  k.range("max_batch_size", c.max_batch_size, 1, kMaxBatchSizeLimit);
  k.range("latency_batch_size", c.latency_batch_size, 0, kMaxBatchSizeLimit);
  k.range("max_wait_us", c.max_wait.count(), 0, kMaxWaitLimitUs);
  if (c.max_wait.count() == 0 && c.max_batch_size == 1)
    k.bad("max_wait_us", "0 together with max_batch_size = 1 turns batching off; use Device::run "
                         "for unbatched requests, or raise one of them");
  k.range("queue_capacity", c.queue_capacity, 1, kMaxQueueCapacity);
  k.range("max_inflight_batches", c.max_inflight_batches, 1, kMaxInflightLimit);
  k.range("block_timeout_us", c.block_timeout.count(), 0, kMaxWaitLimitUs);
  if (c.overflow == OverflowPolicy::block_for && c.block_timeout.count() == 0)
    k.bad("block_timeout_us", "must be positive with overflow = \"block_for\" (use \"reject\")");
  k.range("max_batch_bytes", c.max_batch_bytes, 1, std::numeric_limits<std::size_t>::max());
  k.range("target_p99_us", c.target_p99.count(), 0, kMaxWaitLimitUs);
  if (c.policy != FlushPolicy::deadline && c.policy != FlushPolicy::adaptive) k.bad("policy", "unknown value");
  if (c.overflow != OverflowPolicy::block && c.overflow != OverflowPolicy::block_for &&
      c.overflow != OverflowPolicy::reject)
    k.bad("overflow", "unknown value");
}

// Completion, resident mode and the executor's threads.
void check_threads(const BatchConfig& c, const Checker& k) {
  k.range("completion_threads", c.completion_threads, 1, kMaxThreads);
  k.range("resident_idle_us", c.resident_idle.count(), 1, kMaxWaitLimitUs);
  if (c.batch_timeout.count() < 1)
    k.bad("batch_timeout_ms", "must be at least 1 (got " + std::to_string(c.batch_timeout.count()) + ")");
  k.range("completion_spin_us", c.completion_spin.count(), 0, kMaxCompletionSpinUs);
  k.range("thread_nice", std::int64_t{c.thread_nice}, kMinNice, kMaxNice);
  k.slice("thread_slice_us", c.thread_slice, "the system's");
  k.slice("block_slice_us", c.block_slice, "the thread's own");
}

// Priority levels: how many, their aging, and each level's own queue and timeout.
void check_levels(const BatchConfig& c, const Checker& k) {
  k.range("priority_levels", c.priority_levels, 1, BatchConfig::kMaxPriorityLevels);
  k.range("priority_aging_us", c.priority_aging.count(), 1, kMaxWaitLimitUs);
  for (std::size_t i = 0; i < BatchConfig::kMaxPriorityLevels; ++i) {
    const std::string at = " (level " + std::to_string(i) + ")";
    if (c.level_queue_capacity[i] > kMaxQueueCapacity)
      k.bad("level_queue_capacity", "must be at most " + std::to_string(kMaxQueueCapacity) + at);
    if (c.level_timeout[i].count() < 0 || c.level_timeout[i].count() > kMaxWaitLimitUs)
      k.bad("level_timeout_us", "must be in [0, " + std::to_string(kMaxWaitLimitUs) + "]" + at);
    if (i >= c.priority_levels && (c.level_queue_capacity[i] || c.level_timeout[i].count()))
      k.bad(c.level_queue_capacity[i] ? "level_queue_capacity" : "level_timeout_us",
            "names level " + std::to_string(i) + " but priority_levels is " + std::to_string(c.priority_levels));
  }
}

void check(const BatchConfig& c, std::string_view prefix) {
  // Every field by name: a field added to BatchConfig stops this from compiling until it is
  // checked here (or said to take any value).
  [[maybe_unused]] const auto& [max_batch_size, max_wait, policy, queue_capacity, max_inflight_batches, overflow,
                                block_timeout, block_slice, max_batch_bytes, completion_threads, batch_timeout, completion_spin,
                                resident, resident_idle, target_p99, priority_levels, priority_aging,
                                level_queue_capacity, level_timeout, devices, thread_nice, thread_slice,
                                lone_future_waits, direct_bytes, shard_per_device, deadline_admission,
                                latency_batch_size] = c;
  // resident, lone_future_waits, shard_per_device, deadline_admission: any value; direct_bytes:
  // any byte count (0 turns the direct lane off).
  const Checker k(prefix);
  check_batching(c, k);
  check_threads(c, k);
  check_levels(c, k);
  if (!devices.empty()) parse_device_list(devices, std::string(prefix) + "devices");
}

}  // namespace

}  // namespace gpubatch
