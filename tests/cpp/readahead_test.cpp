// mm/readahead.c as readahead.h implements it, on a fake page cache: the
// initial window and ramp-up sizes, the PG_readahead marker placement,
// sequential detection (expected index, prev_pos, cached history), lone
// random reads, ra_pages = 0 (nothing, or with 324bcf54 a forced 1-page
// readahead), FMODE_RANDOM, oversize reads and the end of the file; and
// generic_fadvise() (fadvise.h), the advice fio gives a job's file.
#include "core/mm/readahead.h"

#include "core/mm/fadvise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace mdsplit {
namespace {

struct Window {
    RaKind kind;
    uint64_t start, nr, async;
    bool operator==(const Window&) const = default;
};

void PrintTo(const Window& w, std::ostream* os) {
    *os << ra_kind_name(w.kind) << "{" << w.start << "+" << w.nr << " async " << w.async << "}";
}

class FakeCache final : public ReadaheadControl {
public:
    explicit FakeCache(uint64_t pages) : pages_(pages) {}
    bool present(uint64_t index) override { return cached.count(index); }
    uint64_t file_pages() override { return pages_; }
    bool add_page(uint64_t index, bool mark) override {
        cached.insert(index);
        added.push_back(index);
        if (mark) marked.insert(index);
        batch++;
        return true;
    }
    void read_pages() override {
        if (batch) batches.push_back(batch);
        batch = 0;
    }
    uint64_t next_miss(uint64_t index, uint64_t max) override {
        for (uint64_t i = 0; i < max; i++)
            if (!cached.count(index + i)) return index + i;
        return index + max;
    }
    uint64_t prev_miss(uint64_t index, uint64_t max) override {
        for (uint64_t i = 0; i < max; i++) {
            if (!cached.count(index - i)) return index - i;
            if (index == i) return ~uint64_t(0);
        }
        return index - max;
    }
    void window(RaKind k, uint64_t start, uint64_t nr, uint64_t async) override {
        windows.push_back(Window{k, start, nr, async});
    }

    // A reader of one page at `index` (generic_file_buffered_read's calls).
    void read_page(FileRaState& ra, uint64_t index, uint64_t req = 1) {
        if (!cached.count(index)) {
            page_cache_sync_ra(*this, ra, index, req, ra.fmode_random, false);
        } else if (marked.count(index)) {
            marked.erase(index);
            page_cache_async_ra(*this, ra, index, req, false);
        }
        ra.prev_pos = index << 12;
    }

    std::set<uint64_t> cached, marked;
    std::vector<uint64_t> added;
    std::vector<uint64_t> batches;
    std::vector<Window> windows;
    uint64_t batch = 0;

private:
    uint64_t pages_;
};

FileRaState ra_state(uint64_t ra_pages) {
    FileRaState ra;
    ra.ra_pages = ra_pages;
    return ra;
}

TEST(ReadaheadTest, InitialAndNextWindowSizes) {
    // max = 32 pages (128 KiB)
    EXPECT_EQ(get_init_ra_size(1, 32), 4u);  // <= max/32: x4
    EXPECT_EQ(get_init_ra_size(2, 32), 4u);  // <= max/4: x2
    EXPECT_EQ(get_init_ra_size(3, 32), 8u);  // rounded up to 4, x2
    EXPECT_EQ(get_init_ra_size(8, 32), 16u);
    EXPECT_EQ(get_init_ra_size(9, 32), 32u);  // > max/4: max
    FileRaState ra = ra_state(32);
    ra.size = 1;
    EXPECT_EQ(get_next_ra_size(ra, 32), 4u);  // < max/16: x4
    ra.size = 4;
    EXPECT_EQ(get_next_ra_size(ra, 32), 8u);  // <= max/2: x2
    ra.size = 16;
    EXPECT_EQ(get_next_ra_size(ra, 32), 32u);
    ra.size = 32;
    EXPECT_EQ(get_next_ra_size(ra, 32), 32u);
}

TEST(ReadaheadTest, SequentialStreamRampsUpWithTheMarker) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(32);
    for (uint64_t i = 0; i < 100; i++) c.read_page(ra, i);
    std::vector<Window> want = {
        {RaKind::Sync, 0, 4, 3},   // initial: 4 pages, marker on page 1
        {RaKind::Async, 4, 8, 8},  // marker hit at 1: next window, marker on its first page
        {RaKind::Async, 12, 16, 16}, {RaKind::Async, 28, 32, 32},  {RaKind::Async, 60, 32, 32},
        {RaKind::Async, 92, 32, 32}, {RaKind::Async, 124, 32, 32},  // the marker on page 92
    };
    EXPECT_EQ(c.windows, want);
    EXPECT_EQ(c.batches, (std::vector<uint64_t>{4, 8, 16, 32, 32, 32, 32}));
    EXPECT_EQ(c.marked, (std::set<uint64_t>{124}));
    for (uint64_t i = 0; i < 156; i++) EXPECT_TRUE(c.cached.count(i)) << i;
}

