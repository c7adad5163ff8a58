// Which CPUs take a GPU's interrupts: interrupt_cpus.hpp says why.
#include "gpu/interrupt_cpus.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace gpubatch::gpu {
namespace {

bool parse_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The whitespace-separated fields of a line.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// One line of /proc/interrupts that names the device: its IRQ and its count per CPU column.
struct Line {
  int irq = -1;
  std::vector<unsigned long long> counts;
};

// The numbered lines naming `pci_address`; `cpus` gets the header's CPU numbers (a machine with
// CPUs offline lists only the online ones).
std::vector<Line> device_lines(std::string_view text, std::string_view pci_address, std::vector<int>& cpus) {
  std::vector<Line> out;
  cpus.clear();
  bool header = true;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (header) {
      header = false;
      for (std::string_view f : fields(line)) {
        int cpu = 0;
        if (f.substr(0, 3) != "CPU" || !parse_int(f.substr(3), cpu)) return {};
        cpus.push_back(cpu);
      }
      continue;
    }
    if (pci_address.empty() || line.find(pci_address) == std::string_view::npos) continue;
    const auto f = fields(line);
    int irq = 0;
    if (f.empty() || f[0].back() != ':' || !parse_int(f[0].substr(0, f[0].size() - 1), irq)) continue;
    Line l{irq, {}};
    for (std::size_t c = 0; c < cpus.size() && c + 1 < f.size(); ++c) {
      unsigned long long n = 0;
      const auto [end, ec] = std::from_chars(f[c + 1].data(), f[c + 1].data() + f[c + 1].size(), n);
      if (ec != std::errc() || end != f[c + 1].data() + f[c + 1].size()) break;
      l.counts.push_back(n);
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view list) {
  std::vector<int> out;
  list = trim(list);
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view part = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    const std::size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!parse_int(part, lo)) return {};
      hi = lo;
    } else if (!parse_int(part.substr(0, dash), lo) || !parse_int(part.substr(dash + 1), hi) || hi < lo ||
               hi - lo > 65536) {
      return {};
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> irqs_of(std::string_view interrupts, std::string_view pci_address) {
  std::vector<int> cpus, out;
  for (const Line& l : device_lines(interrupts, pci_address, cpus)) out.push_back(l.irq);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> busiest_interrupt_cpus(std::string_view interrupts, std::string_view pci_address,
                                        unsigned long long min_total) {
  std::vector<int> cpus;
  const std::vector<Line> lines = device_lines(interrupts, pci_address, cpus);
  std::vector<unsigned long long> per_cpu(cpus.size(), 0);
  unsigned long long total = 0;
  for (const Line& l : lines)
    for (std::size_t c = 0; c < l.counts.size(); ++c) {
      per_cpu[c] += l.counts[c];
      total += l.counts[c];
    }
  if (total == 0 || total < min_total) return {};
  const unsigned long long busiest = *std::max_element(per_cpu.begin(), per_cpu.end());
  std::vector<int> out;
  for (std::size_t c = 0; c < per_cpu.size(); ++c)
    if (per_cpu[c] * 10 >= busiest) out.push_back(cpus[c]);
  return out;
}

std::vector<int> interrupt_cpus_of(std::string_view pci_address) {
  if (pci_address.empty()) return {};
  const std::string text = read_file("/proc/interrupts");
  if (text.empty()) return {};
  std::vector<int> busiest = busiest_interrupt_cpus(text, pci_address);
  if (!busiest.empty()) return busiest;
  const std::vector<int> irqs = irqs_of(text, pci_address);
  if (irqs.empty()) return {};
  return parse_cpu_list(read_file("/proc/irq/" + std::to_string(irqs.front()) + "/effective_affinity_list"));
}

}  // namespace gpubatch::gpu
