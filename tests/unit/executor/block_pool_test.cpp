// BlockPool (include/gpubatch/detail/block_pool.hpp): blocks freed on one thread serve allocations on
// another; nothing is lost or handed out twice, also with many threads freeing while others
// allocate; a thread's own list goes back to the shared stack when the thread ends.
#include "gpubatch/detail/block_pool.hpp"

#include "gpubatch/detail/completion.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace gpubatch::detail {
namespace {

// Each test its own pool (a size no other test uses).
template <std::size_t Size>
using Pool = BlockPool<Size, alignof(void*)>;

// Frees `blocks` on a thread of its own, which ends (handing what it holds to the shared stack).
template <typename P>
void free_on_another_thread(const std::vector<void*>& blocks) {
  std::thread([&] {
    for (void* b : blocks) P::deallocate(b);
  }).join();
}

TEST(BlockPool, ABlockFreedOnAnotherThreadServesTheNextAllocation) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  using P = Pool<88>;
  void* a = P::allocate();
  free_on_another_thread<P>({a});
  EXPECT_EQ(P::shared_count_for_test(), 1u);
  EXPECT_EQ(P::allocate(), a);
  EXPECT_EQ(P::shared_count_for_test(), 0u);
  P::deallocate(a);
}

TEST(BlockPool, AThreadTakesTheWholeSharedStackAndServesItselfFromIt) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  using P = Pool<96>;
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(P::allocate());
  free_on_another_thread<P>(blocks);
  std::set<void*> again;
  for (int i = 0; i < 5; ++i) again.insert(P::allocate());
  EXPECT_EQ(again, std::set<void*>(blocks.begin(), blocks.end()));
  for (void* b : again) P::deallocate(b);
}

TEST(BlockPool, AThreadsOwnListGoesBackWhenItEnds) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  using P = Pool<104>;
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(P::allocate());
  free_on_another_thread<P>(blocks);
  ASSERT_EQ(P::shared_count_for_test(), 4u);
  // This thread takes all four into its own list, uses one, and ends with three in it.
  std::thread([] { P::deallocate(P::allocate()); }).join();
  EXPECT_EQ(P::shared_count_for_test(), 4u);
}

// A thread's frees reach the shared stack kBatch at a time (one push for them all); its own next
// allocation takes them back first.
TEST(BlockPool, AThreadsFreesReachTheSharedStackABatchAtATime) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  using P = Pool<112>;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < P::kBatch + 2; ++i) blocks.push_back(P::allocate());
  std::promise<void> one_short, batch_out, go_on, end;
  auto go = go_on.get_future();
  auto may_end = end.get_future();
  std::thread freer([&] {
    for (std::size_t i = 0; i + 1 < P::kBatch; ++i) P::deallocate(blocks[i]);
    one_short.set_value();
    go.wait();
    P::deallocate(blocks[P::kBatch - 1]);
    P::deallocate(blocks[P::kBatch]);
    // Its own allocation takes back the one it holds, not the shared batch.
    void* mine = P::allocate();
    EXPECT_EQ(mine, blocks[P::kBatch]);
    P::deallocate(mine);
    batch_out.set_value();
    may_end.wait();  // ending hands back the one it holds
  });
  one_short.get_future().wait();
  EXPECT_EQ(P::shared_count_for_test(), 0u);
  auto out = batch_out.get_future();
  go_on.set_value();
  out.wait();
  EXPECT_EQ(P::shared_count_for_test(), P::kBatch);
  end.set_value();
  freer.join();
  EXPECT_EQ(P::shared_count_for_test(), P::kBatch + 1);
  P::deallocate(blocks[P::kBatch + 1]);
}

