// page_cache.h: adding and finding pages, the size limit with LRU
// eviction (clean, unlocked, unpinned pages go; dirty ones ask for
// write-back), the dirty set, next/prev miss, invalidation, partial last
// page, and page frames adjacent for pages allocated together.
#include "core/mm/page_cache.h"

#include <gtest/gtest.h>

#include <mutex>

namespace mdsplit {
namespace {

// Adds page `index` and makes it up to date and unlocked, unreferenced.
Page* add_clean(PageCache& c, uint64_t index) {
    Page* p = c.add_locked(index);
    if (!p) return nullptr;
    p->flags = kPgUptodate;
    c.put(p);
    return p;
}

TEST(PageCacheTest, AddFindAndDuplicates) {
    PageCache c(1 << 20, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    EXPECT_EQ(c.capacity_pages(), 256u);
    Page* p = c.add_locked(7);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(p->locked());
    EXPECT_FALSE(p->uptodate());
    EXPECT_EQ(p->refcount, 1u);
    EXPECT_EQ(p->index, 7u);
    EXPECT_EQ(uintptr_t(p->data) % 4096, 0u);
    EXPECT_EQ(c.find(7), p);
    EXPECT_EQ(c.find(8), nullptr);
    EXPECT_EQ(c.add_locked(7), nullptr);                // EEXIST
    EXPECT_EQ(c.add_locked((1 << 30) >> 12), nullptr);  // past the end of the file
    EXPECT_EQ(c.nr_pages(), 1u);
}

TEST(PageCacheTest, LruEvictsTheColdestCleanPage) {
    PageCache c(16 * 4096, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    for (uint64_t i = 0; i < 16; i++) add_clean(c, i);
    c.mark_accessed(c.find(0));  // 0 becomes hot: 1 is now the coldest
    add_clean(c, 100);
    EXPECT_EQ(c.nr_pages(), 16u);
    EXPECT_NE(c.find(0), nullptr);
    EXPECT_EQ(c.find(1), nullptr);
    EXPECT_EQ(c.stats().evictions, 1u);
    add_clean(c, 101);
    EXPECT_EQ(c.find(2), nullptr);
}

TEST(PageCacheTest, LockedPinnedAndDirtyPagesStay) {
    PageCache c(16 * 4096, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    Page* locked = c.add_locked(0);  // still locked, referenced
    Page* pinned = add_clean(c, 1);
    c.get(pinned);
    Page* dirty = add_clean(c, 2);
    c.set_dirty(dirty);
    for (uint64_t i = 3; i < 16; i++) add_clean(c, i);
    add_clean(c, 50);
    EXPECT_EQ(c.find(0), locked);
    EXPECT_EQ(c.find(1), pinned);
    EXPECT_EQ(c.find(2), dirty);
    EXPECT_EQ(c.find(3), nullptr);  // the coldest evictable one
    EXPECT_TRUE(c.take_writeback_wanted());
    EXPECT_FALSE(c.take_writeback_wanted());
    EXPECT_EQ(c.nr_dirty(), 1u);
    EXPECT_EQ(*c.dirty_indices().begin(), 2u);
    c.clear_dirty(dirty);
    EXPECT_EQ(c.nr_dirty(), 0u);
}

TEST(PageCacheTest, OverTheLimitWhenNothingCanGo) {
    PageCache c(16 * 4096, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    for (uint64_t i = 0; i < 20; i++) ASSERT_NE(c.add_locked(i), nullptr);  // all locked
    EXPECT_EQ(c.nr_pages(), 20u);
    EXPECT_EQ(c.stats().over_limit, 4u);
    EXPECT_EQ(c.stats().high_water, 20u);
}

TEST(PageCacheTest, MissesAroundAnIndex) {
    PageCache c(1 << 20, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    for (uint64_t i = 10; i < 20; i++) add_clean(c, i);
    EXPECT_EQ(c.next_miss(10, 32), 20u);
    EXPECT_EQ(c.next_miss(12, 4), 16u);  // none within 4: index + max
    EXPECT_EQ(c.next_miss(25, 4), 25u);
    EXPECT_EQ(c.prev_miss(19, 32), 9u);
    EXPECT_EQ(c.prev_miss(19, 3), 16u);
    for (uint64_t i = 0; i < 10; i++) add_clean(c, i);
    EXPECT_EQ(c.prev_miss(19, 32), ~uint64_t(0));  // cached down to page 0
}

TEST(PageCacheTest, InvalidateDropsOnlyUnusedCleanPages) {
    PageCache c(1 << 20, 1 << 30);
    std::lock_guard<std::mutex> l(c.mutex());
    for (uint64_t i = 0; i < 8; i++) add_clean(c, i);
    c.set_dirty(c.find(1));
    c.get(c.find(2));
    c.find(3)->flags |= kPgLocked;
    c.set_writeback(c.find(4));
    EXPECT_EQ(c.invalidate_clean(), 4u);
    EXPECT_EQ(c.nr_pages(), 4u);
    for (uint64_t i : {1, 2, 3, 4}) EXPECT_NE(c.find(i), nullptr) << i;
    EXPECT_EQ(c.nr_writeback(), 1u);
    c.end_writeback(c.find(4));
    EXPECT_EQ(c.nr_writeback(), 0u);
}

TEST(PageCacheTest, PartialLastPageAndAdjacentFrames) {
    PageCache c(1 << 20, 10 * 4096 + 1024);
    std::lock_guard<std::mutex> l(c.mutex());
    EXPECT_EQ(c.file_pages(), 11u);
    EXPECT_EQ(c.page_bytes(9), 4096u);
    EXPECT_EQ(c.page_bytes(10), 1024u);
    EXPECT_EQ(c.page_bytes(11), 0u);
    Page* a = c.add_locked(3);
    Page* b = c.add_locked(4);
    EXPECT_EQ(b->data, a->data + 4096);  // one readahead window, one run of memory
}

}  // namespace
}  // namespace mdsplit
