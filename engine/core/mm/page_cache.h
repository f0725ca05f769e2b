// The page cache above the virtual device, for buffered jobs (fio direct=0,
// seed 003). One file (the virtual device) cut into 4 KiB pages, as
// mm/filemap.c keeps a file's pages in its address_space:
//   - page states: absent, locked for I/O (PG_locked, !PG_uptodate), up to
//     date; PG_dirty / PG_writeback for buffered writes; PG_readahead, the
//     async-readahead marker (mm/readahead.c); PG_error after a failed read.
//   - the index is a two-level table of page pointers (the xarray's part:
//     one lookup costs a cache miss or two, not a hash-chain walk);
//   - a size limit with LRU eviction: pages go on the LRU list when added,
//     an access only sets PG_referenced (mark_page_accessed()), and reclaim
//     takes clean, unlocked, unpinned pages from the cold end, giving
//     referenced ones a second chance (a CLOCK approximation of the
//     kernel's active/inactive lists); dirty ones are left for write-back;
//   - page wait queues: loop-thread callbacks (struct wait_page_queue, the
//     io_uring async buffered read) and threads that sleep on a page (an
//     io-wq worker in wait_on_page_locked_killable()), hashed like the
//     kernel's page_waitqueue() table.
//
// Threads: the cache is shared by the loop thread and the buffered-I/O
// worker threads (buffered_io.h), so every method below except the
// constructor, stats() and waitqueue() must be called with mutex() held.
// Page data is read and written outside the lock by whoever holds a
// reference (get()/put()): a referenced page is never evicted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace mdsplit {

inline constexpr unsigned kPageShift = 12;
inline constexpr uint64_t kCachePageSize = uint64_t(1) << kPageShift;

enum PageFlag : uint32_t {
    kPgLocked = 1u << 0,      // PG_locked: I/O in progress (or being filled)
    kPgUptodate = 1u << 1,    // PG_uptodate
    kPgDirty = 1u << 2,       // PG_dirty
    kPgWriteback = 1u << 3,   // PG_writeback
    kPgReadahead = 1u << 4,   // PG_readahead: reaching it starts async readahead
    kPgError = 1u << 5,       // PG_error: the last read failed
    kPgReferenced = 1u << 6,  // PG_referenced: accessed since reclaim last looked
};

struct Page;

// An entry on a page's wait queue (struct wait_page_queue): `fn` runs on the
// loop thread (deferred) once the page's `bit` is clear.
struct PageWaiter {
    void (*fn)(PageWaiter* waiter) = nullptr;
    void* ctx = nullptr;
    uint32_t bit = kPgLocked;  // kPgLocked or kPgWriteback
    Page* page = nullptr;      // set while armed
    PageWaiter* next = nullptr;
};

struct Page {
    uint64_t index = 0;  // page offset in the file
    uint32_t flags = 0;
    uint32_t refcount = 0;    // pins: the I/O, a reader copying, a waiter
    uint32_t sleepers = 0;    // threads sleeping on this page
    uint8_t* data = nullptr;  // 4 KiB, page aligned
    uint64_t wb_batch = 0;    // the write-back batch it is in (fsync)
    uint32_t memcg_owner =
        0;  // pid of the task that dirtied it last (its cgroup owns the write-back)
    Page* lru_prev = nullptr;  // LRU: head = most recently used
    Page* lru_next = nullptr;
    Page* io_next = nullptr;  // the next page of the same bio while under I/O
    PageWaiter* waiters = nullptr;

    bool locked() const { return flags & kPgLocked; }
    bool uptodate() const { return flags & kPgUptodate; }
    bool dirty() const { return flags & kPgDirty; }
    bool writeback() const { return flags & kPgWriteback; }
};

struct PageCacheStats {
    uint64_t pages_added = 0;    // add_to_page_cache_lru()
    uint64_t evictions = 0;      // clean pages reclaimed for new ones
    uint64_t evict_skipped = 0;  // LRU pages passed over (dirty, locked, pinned)
    uint64_t over_limit = 0;     // pages added with nothing evictable (limit exceeded)
    uint64_t invalidated = 0;    // pages dropped by invalidate_clean()
    uint64_t high_water = 0;     // most pages held at once
    uint64_t data_bytes = 0;     // page memory allocated (never shrinks)
};

class PageCache {
public:
    // capacity_bytes: the size limit (rounded down to pages, at least 16
    // pages); file_bytes: the file (virtual device) size.
    // `folio_pages`: pages per large folio; page memory comes in slabs of
    // 512 folios, so the folios of one readahead window are adjacent.
    PageCache(uint64_t capacity_bytes, uint64_t file_bytes, uint64_t folio_pages = 1);
    ~PageCache();
    PageCache(const PageCache&) = delete;
    PageCache& operator=(const PageCache&) = delete;