// Past its cap the pool gives freed blocks back to the system: it never holds more than the cap,
// however many blocks were live at once.
TEST(BlockPool, PastItsCapAFreedBlockGoesBackToTheSystem) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  using P = BlockPool<72, alignof(void*), 72 * 10>;
  static_assert(P::kCap == 10);
  std::vector<void*> blocks;
  for (int i = 0; i < 15; ++i) blocks.push_back(P::allocate());
  EXPECT_EQ(P::made(), 15u);
  free_on_another_thread<P>(blocks);
  EXPECT_EQ(P::made(), 10u);
  EXPECT_EQ(P::shared_count_for_test(), 10u);
  // The ten kept serve the next ten allocations; the eleventh is new.
  std::vector<void*> again;
  for (int i = 0; i < 11; ++i) again.push_back(P::allocate());
  EXPECT_EQ(P::made(), 11u);
  free_on_another_thread<P>(again);
  EXPECT_EQ(P::made(), 10u);
  EXPECT_EQ(P::shared_count_for_test(), 10u);
}

// Producers allocate and stamp blocks, consumers check the stamp and free them: every block is
// live in one place at a time (a block handed out twice would be stamped twice and fail the check).
TEST(BlockPool, ManyThreadsNeverShareALiveBlock) {
  using P = Pool<120>;
  constexpr int kProducers = 4, kEach = 20000;
  struct Slot {
    std::atomic<std::uint64_t*> block{nullptr};
  };
  std::vector<Slot> slots(kProducers * kEach);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kProducers; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto* b = static_cast<std::uint64_t*>(P::allocate());
        const std::uint64_t stamp = std::uint64_t(t) * kEach + i;
        b[0] = stamp;
        b[14] = ~stamp;
        slots[stamp].block.store(b, std::memory_order_release);
      }
    });
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t s = t; s < slots.size(); s += 2) {
        std::uint64_t* b;
        while ((b = slots[s].block.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
        if (b[0] != s || b[14] != ~std::uint64_t(s)) bad.fetch_add(1);
        b[0] = b[14] = 0;
        P::deallocate(b);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(PooledAllocator, AllocateSharedMakesAndFreesThroughThePool) {
  struct Cell {
    std::uint64_t words[11];
    int* freed;
    ~Cell() { ++*freed; }
  };
  int freed = 0;
  const void* first = nullptr;
  {
    auto a = std::allocate_shared<Cell>(PooledAllocator<Cell>{}, Cell{{}, &freed});
    first = a.get();
    std::thread([b = std::move(a)]() mutable { b.reset(); }).join();
  }
  EXPECT_EQ(freed, 2);  // the temporary and the shared one
  auto again = std::allocate_shared<Cell>(PooledAllocator<Cell>{}, Cell{{}, &freed});
  if (kPoolBlocks) EXPECT_EQ(again.get(), first);  // the block the other thread freed
}

// A handler that names no allocator has its state (HandlerImpl) from the pool: freed on another
// thread, the block serves this thread's next handler of the same type.
TEST(PooledAllocator, AHandlerWithoutAnAllocatorOfItsOwnHasItsStateFromThePool) {
  if (!kPoolBlocks) GTEST_SKIP() << "blocks are not pooled under AddressSanitizer";
  int called = 0;
  auto handler = [&called](std::exception_ptr, std::vector<float>) { ++called; };
  const std::shared_ptr<ExecutorCore> none;
  auto first = make_handler_completion<std::vector<float>>(decltype(handler)(handler), CoreRef(none));
  auto& alt = std::get<HandlerCompletion<std::vector<float>>>(first);
  const void* block = alt.get();
  std::thread([&] { alt.release()->complete(nullptr, {}, Delivery{false, nullptr}); }).join();
  EXPECT_EQ(called, 1);
  auto second = make_handler_completion<std::vector<float>>(decltype(handler)(handler), CoreRef(none));
  auto& alt2 = std::get<HandlerCompletion<std::vector<float>>>(second);
  EXPECT_EQ(static_cast<const void*>(alt2.get()), block);
  alt2.release()->complete(nullptr, {}, Delivery{false, nullptr});
  EXPECT_EQ(called, 2);
}

}  // namespace
}  // namespace gpubatch::detail
