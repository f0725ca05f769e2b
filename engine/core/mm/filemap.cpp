// Follows mm/filemap.c (5.9): generic_file_buffered_read() (the read
// attempt, with IOCB_NOWAIT / IOCB_WAITQ), generic_perform_write()'s
// write_begin / copy / write_end (the write attempt), the page wait queues
// (wait_on_page_locked_async(), wake_up_page_bit(), unlock_page()), and the
// page I/O they start (->readpage / read_pages() of mm/readahead.c).
// The contract is in filemap.h.
#include "core/mm/filemap.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/block/member_queue.h"
#include "core/mm/fadvise.h"
#include "core/mm/page_writeback.h"

namespace mdsplit {

// A set of pages whose I/O the loop thread must start (posted by a worker
// thread, or scheduled at a modelled time).
struct Filemap::IoBatch {
    Filemap* self;
    std::vector<Page*> pages;
    uint32_t pid;
};

// struct readahead_control over our page cache, for one attempt. Called
// with the cache mutex held; the pages it adds are locked for their read
// and go to ExecContext::reads, submitted when the attempt ends.
class Filemap::RaControl final : public ReadaheadControl {
public:
    RaControl(Filemap& io, ExecContext& x, Kiocb& k) : io_(io), x_(x), k_(k) {
        io_pages = std::max<uint64_t>(io.top_.max_sectors() >> (kPageShift - kSectorShift), 1);
    }
    bool present(uint64_t index) override { return io_.cache_.find(index) != nullptr; }
    uint64_t file_pages() override { return io_.cache_.file_pages(); }
    bool add_page(uint64_t index, bool mark) override {
        Page* p = io_.cache_.add_locked(index);  // its reference is the I/O's
        if (!p) return false;
        if (mark) p->flags |= kPgReadahead;
        x_.charge(io_.costs_.page_alloc_ns);
        x_.reads.push_back(PendingIo{p, 0});
        batch_++;
        return true;
    }
    void read_pages() override {
        if (!batch_) return;
        x_.charge(io_.costs_.bio_submit_ns + io_.costs_.bio_page_ns * batch_);
        for (size_t i = x_.reads.size() - batch_; i < x_.reads.size(); i++) x_.reads[i].t = x_.t;
        if (x_.where == BufferedWhere::Worker) {
            io_.stats_.worker_page_reads += batch_;
            k_.path.worker_reads += uint32_t(batch_);
        } else {
            io_.stats_.submitter_page_reads += batch_;
            k_.path.submitter_reads += uint32_t(batch_);
        }
        batch_ = 0;
    }
    // ->readpage() of a page the caller has locked: the I/O takes its own
    // reference and will unlock the page.
    void readpage(Page* p) {
        io_.cache_.get(p);
        x_.reads.push_back(PendingIo{p, 0});
        batch_ = 1;
        read_pages();
    }
    uint64_t next_miss(uint64_t index, uint64_t max) override {
        return io_.cache_.next_miss(index, max);
    }
    uint64_t prev_miss(uint64_t index, uint64_t max) override {
        return io_.cache_.prev_miss(index, max);
    }
    // A readahead window's bookkeeping and plug (BufferedCosts::readahead_ns).
    void window(RaKind kind, uint64_t /*start*/, uint64_t nr, uint64_t /*async*/) override {
        x_.charge(io_.costs_.readahead_ns);
        io_.stats_.ra_windows[size_t(kind)]++;
        io_.stats_.ra_pages[size_t(kind)] += nr;
        io_.stats_.ra_window_sizes[nr]++;
    }

private:
    Filemap& io_;
    ExecContext& x_;
    Kiocb& k_;
    uint64_t batch_ = 0;
};

Filemap::Filemap(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
                 std::vector<MemberQueue*> members, const PageCacheConfig& config, PageCache& cache,
                 const BufferedCosts& costs, BufferedStats& stats)
    : loop_(loop),
      layer_(layer),
      top_(top),
      members_(std::move(members)),
      config_(config),
      cache_(cache),
      costs_(costs),
      stats_(stats) {}

void Filemap::stop() {
    {
        std::lock_guard<std::mutex> lock(cache_.mutex());
        stopping_ = true;
    }
    cache_.wake_all();
}

FileRaState* Filemap::ra_state(uint32_t pid, Fadvise advice) {
    auto it = ra_states_.find(pid);
    if (it != ra_states_.end()) return &it->second;
    const uint64_t bdi_ra_pages = config_.ra_kb / (kCachePageSize / 1024);
    FileRaState ra;  // file_ra_state_init()
    ra.ra_pages = bdi_ra_pages;
    generic_fadvise(ra, bdi_ra_pages, advice);  // fio's fadvise_hint, given at open
    return &ra_states_.emplace(pid, ra).first->second;
}

// generic_file_buffered_read(), page by page (the outcomes: filemap.h).
Filemap::ReadResult Filemap::read_attempt(Kiocb& k, ExecContext& x, Page*& block_page) {
    const bool worker = x.where == BufferedWhere::Worker;
    if (worker)
        k.path.worker_attempts++;
    else
        k.path.inline_attempts++;
    PageCache& pc = cache_;
    Wakeups wake;
    std::unique_lock<std::mutex> lk(pc.mutex());
    if (worker)
        stats_.worker_attempts++;
    else
        stats_.inline_attempts++;
    RaControl ctl(*this, x, k);
    const uint64_t last_index = (k.pos + k.len + kCachePageSize - 1) >> kPageShift;
    ReadResult result = ReadResult::Done;

    // wait_on_page_locked_async() / lock_page_async(): -EIOCBQUEUED, the
    // callback has our reference.
    auto queue_on = [&](Page* p) {
        arm_locked(k, p, kPgLocked, k.waitq_func);
        k.path.callbacks_armed++;
        stats_.callbacks_armed++;
        return ReadResult::Queued;
    };
    // The submitter never sleeps: where a read would wait (no NOWAIT, no
    // WAITQ: not reachable with these variants), it waits by callback.
    auto wait_on = [&](Page* p) {
        if (worker) {
            block_page = p;  // keeps our reference
            return ReadResult::Block;
        }
        stats_.submitter_blocks++;
        return queue_on(p);
    };

    while (k.done < k.len) {
        const uint64_t pos = k.pos + k.done;
        const uint64_t index = pos >> kPageShift;
        const uint32_t off = uint32_t(pos & (kCachePageSize - 1));
        const uint64_t n = std::min<uint64_t>(kCachePageSize - off, k.len - k.done);
        x.charge(costs_.lookup_ns);
        Page* p = pc.find(index);
        if (k.last_counted != index) {
            k.last_counted = index;
            if (p && p->uptodate()) {
                stats_.hits++;
                k.path.pages_hit++;
            } else {
                stats_.misses++;
                k.path.pages_missed++;
            }
        }
        bool locked_by_us = false;
        if (!p) {
            page_cache_sync_ra(ctl, *k.ra, index, last_index - index, k.ra->fmode_random,
                               config_.variant == BufferedVariant::ForcedRa);
            p = pc.find(index);
            if (p) {
                pc.get(p);
            } else {
                // no_cached_page: allocate and add it ourselves, locked.
                x.charge(costs_.page_alloc_ns);
                p = pc.add_locked(index);
                if (!p) {  // cannot happen: index is inside the file
                    k.error = -EIO;
                    result = ReadResult::Error;
                    break;
                }
                locked_by_us = true;
            }
        } else {
            pc.get(p);
        }
        if (!locked_by_us) {
            if (p->flags & kPgReadahead) {
                p->flags &= ~kPgReadahead;
                page_cache_async_ra(ctl, *k.ra, index, last_index - index, p->writeback());
            }
            if (!p->uptodate()) {
                if (k.kflags & kIocbWaitq) {
                    if (p->locked()) {  // wait_on_page_locked_async()
                        result = queue_on(p);
                        break;
                    }
                } else {
                    if (k.kflags & kIocbNowait) {
                        pc.put(p);
                        result = ReadResult::Again;
                        break;
                    }
                    if (p->locked()) {  // wait_on_page_locked_killable()
                        result = wait_on(p);
                        break;
                    }
                }
                if (!p->uptodate()) {
                    // page_not_up_to_date: lock_page[_async]() gets it (it
                    // is unlocked: we hold the cache lock since we looked).
                    p->flags |= kPgLocked;
                    locked_by_us = true;
                }
            }
        }
        if (locked_by_us) {
            // readpage:
            if (k.kflags & kIocbNowait) {
                unlock_page_locked(p, wake);
                pc.put(p);
                result = ReadResult::Again;
                break;
            }
            if (p->flags & kPgError) {
                if (k.failed_index == index) {  // failed again: readpage_error
                    unlock_page_locked(p, wake);
                    pc.put(p);
                    k.error = -EIO;
                    result = ReadResult::Error;
                    break;
                }
                k.failed_index = index;
                p->flags &= ~kPgError;
            }
            ctl.readpage(p);              // the read unlocks the page when it completes
            if (k.kflags & kIocbWaitq) {  // lock_page_async() (c8d317aa's mm/filemap.c part)
                result = queue_on(p);
                break;
            }
            result = wait_on(p);  // lock_page_killable()
            break;
        }
        // page_ok: copy to the user buffer outside the lock (we hold a reference).
        const uint8_t* src = p->data + off;
        lk.unlock();
        memcpy(k.buf + k.done, src, n);
        lk.lock();
        x.charge((costs_.copy_4k_ns * n + kCachePageSize - 1) / kCachePageSize);
        pc.mark_accessed(p);
        pc.put(p);
        k.done += n;
        k.ra->prev_pos = (index << kPageShift) | ((off + n) & (kCachePageSize - 1));
    }
    lk.unlock();
    fire_waiters(wake, x.on_loop);
    return result;
}

// The waiter takes over the caller's reference to `page`.
void Filemap::arm_locked(Kiocb& k, Page* page, uint32_t bit, void (*fn)(PageWaiter*)) {
    k.waiter.fn = fn;
    k.waiter.ctx = &k;
    k.waiter.bit = bit;
    k.waiter.page = page;
    k.waiter.next = page->waiters;
    page->waiters = &k.waiter;
}

// wait_on_page_locked_async() for a worker on modelled CPUs: `fn` runs
// once the page (a reference the caller gives up) unlocks.
void Filemap::wait_on_page_locked_async(Kiocb& k, Page* page, void (*fn)(PageWaiter*)) {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    arm_locked(k, page, kPgLocked, fn);
}

// A page-wait callback ran: drop the reference its waiter held.
void Filemap::drop_waiter_page(PageWaiter& w) {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    cache_.put(w.page);
    w.page = nullptr;
}

// wait_on_page_locked_killable() on a worker thread: sleeps until the page
// (a reference the caller gives up) unlocks. False: the cache is shutting
// down (the "fatal signal").
bool Filemap::wait_on_page_locked(Page* page) {
    std::unique_lock<std::mutex> lk(cache_.mutex());
    page->sleepers++;
    cache_.waitqueue(page).wait(lk, [&] { return !page->locked() || stopping_; });
    page->sleepers--;
    cache_.put(page);
    return !stopping_;
}

// generic_perform_write(): write_begin, copy, write_end (filemap.h).
Filemap::WriteResult Filemap::write_attempt(Kiocb& k, ExecContext& x) {
    PageCache& pc = cache_;
    Wakeups wake;
    std::unique_lock<std::mutex> lk(pc.mutex());
    RaControl ctl(*this, x, k);
    WriteResult result = WriteResult::Done;
    // write_begin waits for the page's `bit` by callback; it has our reference.
    auto wait_for = [&](Page* p, uint32_t bit) {
        arm_locked(k, p, bit, k.waitq_func);
        k.path.waits++;
        return WriteResult::Queued;
    };
    while (k.done < k.len) {
        const uint64_t pos = k.pos + k.done;
        const uint64_t index = pos >> kPageShift;
        const uint32_t off = uint32_t(pos & (kCachePageSize - 1));
        const uint64_t n = std::min<uint64_t>(kCachePageSize - off, k.len - k.done);
        const uint32_t valid = pc.page_bytes(index);
        const bool full = off == 0 && n >= valid;
        x.charge(costs_.lookup_ns);
        Page* p = pc.find(index);
        if (!p) {
            x.charge(costs_.page_alloc_ns);
            p = pc.add_locked(index);
            if (!p) {
                k.error = -EIO;
                result = WriteResult::Error;
                break;
            }
            if (!full) {
                // A partial page: read it before writing into it.
                stats_.read_for_write++;
                ctl.readpage(p);
                result = wait_for(p, kPgLocked);
                break;
            }
        } else {
            pc.get(p);
            uint32_t busy = p->locked()      ? uint32_t(kPgLocked)
                            : p->writeback() ? uint32_t(kPgWriteback)
                                             : 0u;
            if (busy) {
                stats_.write_waits++;
                result = wait_for(p, busy);
                break;
            }
            if (!p->uptodate() && !full) {
                if (p->flags & kPgError) {
                    if (k.failed_index == index) {
                        pc.put(p);
                        k.error = -EIO;
                        result = WriteResult::Error;
                        break;
                    }
                    k.failed_index = index;
                    p->flags &= ~kPgError;
                }
                stats_.read_for_write++;
                p->flags |= kPgLocked;
                ctl.readpage(p);
                result = wait_for(p, kPgLocked);
                break;
            }
            p->flags |= kPgLocked;  // write_begin returns the page locked
        }
        // Copy outside the cache lock; the page is locked and referenced.
        uint8_t* dst = p->data;
        lk.unlock();
        memcpy(dst + off, k.buf + k.done, n);
        if (full && valid < kCachePageSize) memset(dst + valid, 0, kCachePageSize - valid);
        lk.lock();
        x.charge((costs_.copy_4k_ns * n + kCachePageSize - 1) / kCachePageSize +
                 costs_.dirty_page_ns);
        p->flags |= kPgUptodate;
        p->flags &= ~kPgError;
        if (!p->dirty()) stats_.pages_dirtied++;
        pc.set_dirty(p);
        p->memcg_owner = k.pid;  // account_page_dirtied(): the dirtier's memcg
        unlock_page_locked(p, wake);
        pc.mark_accessed(p);
        pc.put(p);
        k.done += n;
    }
    lk.unlock();
    fire_waiters(wake, true);
    return result;
}

void Filemap::flush_reads(ExecContext& x) {
    if (x.reads.empty()) return;
    if (!x.on_loop) {
        auto* b = new IoBatch{this, {}, x.pid};
        for (const PendingIo& io : x.reads) b->pages.push_back(io.page);
        x.reads.clear();
        loop_.post(&Filemap::submit_batch_cb, b);
        return;
    }
    uint64_t now = loop_.now();
    size_t i = 0;
    std::vector<Page*> pages;
    while (i < x.reads.size()) {
        uint64_t t = x.reads[i].t;
        pages.clear();
        for (; i < x.reads.size() && x.reads[i].t == t; i++) pages.push_back(x.reads[i].page);
        if (t <= now) {  // (later only for a modelled CPU, virtual clock)
            submit_pages(pages, Op::Read, x.pid, true, &Filemap::read_endio, this);
        } else {
            auto* b = new IoBatch{this, pages, x.pid};
            loop_.schedule_at(t, &Filemap::submit_batch_cb, b);
        }
    }
    x.reads.clear();
}

void Filemap::submit_batch_cb(void* arg, uint64_t) {
    std::unique_ptr<IoBatch> b(static_cast<IoBatch*>(arg));
    b->self->submit_pages(b->pages, Op::Read, b->pid, true, &Filemap::read_endio, b->self);
}

void Filemap::submit_pages(std::vector<Page*>& pages, Op op, uint32_t pid, bool sync,
                           void (*end_io)(Bio*), void* owner) {
    if (pages.empty()) return;
    TaskContext* prev = layer_.current();
    TaskContext& io = io_task_for(pid);
    layer_.set_current(&io);
    bool own_plug = !io.plug.active;
    if (own_plug) layer_.start_plug(io);
    size_t i = 0;
    while (i < pages.size()) {
        Page* first = pages[i];
        uint64_t bytes = cache_.page_bytes(first->index);
        size_t j = i + 1;
        while (j < pages.size() && j - i < bio_max_pages() && bytes == (j - i) * kCachePageSize &&
               pages[j]->index == pages[j - 1]->index + 1 &&
               pages[j]->data == pages[j - 1]->data + kCachePageSize) {
            bytes += cache_.page_bytes(pages[j]->index);
            j++;
        }
        for (size_t k = i; k < j; k++) pages[k]->io_next = k + 1 < j ? pages[k + 1] : nullptr;
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->flags = sync ? kBioSync : 0;
        bio->sector = (first->index << kPageShift) >> kSectorShift;
        bio->nr_sectors = uint32_t(bytes >> kSectorShift);
        bio->data = first->data;
        bio->dev = &top_;
        bio->pid = pid;
        bio->end_io = end_io;
        bio->private_data = first;
        bio->tag = reinterpret_cast<uint64_t>(owner);
        if (op == Op::Read)
            stats_.read_bios++;
        else
            stats_.writeback_bios++;
        layer_.submit_bio_noacct(bio);
        i = j;
    }
    if (own_plug) {
        layer_.finish_plug(io);
        kick();
    }
    layer_.set_current(prev);
}

TaskContext& Filemap::io_task_for(uint32_t pid) {
    auto [it, added] = io_tasks_.try_emplace(pid);
    if (added) it->second.pid = pid;
    return it->second;
}

void Filemap::kick() {
    for (MemberQueue* m : members_) m->backend().kick();
}

// The read completed: pages become up to date (or PG_error) and unlock,
// which wakes their waiters (end_page_read / unlock_page).
void Filemap::read_endio(Bio* bio) {
    auto* self = reinterpret_cast<Filemap*>(bio->tag);
    bool failed = bio->error != 0;
    Wakeups wake;
    bool wb;
    {
        std::lock_guard<std::mutex> lock(self->cache_.mutex());
        for (Page* p = static_cast<Page*>(bio->private_data); p;) {
            Page* next = p->io_next;
            p->io_next = nullptr;
            if (failed) {
                p->flags |= kPgError;
                self->stats_.read_errors++;
            } else {
                p->flags |= kPgUptodate;
            }
            self->stats_.pages_read++;
            self->unlock_page_locked(p, wake);
            self->cache_.put(p);
            p = next;
        }
        wb = self->cache_.take_writeback_wanted();
    }
    bio->pool->put(bio);
    self->fire_waiters(wake, true);
    if (wb) self->wb_->wakeup_flusher();  // reclaim found only dirty pages
}

// wake_up_page_bit(): the page's waiters for `bit` move to `wake`.
void Filemap::take_waiters_locked(Page* page, uint32_t bit, Wakeups& wake) {
    for (PageWaiter** pp = &page->waiters; *pp;) {
        PageWaiter* w = *pp;
        if (w->bit == bit) {
            *pp = w->next;
            w->next = nullptr;
            wake.waiters.push_back(w);
        } else {
            pp = &w->next;
        }
    }
}

void Filemap::unlock_page_locked(Page* page, Wakeups& wake) {
    page->flags &= ~kPgLocked;
    take_waiters_locked(page, kPgLocked, wake);
    if (page->sleepers) wake.sleepers.push_back(&cache_.waitqueue(page));
}

void Filemap::end_writeback_locked(Page* page, Wakeups& wake) {
    cache_.end_writeback(page);
    take_waiters_locked(page, kPgWriteback, wake);
}

// wake_page_function()
void Filemap::fire_waiters(Wakeups& wake, bool loop_thread) {
    for (std::condition_variable* cv : wake.sleepers) cv->notify_all();
    wake.sleepers.clear();
    for (PageWaiter* w : wake.waiters) {
        if (loop_thread)
            loop_.defer(&Filemap::fire_waiter_cb, w);
        else
            loop_.post(&Filemap::fire_waiter_cb, w);
    }
    wake.waiters.clear();
}

void Filemap::fire_waiter_cb(void* arg, uint64_t) {
    auto* w = static_cast<PageWaiter*>(arg);
    w->fn(w);
}

}  // namespace mdsplit

namespace mdsplit {

void Filemap::invalidate() {
    std::lock_guard<std::mutex> lock(cache_.mutex());
    stats_.invalidations++;
    stats_.invalidated_pages += cache_.invalidate_clean();
    for (auto& [pid, ra] : ra_states_) {  // the window starts over; the file's advice stays
        FileRaState fresh;
        fresh.ra_pages = ra.ra_pages;
        fresh.fmode_random = ra.fmode_random;
        ra = fresh;
    }
}

}  // namespace mdsplit
