// Prometheus text exposition of a Stats snapshot.
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "gpubatch/stats.hpp"

namespace gpubatch {

namespace {

class Writer {
 public:
  explicit Writer(std::string_view prefix) : prefix_(prefix) {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += prefix_;
    out_ += '_';
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += prefix_;
    out_ += '_';
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, std::string_view labels, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    line(name, labels, buf);
  }
  void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
    line(name, labels, std::to_string(value));
  }
  void line(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += prefix_;
    out_ += '_';
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void latency(std::string_view name, std::string_view help, const LatencySummary& s) {
    header(name, "summary", help);
    auto seconds = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) * 1e-9; };
    sample(name, "quantile=\"0.5\"", seconds(s.p50));
    sample(name, "quantile=\"0.9\"", seconds(s.p90));
    sample(name, "quantile=\"0.99\"", seconds(s.p99));
    sample(std::string(name) + "_sum", "",
           seconds(s.mean) * static_cast<double>(s.count));
    sample(std::string(name) + "_count", "", s.count);
    header(std::string(name) + "_max", "gauge", std::string("Largest sample of ") + std::string(name) + ".");
    sample(std::string(name) + "_max", "", seconds(s.max));
  }
  // A Prometheus histogram with one series per class, labelled `label_name`.
  void classes(std::string_view name, std::string_view help, std::string_view label_name,
               const std::vector<LatencyClass>& classes) {
    if (classes.empty()) return;
    header(name, "histogram", help);
    auto seconds = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) * 1e-9; };
    for (const LatencyClass& c : classes) {
      const std::string label = std::string(label_name) + "=\"" + c.label + "\"";
      char le[48];
      for (const auto& [bound, count] : c.buckets) {
        std::snprintf(le, sizeof le, ",le=\"%.6g\"", seconds(bound));
        sample(std::string(name) + "_bucket", label + le, count);
      }
      sample(std::string(name) + "_bucket", label + ",le=\"+Inf\"", c.summary.count);
      sample(std::string(name) + "_sum", label, seconds(c.summary.mean) * static_cast<double>(c.summary.count));
      sample(std::string(name) + "_count", label, c.summary.count);
    }
  }
  std::string take() { return std::move(out_); }

 private:
  std::string_view prefix_;
  std::string out_;
};

// A family of series: its name, type and help, and up to four samples, each with its labels and
// how to read its value (a count, or a real number where `real` is set).
struct Sample {
  const char* labels;
  std::uint64_t (*count)(const Stats&) = nullptr;
  double (*real)(const Stats&) = nullptr;
};
struct Family {
  const char* name;
  const char* type;
  const char* help;
  Sample samples[4];
};
using S = const Stats&;

void families(Writer& w, const Stats& s, std::span<const Family> list) {
  for (const Family& f : list) {
    w.header(f.name, f.type, f.help);
    for (const Sample& x : f.samples) {
      if (x.count) w.sample(f.name, x.labels, x.count(s));
      else if (x.real) w.sample(f.name, x.labels, x.real(s));
    }
  }
}

