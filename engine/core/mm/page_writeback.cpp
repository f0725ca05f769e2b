// Follows mm/page-writeback.c (5.9): write_cache_pages() (write-back of
// dirty pages from mapping->writeback_index, cyclically),
// end_page_writeback() accounting, balance_dirty_pages()' throttled
// writers, and what waits for write-back: fsync (file_write_and_wait_range),
// sync() and invalidate (invalidate_mapping_pages, mm/truncate.c).
#include <algorithm>
#include <cerrno>
#include <limits>
#include <mutex>
#include <stdexcept>

#include "core/io_uring/kiocb.h"
#include "core/io_uring/submitter_cpu.h"

namespace mdsplit {

void BufferedIo::write_endio(Bio* bio) {
    auto* self = reinterpret_cast<BufferedIo*>(bio->tag);
    bool failed = bio->error != 0;
    Filemap::Wakeups wake;
    {
        std::lock_guard<std::mutex> lock(self->cache_->mutex());
        for (Page* p = static_cast<Page*>(bio->private_data); p;) {
            Page* next = p->io_next;
            p->io_next = nullptr;
            if (failed) {
                p->flags |= kPgError;  // mapping_set_error(): fsync reports it
                self->wb_errors_++;
                self->stats_.writeback_errors++;
            }
            self->filemap_->end_writeback_locked(p, wake);
            auto it = self->wb_outstanding_.find(p->wb_batch);
            if (it != self->wb_outstanding_.end() && --it->second == 0)
                self->wb_outstanding_.erase(it);
            self->cache_->put(p);
            p = next;
        }
    }
    bio->pool->put(bio);
    self->filemap_->fire_waiters(wake, true);
    // fsync completions, throttled writers and more write-back.
    self->wakeup_flusher();
}

// wakeup_flusher_threads(): write-back runs from a deferred callback (we
// may be inside a submission here), once.
void BufferedIo::wakeup_flusher() {
    if (writeback_scheduled_) return;
    writeback_scheduled_ = true;
    loop_.defer(&BufferedIo::writeback_cb, this);
}

void BufferedIo::wakeup_flusher_cb(void* arg) { static_cast<BufferedIo*>(arg)->wakeup_flusher(); }

// write_cache_pages(): up to max_pages dirty pages from the writeback index
// on, cyclically, become PG_writeback and go down as writes. Returns the
// batch number fsync waits for (the last one when nothing was dirty).
uint64_t BufferedIo::start_writeback(size_t max_pages, bool sync) {
    std::vector<Page*> pages;
    uint64_t batch;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        const std::set<uint64_t>& dirty = cache_->dirty_indices();
        if (dirty.empty()) return wb_seq_;
        batch = ++wb_seq_;
        auto take = [&](uint64_t from, uint64_t to) {
            auto it = dirty.lower_bound(from);
            while (it != dirty.end() && *it < to && pages.size() < max_pages) {
                uint64_t index = *it;
                ++it;  // clear_dirty() erases index
                Page* p = cache_->find(index);
                if (!p || p->locked() || p->writeback()) continue;
                cache_->clear_dirty(p);
                cache_->set_writeback(p);
                cache_->get(p);
                p->wb_batch = batch;
                pages.push_back(p);
            }
        };
        take(wb_cursor_, kNoIndex);
        take(0, wb_cursor_);
        if (pages.empty()) return --wb_seq_;  // nothing could start: wait for earlier batches
        wb_cursor_ = pages.back()->index + 1;
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
        filemap_->submit_pages(own, Op::Write, own.front()->memcg_owner, sync,
                               &BufferedIo::write_endio, this);
        i = j;
    }
    return batch;
}

void BufferedIo::writeback_cb(void* arg, uint64_t) {
    auto* self = static_cast<BufferedIo*>(arg);
    self->writeback_scheduled_ = false;
    self->check_fsyncs();
    self->check_throttled();
    bool wanted;
    {
        std::lock_guard<std::mutex> lock(self->cache_->mutex());
        wanted = self->cache_->take_writeback_wanted();
    }
    if (wanted) self->start_writeback(kWritebackChunk, false);
}

void BufferedIo::check_throttled() {
    while (!throttled_.empty()) {
        size_t used, writeback;
        {
            std::lock_guard<std::mutex> lock(cache_->mutex());
            writeback = cache_->nr_writeback();
            used = cache_->nr_dirty() + writeback;
        }
        if (used > dirty_limit_) {
            if (writeback == 0) start_writeback(kWritebackChunk, false);
            return;
        }
        Request* r = throttled_.front();
        throttled_.pop_front();
        Exec x = cpu_->wake(r->task->pid);
        complete(*r, x, 0);
    }
}

bool BufferedIo::writeback_done_through(uint64_t batch) const {
    return wb_outstanding_.empty() || wb_outstanding_.begin()->first > batch;
}

void BufferedIo::check_fsyncs() {
    for (size_t i = 0; i < fsyncs_.size();) {
        if (!writeback_done_through(fsyncs_[i].batch)) {
            i++;
            continue;
        }
        Request* r = fsyncs_[i].request;
        fsyncs_.erase(fsyncs_.begin() + long(i));
        int32_t error = wb_errors_ > wb_errors_reported_ ? -EIO : 0;
        wb_errors_reported_ = wb_errors_;
        Exec x = cpu_->wake(r->task->pid);
        complete(*r, x, error);
    }
}

void BufferedIo::fsync(TaskContext& task, uint64_t cookie) {
    Request* r = new_request(task, Op::Flush, 0, 0, nullptr, cookie);
    stats_.fsyncs++;
    uint64_t batch = start_writeback(std::numeric_limits<size_t>::max(), true);
    if (writeback_done_through(batch)) {
        int32_t error = wb_errors_ > wb_errors_reported_ ? -EIO : 0;
        wb_errors_reported_ = wb_errors_;
        Exec x = cpu_->enter(BufferedWhere::Submitter, task.pid);
        complete(*r, x, error);
        cpu_->leave(x);
        return;
    }
    fsyncs_.push_back(FsyncWaiter{&task, cookie, batch, r});
}

void BufferedIo::run_until(bool (*done)(BufferedIo*)) {
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

void BufferedIo::sync() {
    stats_.syncs++;
    for (int round = 0; round < 16; round++) {
        sync_target_ = start_writeback(std::numeric_limits<size_t>::max(), true);
        run_until([](BufferedIo* self) {
            return self->writeback_done_through(self->sync_target_) && self->throttled_.empty();
        });
        std::lock_guard<std::mutex> lock(cache_->mutex());
        if (cache_->nr_dirty() == 0) return;
    }
}

void BufferedIo::invalidate() {
    sync();
    filemap_->invalidate();
}

// balance_dirty_pages() after a write: above the background threshold
// (10% of the cache) write-back starts; above the limit (20%) the writer
// waits (true: r completes from check_throttled()).
bool BufferedIo::balance_dirty_pages(Request& r) {
    size_t dirty, writeback;
    bool wanted;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        dirty = cache_->nr_dirty();
        writeback = cache_->nr_writeback();
        wanted = cache_->take_writeback_wanted();
    }
    if (dirty > dirty_background_ || wanted) start_writeback(kWritebackChunk, false);
    if (dirty + writeback > dirty_limit_) {
        // The writer waits for write-back to bring the cache under the limit.
        stats_.throttled_writes++;
        r.path.waits++;
        throttled_.push_back(&r);
        return true;
    }
    return false;
}

}  // namespace mdsplit