TEST(ReadaheadTest, SequentialMissAfterPrevPosStartsAWindow) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(32);
    ra.prev_pos = 999ull << 12;  // the previous read ended in page 999
    page_cache_sync_ra(c, ra, 1000, 2, false, false);
    ASSERT_EQ(c.windows.size(), 1u);
    // initial window: get_init_ra_size(2, 32) = 4, async = 4 - 2
    EXPECT_EQ(c.windows[0], (Window{RaKind::Sync, 1000, 4, 2}));
    EXPECT_EQ(ra.start, 1000u);
}

TEST(ReadaheadTest, LoneRandomReadReadsJustWhatWasAsked) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(32);
    page_cache_sync_ra(c, ra, 5000, 1, false, false);
    page_cache_sync_ra(c, ra, 70, 2, false, false);
    EXPECT_EQ(c.windows,
              (std::vector<Window>{{RaKind::Random, 5000, 1, 0}, {RaKind::Random, 70, 2, 0}}));
    EXPECT_EQ(c.added, (std::vector<uint64_t>{5000, 70, 71}));
    EXPECT_TRUE(c.marked.empty());
    EXPECT_EQ(ra.size, 0u);  // the state is not polluted
}

TEST(ReadaheadTest, CachedHistoryMeansAStream) {
    FakeCache c(1 << 20);
    for (uint64_t i = 100; i < 110; i++) c.cached.insert(i);
    FileRaState ra = ra_state(32);
    page_cache_sync_ra(c, ra, 110, 1, false, false);  // try_context_readahead()
    ASSERT_EQ(c.windows.size(), 1u);
    EXPECT_EQ(c.windows[0], (Window{RaKind::Sync, 110, 11, 1}));  // history 10 + req 1, async 1
}

TEST(ReadaheadTest, ReadaheadOffDoesNothingBefore324bcf54) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(0);
    page_cache_sync_ra(c, ra, 10, 4, false, false);
    c.cached.insert(11);
    c.marked.insert(11);
    page_cache_async_ra(c, ra, 11, 4, false);
    EXPECT_TRUE(c.windows.empty());
    EXPECT_TRUE(c.added.empty());
}

TEST(ReadaheadTest, ReadaheadOffForcesOnePageWith324bcf54) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(0);
    page_cache_sync_ra(c, ra, 10, 4, false, true);
    EXPECT_EQ(c.windows, (std::vector<Window>{{RaKind::Forced, 10, 1, 0}}));
    EXPECT_EQ(c.added, (std::vector<uint64_t>{10}));
    EXPECT_EQ(c.batches, (std::vector<uint64_t>{1}));
}

TEST(ReadaheadTest, FmodeRandomForcesTheRequestedSize) {
    FakeCache c(1 << 20);
    c.io_pages = 64;
    FileRaState ra = ra_state(32);
    page_cache_sync_ra(c, ra, 0, 16, true, false);
    EXPECT_EQ(c.windows, (std::vector<Window>{{RaKind::Forced, 0, 16, 0}}));
    c.windows.clear();
    page_cache_sync_ra(c, ra, 1000, 100, true, false);  // capped at max(io_pages, ra_pages)
    EXPECT_EQ(c.windows, (std::vector<Window>{{RaKind::Forced, 1000, 64, 0}}));
}

// POSIX_FADV_SEQUENTIAL: the window doubles (bdi->ra_pages * 2), FMODE_RANDOM clears.
TEST(FadviseTest, SequentialDoublesTheWindow) {
    FileRaState ra = ra_state(32);
    ra.fmode_random = true;
    generic_fadvise(ra, 32, Fadvise::Sequential);
    EXPECT_EQ(ra.ra_pages, 64u);
    EXPECT_FALSE(ra.fmode_random);
}

// POSIX_FADV_RANDOM: FMODE_RANDOM set, the window left as it was.
TEST(FadviseTest, RandomSetsFmodeRandomOnly) {
    FileRaState ra = ra_state(64);
    generic_fadvise(ra, 32, Fadvise::Random);
    EXPECT_TRUE(ra.fmode_random);
    EXPECT_EQ(ra.ra_pages, 64u);
}

