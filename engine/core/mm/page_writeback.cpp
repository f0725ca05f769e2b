// Follows mm/page-writeback.c (5.9): write_cache_pages() (write-back of
// dirty pages from mapping->writeback_index, cyclically),
// end_page_writeback() accounting, balance_dirty_pages()' throttled
// writers, and what waits for write-back: fsync (file_write_and_wait_range),
// sync(). The contract is in page_writeback.h.
#include "core/mm/page_writeback.h"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>

namespace mdsplit {

PageWriteback::PageWriteback(EventLoop& loop, PageCache& cache, Filemap& filemap,
                             BufferedStats& stats, WritebackClient& client)
    : loop_(loop),
      cache_(cache),
      filemap_(filemap),
      stats_(stats),
      client_(client),
      dirty_background_(std::max<uint64_t>(cache.capacity_pages() / 10, 8)),
      dirty_limit_(std::max<uint64_t>(cache.capacity_pages() / 5, 16)) {}

void PageWriteback::write_endio(Bio* bio) {
    auto* self = reinterpret_cast<PageWriteback*>(bio->tag);
    bool failed = bio->error != 0;
    Filemap::Wakeups wake;
    {
        std::lock_guard<std::mutex> lock(self->cache_.mutex());
        for (Page* p = static_cast<Page*>(bio->private_data); p;) {
            Page* next = p->io_next;
            p->io_next = nullptr;
            if (failed) {
                p->flags |= kPgError;  // mapping_set_error(): fsync reports it
                self->wb_errors_++;    // errseq_set(): a new error, not yet seen
                self->wb_err_seen_ = false;
                self->stats_.writeback_errors++;
            }
            self->filemap_.end_writeback_locked(p, wake);
            auto it = self->wb_outstanding_.find(p->wb_batch);
            if (it != self->wb_outstanding_.end() && --it->second == 0)
                self->wb_outstanding_.erase(it);
            self->cache_.put(p);
            p = next;
        }
    }
    bio->pool->put(bio);
    self->filemap_.fire_waiters(wake, true);
    // fsync completions, throttled writers and more write-back.
    self->wakeup_flusher();
}

void PageWriteback::wakeup_flusher() {
    if (writeback_scheduled_) return;
    writeback_scheduled_ = true;
    loop_.defer(&PageWriteback::writeback_cb, this);
}

// write_cache_pages()
uint64_t PageWriteback::start_writeback(size_t max_pages, bool sync) {
    return write_cache_pages(max_pages, sync, 0, kNoIndex);
}

// write_cache_pages() with wbc->range_cyclic (from the writeback index, and
// around) when [first, end) is the whole file, else of that range only,
// leaving the writeback index alone (range_cyclic = 0).
uint64_t PageWriteback::write_cache_pages(size_t max_pages, bool sync, uint64_t first,
                                          uint64_t end) {
    const bool cyclic = first == 0 && end == kNoIndex;
    std::vector<Page*> pages;
    uint64_t batch;
    {
        std::lock_guard<std::mutex> lock(cache_.mutex());
        const std::set<uint64_t>& dirty = cache_.dirty_indices();
        if (dirty.empty()) return wb_seq_;
        batch = ++wb_seq_;
        auto take = [&](uint64_t from, uint64_t to) {
            auto it = dirty.lower_bound(from);
            while (it != dirty.end() && *it < to && pages.size() < max_pages) {
                uint64_t index = *it;
                ++it;  // clear_dirty() erases index
                Page* p = cache_.find(index);
                if (!p || p->locked() || p->writeback()) continue;
                cache_.clear_dirty(p);
                cache_.set_writeback(p);
                cache_.get(p);
                p->wb_batch = batch;
                pages.push_back(p);
            }
        };
        if (cyclic) {
            take(wb_cursor_, kNoIndex);
            take(0, wb_cursor_);
        } else {
            take(first, end);
        }
        if (pages.empty()) return --wb_seq_;  // nothing could start: wait for earlier batches
        if (cyclic) wb_cursor_ = pages.back()->index + 1;
        wb_outstanding_[batch] += pages.size();
        stats_.writeback_pages += pages.size();
    }
    // Each owner's pages in bios of their own, charged to its cgroup
    // (wbc_init_bio() -> bio_associate_blkg_from_css(wbc->wb->blkcg_css),
    // fs/fs-writeback.c, 5.9): the owner is the page's, where the kernel
    // charges the inode's wb and moves it to the cgroup owning most of its
    // pages (wbc_account_cgroup_owner() -> inode_switch_wbs()).
    std::stable_sort(pages.begin(), pages.end(), [](const Page* a, const Page* b) {
        return a->memcg_owner != b->memcg_owner ? a->memcg_owner < b->memcg_owner
                                                : a->index < b->index;
    });
    for (size_t i = 0; i < pages.size();) {
        size_t j = i;
        while (j < pages.size() && pages[j]->memcg_owner == pages[i]->memcg_owner) j++;
        std::vector<Page*> own(pages.begin() + i, pages.begin() + j);
        filemap_.submit_pages(own, Op::Write, own.front()->memcg_owner, sync,
                              &PageWriteback::write_endio, this);
        i = j;
    }
    return batch;
}

void PageWriteback::writeback_cb(void* arg, uint64_t) {
    auto* self = static_cast<PageWriteback*>(arg);
    self->writeback_scheduled_ = false;
    self->check_fsyncs();
    self->check_throttled();
    bool wanted;
    {
        std::lock_guard<std::mutex> lock(self->cache_.mutex());
        wanted = self->cache_.take_writeback_wanted();
    }
    if (wanted) self->start_writeback(kWritebackChunk, false);
}

void PageWriteback::check_throttled() {
    while (!throttled_.empty()) {
        size_t used, writeback;
        {
            std::lock_guard<std::mutex> lock(cache_.mutex());
            writeback = cache_.nr_writeback();
            used = cache_.nr_dirty() + writeback;
        }
        if (used > dirty_limit_) {
            if (writeback == 0) start_writeback(kWritebackChunk, false);
            return;
        }
        Kiocb* k = throttled_.front();
        throttled_.pop_front();
        client_.writeback_wait_done(*k, 0);
    }
}

bool PageWriteback::writeback_done_through(uint64_t batch) const {
    return wb_outstanding_.empty() || wb_outstanding_.begin()->first > batch;
}

void PageWriteback::check_fsyncs() {
    for (size_t i = 0; i < fsyncs_.size();) {
        if (!writeback_done_through(fsyncs_[i].batch)) {
            i++;
            continue;
        }
        Kiocb* k = fsyncs_[i].k;
        fsyncs_.erase(fsyncs_.begin() + long(i));
        client_.writeback_wait_done(*k, take_error(k->pid));
    }
}

// errseq_sample(): the sequence as it stands once seen, else 0 (an error
// nobody has seen is news to a file opened after it too).
uint64_t PageWriteback::errseq_sample() const { return wb_err_seen_ ? wb_errors_ : 0; }

void PageWriteback::open_file(uint32_t pid) {
    if (pid == last_open_pid_) return;  // the same job again
    std::lock_guard<std::mutex> lock(cache_.mutex());
    wb_err_since_.try_emplace(pid, errseq_sample());
    last_open_pid_ = pid;
}

// file_check_and_advance_wb_err() -> errseq_check_and_advance(): -EIO once
// per file for the write-back errors since its sample, which it advances.
int32_t PageWriteback::take_error(uint32_t pid) {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    uint64_t& since = wb_err_since_.try_emplace(pid, errseq_sample()).first->second;
    if (since == wb_errors_) return 0;
    since = wb_errors_;
    wb_err_seen_ = true;
    wb_errors_reported_ = wb_errors_;
    return -EIO;
}

bool PageWriteback::fsync(Kiocb& k, int32_t& error) {
    uint64_t batch = start_writeback(std::numeric_limits<size_t>::max(), true);
    if (writeback_done_through(batch)) {
        error = take_error(k.pid);
        return true;
    }
    fsyncs_.push_back(FsyncWaiter{&k, batch});
    return false;
}

bool PageWriteback::sync_range(Kiocb& k, uint64_t first, uint64_t last, unsigned flags,
                               int32_t& error) {
    constexpr unsigned kWriteAndWait =
        kSyncFileRangeWaitBefore | kSyncFileRangeWrite | kSyncFileRangeWaitAfter;
    uint64_t before = wb_seq_;  // the batches WAIT_BEFORE waits for
    uint64_t batch = before;
    if (flags & kSyncFileRangeWrite)
        batch = write_cache_pages(std::numeric_limits<size_t>::max(),
                                  (flags & kWriteAndWait) == kWriteAndWait, first, last + 1);
    if (!(flags & (kSyncFileRangeWaitBefore | kSyncFileRangeWaitAfter))) {
        error = 0;
        return true;
    }
    uint64_t target = (flags & kSyncFileRangeWaitAfter) ? batch : before;
    if (writeback_done_through(target)) {
        error = take_error(k.pid);
        return true;
    }
    fsyncs_.push_back(FsyncWaiter{&k, target});
    return false;
}

void PageWriteback::run_until(bool (*done)(PageWriteback*)) {
    for (;;) {
        loop_.run_ready();
        if (done(this)) return;
        if (!loop_.wait_for_next()) {
            loop_.run_ready();
            if (done(this)) return;
            throw std::runtime_error("mdsplit: page cache write-back did not finish");
        }
    }
}

void PageWriteback::sync() {
    stats_.syncs++;
    for (int round = 0; round < 16; round++) {
        sync_target_ = start_writeback(std::numeric_limits<size_t>::max(), true);
        run_until([](PageWriteback* self) {
            return self->writeback_done_through(self->sync_target_) && self->throttled_.empty();
        });
        std::lock_guard<std::mutex> lock(cache_.mutex());
        if (cache_.nr_dirty() == 0) return;
    }
}

uint64_t PageWriteback::take_silent_errors() {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    uint64_t seen = std::max(wb_errors_reported_, wb_errors_counted_);
    wb_errors_counted_ = wb_errors_;
    return wb_errors_ - seen;
}

void PageWriteback::write_and_wait_range(uint64_t first, uint64_t last) {
    range_first_ = first;
    range_last_ = last;
    for (int round = 0; round < 16; round++) {
        if (!range_dirty() && range_settled()) return;  // the common case: nothing to do
        write_cache_pages(std::numeric_limits<size_t>::max(), true, first, last + 1);
        run_until([](PageWriteback* self) { return self->range_settled(); });
    }
}

bool PageWriteback::range_dirty() const {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    const std::set<uint64_t>& dirty = cache_.dirty_indices();
    auto it = dirty.lower_bound(range_first_);
    return it != dirty.end() && *it <= range_last_;
}

// No page of [range_first_, range_last_] is under write-back or locked
// (a read in flight): what filemap_write_and_wait_range() and
// invalidate_inode_pages2_range() wait for.
bool PageWriteback::range_settled() const {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    for (uint64_t i = range_first_;; i++) {
        const Page* p = cache_.find(i);
        if (p && (p->writeback() || p->locked())) return false;
        if (i == range_last_) return true;
    }
}

bool PageWriteback::balance_dirty_pages(Kiocb& k) {
    size_t dirty, writeback;
    bool wanted;
    {
        std::lock_guard<std::mutex> lock(cache_.mutex());
        dirty = cache_.nr_dirty();
        writeback = cache_.nr_writeback();
        wanted = cache_.take_writeback_wanted();
    }
    if (dirty > dirty_background_ || wanted) start_writeback(kWritebackChunk, false);
    if (dirty + writeback > dirty_limit_) {
        // The writer waits for write-back to bring the cache under the limit.
        stats_.throttled_writes++;
        k.path.waits++;
        throttled_.push_back(&k);
        return true;
    }
    return false;
}

}  // namespace mdsplit
