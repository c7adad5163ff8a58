// Which CPUs take a GPU's interrupts (src/gpu/interrupt_cpus.hpp), on text recorded on the H200
// (bench/results/s29-h200-irq.txt: the driver's first vector on CPU 14, 134,304 interrupts) and on
// made-up lines for the edges.
#include "gpu/interrupt_cpus.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpubatch::gpu {
namespace {

// /proc/interrupts of the H200 machine, 2026-12-02 (the first nine lines: header and the
// driver's eight MSI-X vectors).
const std::string kH200 =
    "           CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       CPU8       CPU9       CPU10      CPU11      CPU12      CPU13      CPU14      CPU15      \n"
    " 42:          0          0          0          0          0          0          0          0          0          0          0          0          0          0     134304          0 PCI-MSIX-0000:00:06.0   0-edge      nvidia\n"
    " 43:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   1-edge      nvidia\n"
    " 44:         14          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   2-edge      nvidia\n"
    " 45:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   3-edge      nvidia\n"
    " 46:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   4-edge      nvidia\n"
    " 47:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   5-edge      nvidia\n"
    " 48:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   6-edge      nvidia\n"
    " 49:          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0          0 PCI-MSIX-0000:00:06.0   7-edge      nvidia\n";

TEST(InterruptCpus, TheH200sFirstVectorIsOnCpu14) {
  EXPECT_EQ(busiest_interrupt_cpus(kH200, "0000:00:06.0"), std::vector<int>{14});
  EXPECT_EQ(irqs_of(kH200, "0000:00:06.0"), (std::vector<int>{42, 43, 44, 45, 46, 47, 48, 49}));
}

TEST(InterruptCpus, AnotherDevicesLinesAndAnEmptyAddressFindNothing) {
  EXPECT_TRUE(busiest_interrupt_cpus(kH200, "0000:00:07.0").empty());
  EXPECT_TRUE(busiest_interrupt_cpus(kH200, "").empty());
  EXPECT_TRUE(irqs_of(kH200, "").empty());
}

TEST(InterruptCpus, EveryCpuWithATenthOfTheBusiestCountsAcrossTheDevicesLines) {
  const std::string text =
      "      CPU0  CPU1  CPU2  CPU3\n"
      " 10:   500     0     0     0  PCI-MSIX-0000:41:00.0  0-edge  nvidia\n"
      " 11:     0    60     0     0  PCI-MSIX-0000:41:00.0  1-edge  nvidia\n"
      " 12:     0     0    49     0  PCI-MSIX-0000:41:00.0  2-edge  nvidia\n"
      " 13:     0     0     0  9000  PCI-MSIX-0000:42:00.0  0-edge  nvidia\n"
      "NMI:     1     1     1     1  Non-maskable interrupts\n";
  EXPECT_EQ(busiest_interrupt_cpus(text, "0000:41:00.0"), (std::vector<int>{0, 1}));  // 49 < 50
  EXPECT_EQ(busiest_interrupt_cpus(text, "0000:42:00.0"), std::vector<int>{3});
  EXPECT_EQ(irqs_of(text, "0000:41:00.0"), (std::vector<int>{10, 11, 12}));
}

TEST(InterruptCpus, TooFewInterruptsSayNothing) {
  const std::string text =
      "      CPU0  CPU1\n"
      " 42:     0    14  PCI-MSIX-0000:00:06.0  2-edge  nvidia\n";
  EXPECT_TRUE(busiest_interrupt_cpus(text, "0000:00:06.0").empty());  // under min_total
  EXPECT_EQ(busiest_interrupt_cpus(text, "0000:00:06.0", 1), std::vector<int>{1});
}

TEST(InterruptCpus, TheHeaderNamesTheCpusOfTheColumns) {
  // CPUs 1 and 2 offline: the columns are CPUs 0, 3 and 4.
  const std::string text =
      "      CPU0  CPU3  CPU4\n"
      " 42:     0     0   700  PCI-MSIX-0000:00:06.0  0-edge  nvidia\n";
  EXPECT_EQ(busiest_interrupt_cpus(text, "0000:00:06.0"), std::vector<int>{4});
}

TEST(InterruptCpus, MalformedTextFindsNothing) {
  EXPECT_TRUE(busiest_interrupt_cpus("", "0000:00:06.0").empty());
  EXPECT_TRUE(busiest_interrupt_cpus("no header\n 42: 5000 PCI-MSIX-0000:00:06.0\n", "0000:00:06.0").empty());
  // A line cut short or with a word among its counts counts only what came before.
  const std::string text =
      "      CPU0  CPU1\n"
      " 42:  4000  PCI-MSIX-0000:00:06.0\n"
      " xx:  9999  9999  PCI-MSIX-0000:00:06.0\n";
  EXPECT_EQ(busiest_interrupt_cpus(text, "0000:00:06.0"), std::vector<int>{0});
  EXPECT_EQ(irqs_of(text, "0000:00:06.0"), std::vector<int>{42});
}

TEST(InterruptCpus, CpuListsParseAndFormat) {
  EXPECT_EQ(parse_cpu_list("14\n"), std::vector<int>{14});
  EXPECT_EQ(parse_cpu_list("0-3,5,8-9"), (std::vector<int>{0, 1, 2, 3, 5, 8, 9}));
  EXPECT_EQ(parse_cpu_list("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_TRUE(parse_cpu_list("3-1").empty());
  EXPECT_TRUE(parse_cpu_list("a").empty());
  EXPECT_TRUE(parse_cpu_list("1,,2").empty());
  EXPECT_TRUE(parse_cpu_list("-1").empty());
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 5, 8, 9}), "0-3,5,8-9");
  EXPECT_EQ(format_cpu_list({14}), "14");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(InterruptCpus, ThisMachineAnswersWithoutThrowing) {
  // Lavapipe has no PCI address; a made-up one names no line of this machine's file.
  EXPECT_TRUE(interrupt_cpus_of("").empty());
  EXPECT_TRUE(interrupt_cpus_of("ffff:ff:1f.7").empty());
}

}  // namespace
}  // namespace gpubatch::gpu