// POSIX_FADV_NORMAL: the device's window again, FMODE_RANDOM cleared; no advice: nothing.
TEST(FadviseTest, NormalRestoresTheDeviceWindowAndNoneChangesNothing) {
    FileRaState ra = ra_state(64);
    ra.fmode_random = true;
    generic_fadvise(ra, 32, Fadvise::None);
    EXPECT_EQ(ra.ra_pages, 64u);
    EXPECT_TRUE(ra.fmode_random);
    generic_fadvise(ra, 32, Fadvise::Normal);
    EXPECT_EQ(ra.ra_pages, 32u);
    EXPECT_FALSE(ra.fmode_random);
}

// A stream on a file advised SEQUENTIAL ramps up to twice the device's window.
TEST(FadviseTest, SequentialStreamRampsToTwiceTheWindow) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(32);
    generic_fadvise(ra, 32, Fadvise::Sequential);
    for (uint64_t i = 0; i < 200; i++) c.read_page(ra, i);
    uint64_t largest = 0;
    for (const Window& w : c.windows) largest = std::max(largest, w.nr);
    EXPECT_EQ(largest, 64u);
}

// A stream on a file advised RANDOM reads each miss as asked: one page, no marker.
TEST(FadviseTest, RandomAdviceReadsEachMissAsAsked) {
    FakeCache c(1 << 20);
    FileRaState ra = ra_state(32);
    generic_fadvise(ra, 32, Fadvise::Random);
    for (uint64_t i = 0; i < 10; i++) c.read_page(ra, i);
    ASSERT_EQ(c.windows.size(), 10u);
    for (uint64_t i = 0; i < 10; i++) EXPECT_EQ(c.windows[i], (Window{RaKind::Forced, i, 1, 0}));
    EXPECT_TRUE(c.marked.empty());
}

TEST(ReadaheadTest, OversizeReadUsesTheDeviceIoSize) {
    FakeCache c(1 << 20);
    c.io_pages = 64;
    FileRaState ra = ra_state(32);
    ra.prev_pos = 1ull << 40;
    page_cache_sync_ra(c, ra, 500, 48, false, false);  // 48 > 32: max becomes min(48, 64)
    ASSERT_EQ(c.windows.size(), 1u);
    EXPECT_EQ(c.windows[0], (Window{RaKind::Random, 500, 48, 0}));
    c.windows.clear();
    page_cache_sync_ra(c, ra, 0, 48, false, false);  // from the start of the file: initial, max 48
    EXPECT_EQ(c.windows[0], (Window{RaKind::Sync, 0, 48, 24}));
}

TEST(ReadaheadTest, PresentPagesSplitTheBatchAndTheFileEndClips) {
    FakeCache c(20);
    c.cached.insert(2);
    FileRaState ra = ra_state(32);
    page_cache_sync_ra(c, ra, 0, 1, false, false);  // initial window 4: pages 0,1,(2 present),3
    EXPECT_EQ(c.added, (std::vector<uint64_t>{0, 1, 3}));
    EXPECT_EQ(c.batches, (std::vector<uint64_t>{2, 1}));
    c.added.clear();
    c.windows.clear();
    do_page_cache_ra(c, 16, 32, 0);  // clipped at the last page (19)
    EXPECT_EQ(c.added, (std::vector<uint64_t>{16, 17, 18, 19}));
    EXPECT_EQ(c.windows[0].nr, 4u);
    c.added.clear();
    do_page_cache_ra(c, 20, 4, 0);  // past the end: nothing
    EXPECT_TRUE(c.added.empty());
}

TEST(ReadaheadTest, MarkerWithoutStateRampsFromTheCache) {
    // Interleaved streams: a marked page with a stale ra state.
    FakeCache c(1 << 20);
    for (uint64_t i = 300; i < 308; i++) c.cached.insert(i);
    FileRaState ra = ra_state(32);
    ra.start = 5;
    ra.size = 4;
    ra.async_size = 4;
    page_cache_async_ra(c, ra, 300, 1, false);
    ASSERT_EQ(c.windows.size(), 1u);
    // start = the next miss, 308; size = (308 - 300) + req 1 = 9, ramped to 18
    EXPECT_EQ(c.windows[0], (Window{RaKind::Async, 308, 18, 18}));
}

}  // namespace
}  // namespace mdsplit