    std::mutex& mutex() { return mutex_; }
    // page_waitqueue(): the condition variable threads sleep on for `page`.
    std::condition_variable& waitqueue(const Page* page) {
        return queues_[(reinterpret_cast<uintptr_t>(page) >> 6) % kWaitQueues];
    }

    // Wakes every sleeper (shutdown).
    void wake_all() {
        for (auto& q : queues_) q.notify_all();
    }

    uint64_t file_bytes() const { return file_bytes_; }
    uint64_t file_pages() const { return (file_bytes_ + kCachePageSize - 1) >> kPageShift; }
    // Bytes of the file inside page `index` (the last page may be partial).
    uint32_t page_bytes(uint64_t index) const;
    uint64_t capacity_pages() const { return capacity_pages_; }

    // ---- caller holds mutex() ----
    Page* find(uint64_t index) const {
        uint64_t hi = index >> kIndexShift;
        if (hi >= index_.size() || !index_[hi]) return nullptr;
        return index_[hi][index & (kIndexChunk - 1)];
    }
    // add_to_page_cache_lru(): a new page, locked, not up to date, with one
    // reference for the caller; nullptr when `index` is present (EEXIST) or
    // past the end of the file. May evict clean pages to stay in the limit.
    Page* add_locked(uint64_t index);
    void get(Page* page) { page->refcount++; }
    void put(Page* page) { page->refcount--; }
    // mark_page_accessed(): sets PG_referenced (reclaim gives it a second chance).
    void mark_accessed(Page* page) { page->flags |= kPgReferenced; }
    void set_dirty(Page* page);
    void clear_dirty(Page* page);
    void set_writeback(Page* page) {
        page->flags |= kPgWriteback;
        nr_writeback_++;
    }
    void end_writeback(Page* page) {
        page->flags &= ~kPgWriteback;
        nr_writeback_--;
    }
    // page_cache_next_miss() / page_cache_prev_miss(): the first index at or
    // after (before) `index`, at most `max` pages away, that holds no page.
    // next_miss returns index + max and prev_miss index - max when every
    // page is present (like the kernel; prev_miss wraps below 0).
    uint64_t next_miss(uint64_t index, uint64_t max) const;
    uint64_t prev_miss(uint64_t index, uint64_t max) const;
    // Dirty pages in index order (what write_cache_pages() walks).
    const std::set<uint64_t>& dirty_indices() const { return dirty_; }
    // invalidate_mapping_pages(): drops every clean, unlocked, unpinned
    // page that nobody waits on; returns how many.
    size_t invalidate_clean();
    // invalidate_inode_pages2_range() as far as it succeeds: drops the
    // pages @first..@last that are clean, unlocked and unpinned; returns
    // how many. (The caller has written back and waited first.)
    size_t invalidate_range(uint64_t first, uint64_t last);
    // True once eviction found only dirty pages: the caller should start
    // write-back (reclaim waking the flusher). Cleared on read.
    bool take_writeback_wanted() {
        bool w = writeback_wanted_;
        writeback_wanted_ = false;
        return w;
    }

    size_t nr_pages() const { return nr_pages_; }
    size_t nr_dirty() const { return dirty_.size(); }
    size_t nr_writeback() const { return nr_writeback_; }
    const PageCacheStats& stats() const { return stats_; }

private:
    static constexpr size_t kWaitQueues = 64;
    static constexpr size_t kSlabPages = 512;  // struct page arrays; data slabs: 512 folios
    static constexpr unsigned kIndexShift = 12;
    static constexpr uint64_t kIndexChunk = uint64_t(1) << kIndexShift;  // 16 MiB of file per chunk
    uint8_t* alloc_data();
    Page* alloc_page();
    void free_page(Page* page);
    bool evictable(const Page* page) const;
    void shrink_one();
    void lru_add_head(Page* page);
    void lru_remove(Page* page);
    void index_set(uint64_t index, Page* page);

    std::mutex mutex_;
    std::condition_variable queues_[kWaitQueues];
    uint64_t capacity_pages_;
    uint64_t file_bytes_;
    std::vector<std::unique_ptr<Page*[]>> index_;  // [index >> 12][index & 4095]
    size_t nr_pages_ = 0;
    std::set<uint64_t> dirty_;
    size_t nr_writeback_ = 0;
    Page* lru_head_ = nullptr;
    Page* lru_tail_ = nullptr;
    bool writeback_wanted_ = false;
    std::vector<std::unique_ptr<Page[]>> page_structs_;  // struct page arrays, kSlabPages each
    std::vector<Page*> free_pages_;
    std::vector<uint8_t*> slabs_;
    std::vector<uint8_t*> free_data_;
    size_t slab_pages_;
    size_t slab_used_;
    PageCacheStats stats_;
};

}  // namespace mdsplit
