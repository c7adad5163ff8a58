#pragma once
// Which CPUs take a GPU's interrupts (Linux: /proc/interrupts, /proc/irq/N/). A thread that submits
// and waits for the GPU from such a CPU answers a lone request about three times slower: on the
// H200 a caller pinned to the CPU that takes the driver's first MSI-X vector waited 47-53 us for a
// 256-float relu, 14-17 us on every other CPU, and moving the vector moved the slow CPU with it
// (docs/BENCHMARKS.md, twenty-ninth session; DESIGN.md "The GPU's interrupt CPU"). The library
// reports these CPUs (DeviceInfo::interrupt_cpus, a log line) so that a user can keep
// latency-critical threads off them; it never moves a caller's thread.
//
// The parsers are pure (text in, CPUs out) so that they are tested on recorded text.
#include <string>
#include <string_view>
#include <vector>

namespace gpubatch::gpu {

// The CPUs of a Linux CPU list ("0-3,5,8-9"), ascending; empty for an empty or malformed list.
std::vector<int> parse_cpu_list(std::string_view list);

// "0-3,5" for {0, 1, 2, 3, 5}.
std::string format_cpu_list(const std::vector<int>& cpus);

// From /proc/interrupts: the IRQ numbers of the lines that name `pci_address` ("0000:00:06.0"),
// ascending; empty when none does (or the address is empty).
std::vector<int> irqs_of(std::string_view interrupts, std::string_view pci_address);

// From /proc/interrupts: the CPUs that took the interrupts of the lines naming `pci_address`,
// from their per-CPU counts summed over those lines: every CPU with at least a tenth of the
// busiest CPU's count, when the lines together counted at least `min_total`. Empty otherwise.
std::vector<int> busiest_interrupt_cpus(std::string_view interrupts, std::string_view pci_address,
                                        unsigned long long min_total = 100);

// This machine's CPUs for the device at `pci_address`: busiest_interrupt_cpus of /proc/interrupts
// where its vectors have fired, else the effective affinity of its first vector
// (/proc/irq/N/effective_affinity_list: where its next interrupt goes). Empty off Linux, for an
// empty address, or where the files cannot be read.
std::vector<int> interrupt_cpus_of(std::string_view pci_address);

}  // namespace gpubatch::gpu