const Family kRequestFamilies[] = {
    {"requests_submitted_total", "counter", "Requests accepted into the queue.", {{"", [](S s) { return s.submitted; }}}},
    {"requests_total", "counter", "Requests by how they ended.",
     {{"outcome=\"completed\"", [](S s) { return s.completed; }},
      {"outcome=\"failed\"", [](S s) { return s.failed; }},
      {"outcome=\"rejected\"", [](S s) { return s.rejected; }}}},
    {"requests_shed_total", "counter",
     "Rejected requests whose deadline the backlog ahead would have outlasted (deadline_admission).",
     {{"", [](S s) { return s.shed; }}}},
    {"request_failures_total", "counter", "Accepted requests that failed, by cause.",
     {{"cause=\"deadline\"", [](S s) { return s.expired; }},
      {"cause=\"cancelled\"", [](S s) { return s.cancelled; }},
      {"cause=\"device\"", [](S s) { return s.device_errors; }}}},
    {"handler_exceptions_total", "counter", "Completion handlers that threw on an executor thread (caught and logged).",
     {{"", [](S s) { return s.handler_exceptions; }}}},
    {"resident_requests_total", "counter", "Requests served by the resident kernel (resident mode).",
     {{"", [](S s) { return s.resident; }}}},
    {"direct_requests_total", "counter", "Large requests run on their caller's thread (direct_bytes).",
     {{"", [](S s) { return s.direct; }}}},
    {"split_requests_total", "counter", "Of those, requests taken in chunks that pipeline (split_bytes).",
     {{"", [](S s) { return s.split; }}}},
    {"queue_depth", "gauge", "Accepted requests not yet in a submitted batch.", {{"", [](S s) { return s.queue_depth; }}}},
    {"inflight_batches", "gauge", "Batches submitted to the device and not yet complete.",
     {{"", [](S s) { return s.inflight_batches; }}}},
    {"batches_total", "counter", "Batches submitted to the device.", {{"", [](S s) { return s.batches; }}}},
    {"flushes_total", "counter", "Batch flushes by reason.",
     {{"reason=\"size\"", [](S s) { return s.flushes.size; }},
      {"reason=\"deadline\"", [](S s) { return s.flushes.deadline; }},
      {"reason=\"idle\"", [](S s) { return s.flushes.idle; }},
      {"reason=\"shutdown\"", [](S s) { return s.flushes.shutdown; }}}},
    {"strand_runs_total", "counter", "Runs of the batch-forming strand.", {{"", [](S s) { return s.strand_runs; }}}},
    {"strand_timer_wakeups_total", "counter", "Strand runs started by its timer (max_wait or a request deadline).",
     {{"", [](S s) { return s.timer_wakeups; }}}},
    {"strand_polls_total", "counter", "Times the idle strand polled for the next arrival (after a lone caller's batch).",
     {{"", [](S s) { return s.strand_polls; }}}},
    {"strand_poll_hits_total", "counter", "Strand polls that an arrival ended.",
     {{"", [](S s) { return s.strand_poll_hits; }}}},
    {"strand_done_runs_total", "counter", "Strand runs a completion thread ran on freeing the slot it waited for (host cores).",
     {{"", [](S s) { return s.strand_done_runs; }}}},
    {"caller_completions_total", "counter",
     "Batches that their synchronous caller polled and completed on its own thread.",
     {{"", [](S s) { return s.caller_completions; }}}},
    {"express_batches_total", "counter",
     "Batches of requests above priority level 0 sent at once in the slot kept for them.",
     {{"", [](S s) { return s.express_batches; }}}},
    {"packed_batches_total", "counter",
     "Batches laid out and submitted by the packer thread while the strand formed the next.",
     {{"", [](S s) { return s.packed_batches; }}}},
    {"batch_size_mean", "gauge", "Mean requests per batch.", {{"", nullptr, [](S s) { return s.mean_batch_size; }}}},
    {"batch_fill_mean", "gauge", "Mean batch size divided by max_batch_size.",
     {{"", nullptr, [](S s) { return s.mean_fill; }}}},
    {"batch_size_max", "gauge", "Configured max_batch_size.",
     {{"", [](S s) { return static_cast<std::uint64_t>(s.max_batch_size); }}}},
};

const Family kDeviceFamilies[] = {
    {"device_cost_fixed_seconds", "gauge", "Learnt fixed device time of a batch.",
     {{"", nullptr, [](S s) { return static_cast<double>(s.cost_fixed.count()) * 1e-9; }}}},
    {"device_cost_seconds_per_byte", "gauge", "Learnt device time per byte of a batch.",
     {{"", nullptr, [](S s) { return s.cost_ns_per_byte * 1e-9; }}}},
    {"target_batch_bytes", "gauge", "Bytes a batch may hold under target_p99 (0: no target).",
     {{"", [](S s) { return static_cast<std::uint64_t>(s.target_batch_bytes); }}}},
    {"batch_count_limit", "gauge", "Requests a regular batch may take now (latency_batch_size until saturated).",
     {{"", [](S s) { return static_cast<std::uint64_t>(s.batch_count_limit); }}}},
    {"inflight_limit", "gauge", "Batches that may be in flight now (max_inflight_batches, twice that while saturated).",
     {{"", [](S s) { return static_cast<std::uint64_t>(s.inflight_limit); }}}},
    {"transfers_total", "counter", "Upload and download passes on the device.",
     {{"direction=\"up\"", [](S s) { return s.transfers.uploads; }},
      {"direction=\"down\"", [](S s) { return s.transfers.downloads; }}}},
    {"transfer_bytes_total", "counter", "Bytes moved to and from the device.",
     {{"direction=\"up\"", [](S s) { return s.transfers.bytes_up; }},
      {"direction=\"down\"", [](S s) { return s.transfers.bytes_down; }}}},
    {"device_dispatches_total", "counter", "Compute dispatches recorded on the device.",
     {{"", [](S s) { return s.transfers.dispatches; }}}},
    {"device_submissions_total", "counter", "Queue submissions on the device.",
     {{"", [](S s) { return s.transfers.submissions; }}}},
};

