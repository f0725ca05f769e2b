#include "core/mm/page_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace mdsplit {

namespace {
constexpr uint64_t kMinPages = 16;
constexpr size_t kShrinkScan = 32;  // unreclaimable LRU pages passed over per page reclaimed
constexpr size_t kShrinkReferenced = 1024;  // referenced pages given a second chance per page
}  // namespace

PageCache::PageCache(uint64_t capacity_bytes, uint64_t file_bytes, uint64_t folio_pages)
    : capacity_pages_(std::max<uint64_t>(capacity_bytes >> kPageShift, kMinPages)),
      file_bytes_(file_bytes),
      slab_pages_(kSlabPages * folio_pages),
      slab_used_(slab_pages_) {
    index_.resize(size_t((file_pages() + kIndexChunk - 1) >> kIndexShift));
}

PageCache::~PageCache() {
    for (uint8_t* slab : slabs_) munmap(slab, slab_pages_ * kCachePageSize);
}

uint32_t PageCache::page_bytes(uint64_t index) const {
    uint64_t start = index << kPageShift;
    if (start >= file_bytes_) return 0;
    return uint32_t(std::min<uint64_t>(kCachePageSize, file_bytes_ - start));
}

// The buddy allocator's part: 4 KiB page frames carved from slabs of 512 folios, so
// pages allocated together for one readahead window are usually adjacent in
// memory (and their I/O can go out as one bio, as the kernel's would).
uint8_t* PageCache::alloc_data() {
    if (!free_data_.empty()) {
        uint8_t* p = free_data_.back();
        free_data_.pop_back();
        return p;
    }
    if (slab_used_ == slab_pages_) {
        void* slab = mmap(nullptr, slab_pages_ * kCachePageSize, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (slab == MAP_FAILED) throw std::bad_alloc();
        slabs_.push_back(static_cast<uint8_t*>(slab));
        slab_used_ = 0;
        stats_.data_bytes += slab_pages_ * kCachePageSize;
    }
    return slabs_.back() + (slab_used_++) * kCachePageSize;
}

Page* PageCache::alloc_page() {
    if (free_pages_.empty()) {
        page_structs_.push_back(std::make_unique<Page[]>(kSlabPages));
        Page* array = page_structs_.back().get();
        for (size_t i = kSlabPages; i > 0; i--) free_pages_.push_back(&array[i - 1]);
    }
    Page* page = free_pages_.back();
    free_pages_.pop_back();
    uint8_t* data = alloc_data();
    *page = Page{};
    page->data = data;
    return page;
}

void PageCache::index_set(uint64_t index, Page* page) {
    auto& chunk = index_[size_t(index >> kIndexShift)];
    if (!chunk) chunk = std::make_unique<Page*[]>(kIndexChunk);  // value-initialised: null
    chunk[index & (kIndexChunk - 1)] = page;
}

void PageCache::free_page(Page* page) {
    index_set(page->index, nullptr);
    nr_pages_--;
    lru_remove(page);
    free_data_.push_back(page->data);
    page->data = nullptr;
    free_pages_.push_back(page);
}

void PageCache::lru_add_head(Page* page) {
    page->lru_prev = nullptr;
    page->lru_next = lru_head_;
    if (lru_head_)
        lru_head_->lru_prev = page;
    else
        lru_tail_ = page;
    lru_head_ = page;
}

void PageCache::lru_remove(Page* page) {
    if (page->lru_prev)
        page->lru_prev->lru_next = page->lru_next;
    else
        lru_head_ = page->lru_next;
    if (page->lru_next)
        page->lru_next->lru_prev = page->lru_prev;
    else
        lru_tail_ = page->lru_prev;
    page->lru_prev = page->lru_next = nullptr;
}

bool PageCache::evictable(const Page* page) const {
    return !(page->flags & (kPgLocked | kPgDirty | kPgWriteback)) && page->refcount == 0 &&
           page->sleepers == 0 && !page->waiters;
}

// shrink_page_list() for one page: reclaim the coldest clean page. A
// referenced page loses the bit and goes back to the hot end (a second
// chance); pages that cannot go are rotated too (dirty ones ask for
// write-back).
void PageCache::shrink_one() {
    size_t scanned = 0, referenced = 0;
    while (lru_tail_ && scanned < kShrinkScan) {
        Page* page = lru_tail_;
        lru_remove(page);
        if ((page->flags & kPgReferenced) && referenced < kShrinkReferenced) {
            page->flags &= ~kPgReferenced;
            referenced++;
            lru_add_head(page);
            continue;
        }
        if (evictable(page)) {
            lru_add_head(page);  // free_page() takes it off again
            free_page(page);
            stats_.evictions++;
            return;
        }
        if (page->flags & kPgDirty) writeback_wanted_ = true;
        stats_.evict_skipped++;
        scanned++;
        lru_add_head(page);
    }
    stats_.over_limit++;
}

Page* PageCache::add_locked(uint64_t index) {
    if ((index << kPageShift) >= file_bytes_) return nullptr;
    if (find(index)) return nullptr;
    if (nr_pages_ >= capacity_pages_) shrink_one();
    Page* page = alloc_page();
    page->index = index;
    page->flags = kPgLocked;
    page->refcount = 1;
    index_set(index, page);
    nr_pages_++;
    lru_add_head(page);
    stats_.pages_added++;
    if (nr_pages_ > stats_.high_water) stats_.high_water = nr_pages_;
    return page;
}

void PageCache::set_dirty(Page* page) {
    if (page->flags & kPgDirty) return;
    page->flags |= kPgDirty;
    dirty_.insert(page->index);
}

void PageCache::clear_dirty(Page* page) {
    if (!(page->flags & kPgDirty)) return;
    page->flags &= ~kPgDirty;
    dirty_.erase(page->index);
}

uint64_t PageCache::next_miss(uint64_t index, uint64_t max) const {
    for (uint64_t i = 0; i < max; i++)
        if (!find(index + i)) return index + i;
    return index + max;
}

uint64_t PageCache::prev_miss(uint64_t index, uint64_t max) const {
    for (uint64_t i = 0; i < max; i++) {
        if (!find(index - i)) return index - i;
        if (index - i == 0) return uint64_t(-1);  // every page down to 0 is present
    }
    return index - max;
}

size_t PageCache::invalidate_clean() {
    size_t dropped = 0;
    for (Page* page = lru_head_; page;) {
        Page* next = page->lru_next;
        if (evictable(page)) {
            free_page(page);
            dropped++;
        }
        page = next;
    }
    stats_.invalidated += dropped;
    return dropped;
}

size_t PageCache::invalidate_range(uint64_t first, uint64_t last) {
    size_t dropped = 0;
    for (uint64_t i = first;; i++) {
        Page* page = find(i);
        if (page && evictable(page)) {
            free_page(page);
            dropped++;
        }
        if (i == last) break;
    }
    stats_.invalidated += dropped;
    return dropped;
}

}  // namespace mdsplit