// A label value: backslash, double quote and newline escaped (the text format's rules).
std::string label_value(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Per-device series, labelled device="i" (the index in Stats::devices); device_info carries the
// name, so that the others stay cheap to join on.
void device_series(Writer& w, const std::vector<DeviceStats>& devices) {
  if (devices.empty()) return;
  auto label = [](std::size_t i) { return "device=\"" + std::to_string(i) + "\""; };
  w.header("device_info", "gauge", "One series per device of the executor, its name in a label.");
  for (std::size_t i = 0; i < devices.size(); ++i)
    w.sample("device_info", label(i) + ",name=\"" + label_value(devices[i].name) + "\"", std::uint64_t{1});
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t (*get)(const DeviceStats&);
  };
  static constexpr Series kSeries[] = {
      {"device_live", "gauge", "1 while the device takes batches; 0 while it is lost, or dropped.",
       [](const DeviceStats& d) -> std::uint64_t { return d.live ? 1 : 0; }},
      {"device_batches_total", "counter", "Batches submitted to the device (re-runs included).",
       [](const DeviceStats& d) { return d.batches; }},
      {"device_requests_total", "counter", "Requests in the batches submitted to the device.",
       [](const DeviceStats& d) { return d.requests; }},
      {"device_bytes_total", "counter", "Input + output bytes of those requests.",
       [](const DeviceStats& d) { return d.bytes; }},
      {"device_inflight_batches", "gauge", "Batches submitted to the device, not yet finished.",
       [](const DeviceStats& d) { return d.inflight_batches; }},
      {"device_inflight_bytes", "gauge", "Input + output bytes of those batches (what placement weighs).",
       [](const DeviceStats& d) { return d.inflight_bytes; }},
      {"device_losses_total", "counter", "Times the device was found lost.",
       [](const DeviceStats& d) { return d.losses; }},
      {"device_failovers_total", "counter", "Batches of the device re-run on another after it was lost.",
       [](const DeviceStats& d) { return d.failovers; }},
      {"device_reruns_total", "counter", "Batches the device ran for a lost one.",
       [](const DeviceStats& d) { return d.reruns; }},
      {"device_recoveries_total", "counter", "Recoveries that brought the device back into placement.",
       [](const DeviceStats& d) { return d.recoveries; }},
  };
  for (const Series& series : kSeries) {
    w.header(series.name, series.type, series.help);
    for (std::size_t i = 0; i < devices.size(); ++i) w.sample(series.name, label(i), series.get(devices[i]));
  }
}

}  // namespace

std::string to_prometheus(const Stats& s, std::string_view prefix) {
  Writer w(prefix);
  families(w, s, kRequestFamilies);
  w.latency("queue_wait_seconds", "Time from acceptance to the batch's submission.", s.queue_wait);
  w.latency("submit_seconds", "Time from acceptance to the return of its batch's device submission.",
            s.submit_latency);
  w.latency("device_seconds", "Time from a batch's submission to its completion.", s.device_time);
  w.latency("end_to_end_seconds", "Time from acceptance to the result.", s.end_to_end);
  w.classes("priority_end_to_end_seconds", "Time from acceptance to the result, by priority level.",
            "priority", s.end_to_end_by_priority);
  w.classes("op_end_to_end_seconds", "Time from acceptance to the result, by operation.", "op",
            s.end_to_end_by_op);
  families(w, s, kDeviceFamilies);
  device_series(w, s.devices);
  return w.take();
}

}  // namespace gpubatch
