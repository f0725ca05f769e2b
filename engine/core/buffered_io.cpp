#include "core/buffered_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "config/config_loader.h"
#include "core/member_queue.h"

namespace mdsplit {

namespace {
constexpr size_t kWritebackChunk = 1024;  // MAX_WRITEBACK_PAGES
constexpr uint64_t kNoIndex = ~uint64_t(0);
}  // namespace

const char* buffered_where_name(BufferedWhere where) {
    switch (where) {
        case BufferedWhere::None:
            return "none";
        case BufferedWhere::Submitter:
            return "submitter";
        case BufferedWhere::TaskWork:
            return "task_work";
        case BufferedWhere::Worker:
            return "worker";
    }
    return "?";
}

// One buffered I/O in flight (a kiocb). Owned by the loop thread, except
// that while an io-wq worker thread runs it only that thread touches it.
struct BufferedIo::Request {
    BufferedIo* self = nullptr;
    TaskContext* task = nullptr;
    FileRaState* ra = nullptr;
    uint64_t cookie = 0;
    Op op = Op::Read;
    uint64_t pos = 0;
    uint64_t len = 0;  // clamped at the end of the file
    uint8_t* buf = nullptr;
    uint64_t done = 0;  // bytes copied so far
    uint32_t kflags = 0;
    uint64_t last_counted = kNoIndex;  // the page last counted as hit/miss
    uint64_t failed_index = kNoIndex;  // a page whose read failed once already
    int32_t error = 0;
    bool completed = false;
    bool remote = false;  // given to a real worker thread: the loop expects its post
    PageWaiter waiter;
    BufferedPath path;
};

// A set of pages whose I/O the loop thread must start (posted by a worker
// thread, or scheduled at a modelled time).
struct BufferedIo::IoBatch {
    BufferedIo* self;
    std::vector<Page*> pages;
    uint32_t pid;
};

// struct readahead_control over our page cache, for one attempt. Called
// with the cache mutex held; the pages it adds are locked for their read
// and go to Exec::reads, submitted when the attempt ends.
class BufferedIo::RaControl final : public ReadaheadControl {
public:
    RaControl(BufferedIo& io, Exec& x, Request& r) : io_(io), x_(x), r_(r) {
        io_pages = std::max<uint64_t>(io.top_.max_sectors() >> (kPageShift - kSectorShift), 1);
    }
    bool present(uint64_t index) override { return io_.cache_->find(index) != nullptr; }
    uint64_t file_pages() override { return io_.cache_->file_pages(); }
    bool add_page(uint64_t index, bool mark) override {
        Page* p = io_.cache_->add_locked(index);  // its reference is the I/O's
        if (!p) return false;
        if (mark) p->flags |= kPgReadahead;
        io_.charge(x_, io_.costs_.page_alloc_ns);
        x_.reads.push_back(PendingIo{p, 0});
        batch_++;
        return true;
    }
    void read_pages() override {
        if (!batch_) return;
        io_.charge(x_, io_.costs_.bio_submit_ns + io_.costs_.bio_page_ns * batch_);
        for (size_t i = x_.reads.size() - batch_; i < x_.reads.size(); i++) x_.reads[i].t = x_.t;
        if (x_.where == BufferedWhere::Worker) {
            io_.stats_.worker_page_reads += batch_;
            r_.path.worker_reads += uint32_t(batch_);
        } else {
            io_.stats_.submitter_page_reads += batch_;
            r_.path.submitter_reads += uint32_t(batch_);
        }
        batch_ = 0;
    }
    // ->readpage() of a page the caller has locked: the I/O takes its own
    // reference and will unlock the page.
    void readpage(Page* p) {
        io_.cache_->get(p);
        x_.reads.push_back(PendingIo{p, 0});
        batch_ = 1;
        read_pages();
    }
    uint64_t next_miss(uint64_t index, uint64_t max) override {
        return io_.cache_->next_miss(index, max);
    }
    uint64_t prev_miss(uint64_t index, uint64_t max) override {
        return io_.cache_->prev_miss(index, max);
    }
    // A readahead window's bookkeeping and plug (BufferedCosts::readahead_ns).
    void window(RaKind kind, uint64_t /*start*/, uint64_t nr, uint64_t /*async*/) override {
        io_.charge(x_, io_.costs_.readahead_ns);
        io_.stats_.ra_windows[size_t(kind)]++;
        io_.stats_.ra_pages[size_t(kind)] += nr;
        io_.stats_.ra_window_sizes[nr]++;
    }

private:
    BufferedIo& io_;
    Exec& x_;
    Request& r_;
    uint64_t batch_ = 0;
};

BufferedIo::BufferedIo(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
                       std::vector<MemberQueue*> members, const PageCacheConfig& config)
    : loop_(loop),
      layer_(layer),
      top_(top),
      members_(std::move(members)),
      config_(config),
      virtual_(loop.clock().is_virtual()) {
    cache_ = std::make_unique<PageCache>(config.size_bytes, top.capacity() << kSectorShift);
    real_cpus_ = std::max(1u, std::thread::hardware_concurrency());
    dirty_background_ = std::max<uint64_t>(cache_->capacity_pages() / 10, 8);
    dirty_limit_ = std::max<uint64_t>(cache_->capacity_pages() / 5, 16);
}

BufferedIo::~BufferedIo() {
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stopping_ = true;
    }
    cache_->wake_all();
    {
        std::lock_guard<std::mutex> lock(wq_mutex_);
        wq_stop_ = true;
    }
    wq_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
}

uint32_t BufferedIo::max_workers() const {
    uint32_t cpus = virtual_ ? std::max(1u, costs_.cpus) : real_cpus_;
    uint32_t bound = 4 * cpus;
    return iodepth_ ? std::min(iodepth_, bound) : bound;
}

void BufferedIo::charge_submitter(uint64_t ns) {
    if (!virtual_) return;
    submitter_busy_ = std::max(submitter_busy_, loop_.now()) + ns;
}

std::vector<BufferedPath> BufferedIo::take_paths() {
    std::vector<BufferedPath> out;
    out.swap(paths_);
    return out;
}

FileRaState* BufferedIo::ra_state(uint32_t pid) {
    auto it = ra_states_.find(pid);
    if (it != ra_states_.end()) return &it->second;
    FileRaState ra;  // file_ra_state_init()
    ra.ra_pages = config_.ra_kb / (kCachePageSize / 1024);
    return &ra_states_.emplace(pid, ra).first->second;
}

BufferedIo::Request* BufferedIo::new_request(TaskContext& task, Op op, uint64_t offset,
                                             uint64_t length, void* buffer, uint64_t cookie) {
    Request* r = requests_.get();
    *r = Request{};
    r->self = this;
    r->task = &task;
    r->cookie = cookie;
    r->op = op;
    r->pos = offset;
    r->len = length;
    r->buf = static_cast<uint8_t*>(buffer);
    r->path.cookie = cookie;
    r->path.op = op;
    if (record_paths_) r->path.submit_ns = loop_.now();
    if (op == Op::Read) {
        uint64_t size = cache_->file_bytes();
        uint64_t fit = offset >= size ? 0 : std::min(length, size - offset);
        r->path.resid = length - fit;  // a read past the end is short
        r->len = fit;
        std::lock_guard<std::mutex> lock(cache_->mutex());
        r->ra = ra_state(task.pid);
    }
    TaskContext& io = io_task_for(task.pid);  // the reader's / writer's cgroup
    io.sched = task.sched;
    task.in_flight++;
    live_requests_++;
    used_ = true;
    return r;
}

BufferedIo::Exec BufferedIo::submitter_exec(uint32_t pid) {
    Exec x;
    x.where = BufferedWhere::Submitter;
    x.pid = pid;
    if (virtual_) x.t = std::max(loop_.now(), submitter_busy_);
    return x;
}

void BufferedIo::submitter_done(const Exec& x) {
    if (virtual_) submitter_busy_ = std::max(submitter_busy_, x.t);
}

// ---------------------------------------------------------------- reads

void BufferedIo::read(TaskContext& task, uint64_t offset, uint64_t length, void* buffer,
                      uint64_t cookie) {
    Request* r = new_request(task, Op::Read, offset, length, buffer, cookie);
    stats_.reads++;
    stats_.read_bytes += r->len;
    Exec x = submitter_exec(task.pid);
    if (r->len == 0) {
        complete(*r, x, 0);
    } else {
        r->kflags = kNowait;  // io_prep_rw(force_nonblock)
        io_read(*r, x);
    }
    submitter_done(x);
}

// io_read(): an attempt; on -EAGAIN with FMODE_BUF_RASYNC, arm the page-wait
// callback and try again; still -EAGAIN: punt to io-wq. Runs at submission
// and again from task_work when an armed callback fires.
void BufferedIo::io_read(Request& r, Exec& x) {
    Page* blocked = nullptr;
    ReadResult res = read_attempt(r, x, blocked);
    flush_reads(x);
    if (res == ReadResult::Again && config_.rasync) {
        // io_rw_should_retry()
        charge(x, costs_.arm_ns);
        r.kflags |= kWaitq;
        // c8d317aa: "kiocb->ki_flags &= ~IOCB_NOWAIT;" (324bcf54 took it out again)
        if (config_.variant == BufferedVariant::C8d317aa) r.kflags &= ~kNowait;
        res = read_attempt(r, x, blocked);
        flush_reads(x);
    }
    switch (res) {
        case ReadResult::Done:
            complete(r, x, 0);
            break;
        case ReadResult::Error:
            complete(r, x, r.error);
            break;
        case ReadResult::Queued:
            break;  // the callback resumes it
        case ReadResult::Again:
            r.kflags = 0;  // the worker's read may block
            punt(r, x);
            break;
        case ReadResult::Block:
            break;  // not returned outside a worker (see read_attempt)
    }
    bool wb;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        wb = cache_->take_writeback_wanted();
    }
    if (wb && !writeback_scheduled_) {
        writeback_scheduled_ = true;
        loop_.defer(&BufferedIo::writeback_cb, this);
    }
}

// generic_file_buffered_read() for what is left of r, page by page, with
// r.kflags' IOCB_NOWAIT / IOCB_WAITQ:
//   Done    everything copied (Error: a page read failed twice)
//   Again   -EAGAIN: would block and NOWAIT is set
//   Queued  -EIOCBQUEUED: a page-wait callback is armed on a locked page
//   Block   (workers only) must sleep until block_page (referenced) unlocks,
//           then call again
// Reads it starts are left in x.reads for flush_reads().
BufferedIo::ReadResult BufferedIo::read_attempt(Request& r, Exec& x, Page*& block_page) {
    const bool worker = x.where == BufferedWhere::Worker;
    const bool loop_thread = virtual_ || !worker;
    if (worker)
        r.path.worker_attempts++;
    else
        r.path.inline_attempts++;
    PageCache& pc = *cache_;
    Wakeups wake;
    std::unique_lock<std::mutex> lk(pc.mutex());
    if (worker)
        stats_.worker_attempts++;
    else
        stats_.inline_attempts++;
    RaControl ctl(*this, x, r);
    const uint64_t last_index = (r.pos + r.len + kCachePageSize - 1) >> kPageShift;
    ReadResult result = ReadResult::Done;

    // The submitter never sleeps: where a read would wait (no NOWAIT, no
    // WAITQ: not reachable with these variants), it waits by callback.
    auto wait_on = [&](Page* p) {
        if (worker) {
            block_page = p;  // keeps our reference
            return ReadResult::Block;
        }
        stats_.submitter_blocks++;
        arm_locked(r, p, kPgLocked, &BufferedIo::on_page_wake);
        pc.put(p);
        r.path.callbacks_armed++;
        stats_.callbacks_armed++;
        return ReadResult::Queued;
    };

    while (r.done < r.len) {
        const uint64_t pos = r.pos + r.done;
        const uint64_t index = pos >> kPageShift;
        const uint32_t off = uint32_t(pos & (kCachePageSize - 1));
        const uint64_t n = std::min<uint64_t>(kCachePageSize - off, r.len - r.done);
        charge(x, costs_.lookup_ns);
        Page* p = pc.find(index);
        if (r.last_counted != index) {
            r.last_counted = index;
            if (p && p->uptodate()) {
                stats_.hits++;
                r.path.pages_hit++;
            } else {
                stats_.misses++;
                r.path.pages_missed++;
            }
        }
        bool locked_by_us = false;
        if (!p) {
            page_cache_sync_ra(ctl, *r.ra, index, last_index - index, fadvise_random_,
                               config_.variant == BufferedVariant::ForcedRa);
            p = pc.find(index);
            if (p) {
                pc.get(p);
            } else {
                // no_cached_page: allocate and add it ourselves, locked.
                charge(x, costs_.page_alloc_ns);
                p = pc.add_locked(index);
                if (!p) {  // cannot happen: index is inside the file
                    r.error = -EIO;
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
                page_cache_async_ra(ctl, *r.ra, index, last_index - index, p->writeback());
            }
            if (!p->uptodate()) {
                if (r.kflags & kWaitq) {
                    if (p->locked()) {  // wait_on_page_locked_async()
                        arm_locked(r, p, kPgLocked, &BufferedIo::on_page_wake);
                        pc.put(p);
                        r.path.callbacks_armed++;
                        stats_.callbacks_armed++;
                        result = ReadResult::Queued;
                        break;
                    }
                } else {
                    if (r.kflags & kNowait) {
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
            if (r.kflags & kNowait) {
                unlock_page_locked(p, wake);
                pc.put(p);
                result = ReadResult::Again;
                break;
            }
            if (p->flags & kPgError) {
                if (r.failed_index == index) {  // failed again: readpage_error
                    unlock_page_locked(p, wake);
                    pc.put(p);
                    r.error = -EIO;
                    result = ReadResult::Error;
                    break;
                }
                r.failed_index = index;
                p->flags &= ~kPgError;
            }
            ctl.readpage(p);          // the read unlocks the page when it completes
            if (r.kflags & kWaitq) {  // lock_page_async() (c8d317aa's mm/filemap.c part)
                arm_locked(r, p, kPgLocked, &BufferedIo::on_page_wake);
                pc.put(p);
                r.path.callbacks_armed++;
                stats_.callbacks_armed++;
                result = ReadResult::Queued;
                break;
            }
            result = wait_on(p);  // lock_page_killable()
            break;
        }
        // page_ok: copy to the user buffer outside the lock (we hold a reference).
        const uint8_t* src = p->data + off;
        lk.unlock();
        memcpy(r.buf + r.done, src, n);
        lk.lock();
        charge(x, (costs_.copy_4k_ns * n + kCachePageSize - 1) / kCachePageSize);
        pc.mark_accessed(p);
        pc.put(p);
        r.done += n;
        r.ra->prev_pos = (index << kPageShift) | ((off + n) & (kCachePageSize - 1));
    }
    lk.unlock();
    fire_waiters(wake, loop_thread);
    return result;
}

void BufferedIo::arm_locked(Request& r, Page* page, uint32_t bit, void (*fn)(PageWaiter*)) {
    cache_->get(page);
    r.waiter.fn = fn;
    r.waiter.ctx = &r;
    r.waiter.bit = bit;
    r.waiter.page = page;
    r.waiter.next = page->waiters;
    page->waiters = &r.waiter;
}

// io_async_buf_func(): the page the request waits on was unlocked (or left
// writeback); queue task_work for the submitter. Reads and writes alike.
void BufferedIo::on_page_wake(PageWaiter* w) {
    auto* r = static_cast<Request*>(w->ctx);
    BufferedIo* self = r->self;
    {
        std::lock_guard<std::mutex> lock(self->cache_->mutex());
        self->cache_->put(w->page);
        w->page = nullptr;
    }
    self->queue_task_work(r);
}

// task_work runs on the submitting task. On the virtual clock it queues for
// the submitter's modelled CPU, one item per turn.
void BufferedIo::queue_task_work(Request* r) {
    if (!virtual_) {
        run_task_work(*r);
        return;
    }
    task_work_.push_back(r);
    if (!task_work_timer_) {
        task_work_timer_ = true;
        loop_.schedule_at(std::max(loop_.now(), submitter_busy_), &BufferedIo::task_work_timer,
                          this);
    }
}

void BufferedIo::task_work_timer(void* arg, uint64_t) {
    auto* self = static_cast<BufferedIo*>(arg);
    self->task_work_timer_ = false;
    if (self->task_work_.empty()) return;
    uint64_t now = self->loop_.now();
    if (self->submitter_busy_ <= now) {
        Request* r = self->task_work_.front();
        self->task_work_.pop_front();
        self->run_task_work(*r);
    }
    if (!self->task_work_.empty()) {
        self->task_work_timer_ = true;
        self->loop_.schedule_at(std::max(self->loop_.now(), self->submitter_busy_),
                                &BufferedIo::task_work_timer, self);
    }
}

void BufferedIo::run_task_work(Request& r) {
    Exec x = submitter_exec(r.task->pid);
    x.where = BufferedWhere::TaskWork;
    charge(x, costs_.task_work_ns);
    stats_.task_work_runs++;
    r.path.task_work_runs++;
    if (r.op == Op::Read)
        io_read(r, x);
    else
        io_write(r, x);
    submitter_done(x);
}

// io_queue_async_work()
void BufferedIo::punt(Request& r, Exec& x) {
    charge(x, costs_.punt_ns);
    r.path.punted = true;
    stats_.punts++;
    wq_enqueue(r, x.t);
}

// ---------------------------------------------------------------- io-wq

void BufferedIo::wq_enqueue(Request& r, uint64_t t) {
    if (virtual_) {
        vqueue_.push_back(&r);
        vworker_dispatch(t);
        return;
    }
    r.remote = true;
    loop_.expect_remote(1);
    std::lock_guard<std::mutex> lock(wq_mutex_);
    wq_.push_back(&r);
    if (wq_idle_ > 0) wq_cv_.notify_one();
    if (wq_.size() > wq_idle_ && threads_.size() < max_workers()) {
        uint32_t id = uint32_t(threads_.size()) + 1;
        threads_.emplace_back(&BufferedIo::thread_main, this, id);
        stats_.workers_created++;
        stats_.worker_high_water = std::max<uint64_t>(stats_.worker_high_water, threads_.size());
    }
}

// A real io-wq worker (io_wqe_worker): takes work, runs the blocking read.
void BufferedIo::thread_main(uint32_t id) {
    std::unique_lock<std::mutex> lk(wq_mutex_);
    for (;;) {
        while (wq_.empty() && !wq_stop_) {
            wq_idle_++;
            wq_cv_.wait(lk);
            wq_idle_--;
        }
        if (wq_stop_) return;
        Request* r = wq_.front();
        wq_.pop_front();
        wq_busy_++;
        stats_busy_high_water_ = std::max<uint64_t>(stats_busy_high_water_, wq_busy_);
        lk.unlock();
        worker_read(*r, id);
        lk.lock();
        wq_busy_--;
    }
}

// The worker's blocking read (no NOWAIT, no WAITQ): it sleeps on page
// locks for real and copies into the user buffer itself; the reads it
// starts and its completion go to the loop thread by post().
void BufferedIo::worker_read(Request& r, uint32_t id) {
    r.path.worker = id;
    Exec x;
    x.where = BufferedWhere::Worker;
    x.pid = r.task->pid;
    for (;;) {
        Page* p = nullptr;
        ReadResult res = read_attempt(r, x, p);
        flush_reads(x);
        if (res == ReadResult::Block) {
            std::unique_lock<std::mutex> lk(cache_->mutex());
            stats_.worker_sleeps++;
            r.path.worker_sleeps++;
            p->sleepers++;
            cache_->waitqueue(p).wait(lk, [&] { return !p->locked() || stopping_; });
            p->sleepers--;
            cache_->put(p);
            if (stopping_) return;
            continue;
        }
        complete(r, x, res == ReadResult::Error ? r.error : 0);
        return;
    }
}

// Virtual clock: workers are modelled CPUs. A sleeping worker takes
// wakeup_ns to run; a busy one picks the next work as soon as it is free.
void BufferedIo::vworker_dispatch(uint64_t t) {
    while (!vqueue_.empty()) {
        VirtualWorker* w = nullptr;
        for (VirtualWorker& v : vworkers_)
            if (!v.busy) {
                w = &v;
                break;
            }
        uint64_t start;
        if (w) {
            start = std::max(t, w->free_at) + costs_.wakeup_ns;
        } else if (vworkers_.size() < max_workers()) {
            vworkers_.push_back(VirtualWorker{uint32_t(vworkers_.size()) + 1, false, 0});
            w = &vworkers_.back();
            stats_.workers_created++;
            stats_.worker_high_water =
                std::max<uint64_t>(stats_.worker_high_water, vworkers_.size());
            start = t + costs_.wakeup_ns;
        } else {
            return;  // all busy: the first to finish takes it
        }
        Request* r = vqueue_.front();
        vqueue_.pop_front();
        w->busy = true;
        r->path.worker = w->id;
        vbusy_++;
        stats_busy_high_water_ = std::max<uint64_t>(stats_busy_high_water_, vbusy_);
        loop_.schedule_at(std::max(start, loop_.now()), &BufferedIo::vworker_run_cb, r);
    }
}

void BufferedIo::vworker_run_cb(void* arg, uint64_t) {
    auto* r = static_cast<Request*>(arg);
    r->self->vworker_run(*r);
}

void BufferedIo::vworker_run(Request& r) {
    Exec x;
    x.where = BufferedWhere::Worker;
    x.pid = r.task->pid;
    x.t = loop_.now();
    Page* p = nullptr;
    ReadResult res = read_attempt(r, x, p);
    flush_reads(x);
    if (res == ReadResult::Block) {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stats_.worker_sleeps++;
        r.path.worker_sleeps++;
        arm_locked(r, p, kPgLocked, &BufferedIo::on_vworker_wake);
        cache_->put(p);
        return;
    }
    uint32_t id = r.path.worker;
    complete(r, x, res == ReadResult::Error ? r.error : 0);  // may free r
    VirtualWorker& w = vworkers_[id - 1];
    w.busy = false;
    w.free_at = x.t;
    vbusy_--;
    if (!vqueue_.empty()) {
        // io_worker_handle_work(): still running, no wake-up needed.
        Request* next = vqueue_.front();
        vqueue_.pop_front();
        w.busy = true;
        vbusy_++;
        next->path.worker = id;
        loop_.schedule_at(std::max(x.t, loop_.now()), &BufferedIo::vworker_run_cb, next);
    }
}

void BufferedIo::on_vworker_wake(PageWaiter* w) {
    auto* r = static_cast<Request*>(w->ctx);
    BufferedIo* self = r->self;
    {
        std::lock_guard<std::mutex> lock(self->cache_->mutex());
        self->cache_->put(w->page);
        w->page = nullptr;
    }
    // The page's read completes on the CPU that issued it (nvme's per-CPU
    // queues; QUEUE_FLAG_SAME_COMP, blk_mq_complete_request(), 5.9): a
    // worker that read the page itself is woken by the interrupt on its own
    // CPU (ttwu on the local runqueue, nothing to add); a worker sleeping
    // on a page the submitter read (forced-ra) is woken from the
    // submitter's CPU, a cross-CPU wake-up (try_to_wake_up() -> IPI).
    uint64_t wake = r->path.worker_reads ? 0 : self->costs_.wakeup_ns;
    self->loop_.schedule_at(self->loop_.now() + wake, &BufferedIo::vworker_run_cb, r);
}

// ---------------------------------------------------------------- page I/O

// Starts the reads an attempt left in x.reads: on the loop thread now (or
// at their modelled time), from a worker thread by post().
void BufferedIo::flush_reads(Exec& x) {
    if (x.reads.empty()) return;
    if (x.where == BufferedWhere::Worker && !virtual_) {
        auto* b = new IoBatch{this, {}, x.pid};
        for (const PendingIo& io : x.reads) b->pages.push_back(io.page);
        x.reads.clear();
        loop_.post(&BufferedIo::submit_batch_cb, b);
        return;
    }
    uint64_t now = loop_.now();
    size_t i = 0;
    std::vector<Page*> pages;
    while (i < x.reads.size()) {
        uint64_t t = x.reads[i].t;
        pages.clear();
        for (; i < x.reads.size() && x.reads[i].t == t; i++) pages.push_back(x.reads[i].page);
        if (!virtual_ || t <= now) {
            submit_pages(pages, Op::Read, x.pid, true);
        } else {
            auto* b = new IoBatch{this, pages, x.pid};
            loop_.schedule_at(t, &BufferedIo::submit_batch_cb, b);
        }
    }
    x.reads.clear();
}

void BufferedIo::submit_batch_cb(void* arg, uint64_t) {
    std::unique_ptr<IoBatch> b(static_cast<IoBatch*>(arg));
    b->self->submit_pages(b->pages, Op::Read, b->pid, true);
}

// Page I/O down the stack: adjacent pages (in the file and in memory) share
// a bio, as read_pages()/mpage writepages would put them in one; the rest
// merge in the plug.
void BufferedIo::submit_pages(std::vector<Page*>& pages, Op op, uint32_t pid, bool sync) {
    if (pages.empty()) return;
    TaskContext* prev = layer_.current();
    TaskContext& io = io_task_for(pid);
    layer_.set_current(&io);
    bool own_plug = !io.plug.active;
    if (own_plug) layer_.start_plug(io);
    size_t i = 0;
    while (i < pages.size()) {
        Page* first = pages[i];
        uint64_t bytes = cache_->page_bytes(first->index);
        size_t j = i + 1;
        while (j < pages.size() && j - i < kBioMaxPages && bytes == (j - i) * kCachePageSize &&
               pages[j]->index == pages[j - 1]->index + 1 &&
               pages[j]->data == pages[j - 1]->data + kCachePageSize) {
            bytes += cache_->page_bytes(pages[j]->index);
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
        bio->end_io = op == Op::Read ? &BufferedIo::read_endio : &BufferedIo::write_endio;
        bio->private_data = first;
        bio->tag = reinterpret_cast<uint64_t>(this);
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

TaskContext& BufferedIo::io_task_for(uint32_t pid) {
    auto [it, added] = io_tasks_.try_emplace(pid);
    if (added) it->second.pid = pid;
    return it->second;
}

void BufferedIo::kick() {
    for (MemberQueue* m : members_) m->backend().kick();
}

// The read completed: pages become up to date (or PG_error) and unlock,
// which wakes their waiters (end_page_read / unlock_page).
void BufferedIo::read_endio(Bio* bio) {
    auto* self = reinterpret_cast<BufferedIo*>(bio->tag);
    bool failed = bio->error != 0;
    Wakeups wake;
    bool wb;
    {
        std::lock_guard<std::mutex> lock(self->cache_->mutex());
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
            self->cache_->put(p);
            p = next;
        }
        wb = self->cache_->take_writeback_wanted();
    }
    bio->pool->put(bio);
    self->fire_waiters(wake, true);
    if (wb && !self->writeback_scheduled_) {
        self->writeback_scheduled_ = true;
        self->loop_.defer(&BufferedIo::writeback_cb, self);
    }
}

void BufferedIo::write_endio(Bio* bio) {
    auto* self = reinterpret_cast<BufferedIo*>(bio->tag);
    bool failed = bio->error != 0;
    Wakeups wake;
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
            self->end_writeback_locked(p, wake);
            auto it = self->wb_outstanding_.find(p->wb_batch);
            if (it != self->wb_outstanding_.end() && --it->second == 0)
                self->wb_outstanding_.erase(it);
            self->cache_->put(p);
            p = next;
        }
    }
    bio->pool->put(bio);
    self->fire_waiters(wake, true);
    // fsync completions, throttled writers and more write-back run from a
    // deferred callback: we may be inside a submission here.
    if (!self->writeback_scheduled_) {
        self->writeback_scheduled_ = true;
        self->loop_.defer(&BufferedIo::writeback_cb, self);
    }
}

// wake_up_page_bit(): the page's waiters for `bit` move to `wake`.
void BufferedIo::take_waiters_locked(Page* page, uint32_t bit, Wakeups& wake) {
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

void BufferedIo::unlock_page_locked(Page* page, Wakeups& wake) {
    page->flags &= ~kPgLocked;
    take_waiters_locked(page, kPgLocked, wake);
    if (page->sleepers) wake.sleepers.push_back(&cache_->waitqueue(page));
}

void BufferedIo::end_writeback_locked(Page* page, Wakeups& wake) {
    cache_->end_writeback(page);
    take_waiters_locked(page, kPgWriteback, wake);
}

// wake_page_function(): the callbacks run on the loop thread, after the
// waker (as io_async_buf_func's task_work does).
void BufferedIo::fire_waiters(Wakeups& wake, bool loop_thread) {
    for (std::condition_variable* cv : wake.sleepers) cv->notify_all();
    wake.sleepers.clear();
    for (PageWaiter* w : wake.waiters) {
        if (loop_thread)
            loop_.defer(&BufferedIo::fire_waiter_cb, w);
        else
            loop_.post(&BufferedIo::fire_waiter_cb, w);
    }
    wake.waiters.clear();
}

void BufferedIo::fire_waiter_cb(void* arg, uint64_t) {
    auto* w = static_cast<PageWaiter*>(arg);
    w->fn(w);
}

// ---------------------------------------------------------------- completion

void BufferedIo::complete(Request& r, Exec& x, int32_t error) {
    charge(x, costs_.cqe_ns);
    if (r.completed) {  // never expected: counted, not delivered twice
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stats_.double_completions++;
        return;
    }
    r.completed = true;
    r.error = error;
    r.path.completed_in = x.where;
    if (x.where == BufferedWhere::Worker && !virtual_) {
        loop_.post(&BufferedIo::deliver_cb, &r);
        return;
    }
    uint64_t at = x.t;
    // A worker's CQE wakes the task sleeping in io_cqring_wait() on another
    // CPU (io_cqring_ev_posted() -> wake_up(&ctx->wait)); a busy submitter
    // sees it without one.
    if (virtual_ && x.where == BufferedWhere::Worker && submitter_busy_ <= x.t)
        at += costs_.wakeup_ns;
    if (virtual_ && at > loop_.now()) {
        loop_.schedule_at(at, &BufferedIo::deliver_cb, &r);
        return;
    }
    deliver(r);
}

void BufferedIo::deliver_cb(void* arg, uint64_t) {
    auto* r = static_cast<Request*>(arg);
    r->self->deliver(*r);
}

// io_cqring_add_event() as the task sees it: the completion appears in
// task.completions (loop thread).
void BufferedIo::deliver(Request& r) {
    BufferedPath& p = r.path;
    p.completions++;
    p.error = r.error;
    if (r.error) p.resid += r.len - r.done;
    if (record_paths_) p.complete_ns = loop_.now();
    p.issued_by = p.worker_reads      ? BufferedWhere::Worker
                  : p.submitter_reads ? BufferedWhere::Submitter
                                      : BufferedWhere::None;
    switch (p.completed_in) {
        case BufferedWhere::Submitter:
            stats_.inline_completions++;
            break;
        case BufferedWhere::TaskWork:
            stats_.task_work_completions++;
            break;
        case BufferedWhere::Worker:
            stats_.worker_completions++;
            break;
        case BufferedWhere::None:
            break;
    }
    if (r.error) stats_.errors++;
    if (r.remote) loop_.expect_remote(-1);
    r.task->completions.push_back(IoCompletion{r.cookie, r.error, p.resid});
    r.task->in_flight--;
    if (record_paths_) paths_.push_back(p);
    live_requests_--;
    requests_.put(&r);
}

// ---------------------------------------------------------------- writes

void BufferedIo::write(TaskContext& task, uint64_t offset, uint64_t length, const void* buffer,
                       uint64_t cookie) {
    uint64_t size = cache_->file_bytes();
    Request* r = new_request(task, Op::Write, offset, length, const_cast<void*>(buffer), cookie);
    Exec x = submitter_exec(task.pid);
    if (offset > size || length > size - offset) {
        r->len = 0;
        r->path.resid = length;
        complete(*r, x, -ENOSPC);
        submitter_done(x);
        return;
    }
    stats_.writes++;
    stats_.write_bytes += length;
    if (length == 0)
        complete(*r, x, 0);
    else
        io_write(*r, x);
    submitter_done(x);
}

void BufferedIo::io_write(Request& r, Exec& x) {
    ReadResult res = write_attempt(r, x);
    flush_reads(x);
    if (res == ReadResult::Queued) return;  // resumes from the page's callback
    if (res == ReadResult::Error) {
        complete(r, x, r.error);
        return;
    }
    // balance_dirty_pages()
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
        return;
    }
    complete(r, x, 0);
}

// generic_perform_write(): write_begin (find or create the page, read it
// first if it is partly written and not up to date, wait while it is
// locked or under write-back: stable pages), copy, mark up to date and
// dirty, write_end.
BufferedIo::ReadResult BufferedIo::write_attempt(Request& r, Exec& x) {
    PageCache& pc = *cache_;
    Wakeups wake;
    std::unique_lock<std::mutex> lk(pc.mutex());
    RaControl ctl(*this, x, r);
    ReadResult result = ReadResult::Done;
    while (r.done < r.len) {
        const uint64_t pos = r.pos + r.done;
        const uint64_t index = pos >> kPageShift;
        const uint32_t off = uint32_t(pos & (kCachePageSize - 1));
        const uint64_t n = std::min<uint64_t>(kCachePageSize - off, r.len - r.done);
        const uint32_t valid = pc.page_bytes(index);
        const bool full = off == 0 && n >= valid;
        charge(x, costs_.lookup_ns);
        Page* p = pc.find(index);
        if (!p) {
            charge(x, costs_.page_alloc_ns);
            p = pc.add_locked(index);
            if (!p) {
                r.error = -EIO;
                result = ReadResult::Error;
                break;
            }
            if (!full) {
                // A partial page: read it before writing into it.
                stats_.read_for_write++;
                ctl.readpage(p);
                arm_locked(r, p, kPgLocked, &BufferedIo::on_page_wake);
                pc.put(p);
                r.path.waits++;
                result = ReadResult::Queued;
                break;
            }
        } else {
            pc.get(p);
            uint32_t busy = p->locked()      ? uint32_t(kPgLocked)
                            : p->writeback() ? uint32_t(kPgWriteback)
                                             : 0u;
            if (busy) {
                stats_.write_waits++;
                r.path.waits++;
                arm_locked(r, p, busy, &BufferedIo::on_page_wake);
                pc.put(p);
                result = ReadResult::Queued;
                break;
            }
            if (!p->uptodate() && !full) {
                if (p->flags & kPgError) {
                    if (r.failed_index == index) {
                        pc.put(p);
                        r.error = -EIO;
                        result = ReadResult::Error;
                        break;
                    }
                    r.failed_index = index;
                    p->flags &= ~kPgError;
                }
                stats_.read_for_write++;
                p->flags |= kPgLocked;
                ctl.readpage(p);
                arm_locked(r, p, kPgLocked, &BufferedIo::on_page_wake);
                pc.put(p);
                r.path.waits++;
                result = ReadResult::Queued;
                break;
            }
            p->flags |= kPgLocked;  // write_begin returns the page locked
        }
        // Copy outside the cache lock; the page is locked and referenced.
        uint8_t* dst = p->data;
        lk.unlock();
        memcpy(dst + off, r.buf + r.done, n);
        if (full && valid < kCachePageSize) memset(dst + valid, 0, kCachePageSize - valid);
        lk.lock();
        charge(x, (costs_.copy_4k_ns * n + kCachePageSize - 1) / kCachePageSize +
                      costs_.dirty_page_ns);
        p->flags |= kPgUptodate;
        p->flags &= ~kPgError;
        if (!p->dirty()) stats_.pages_dirtied++;
        pc.set_dirty(p);
        p->memcg_owner = r.task->pid;  // account_page_dirtied(): the dirtier's memcg
        unlock_page_locked(p, wake);
        pc.mark_accessed(p);
        pc.put(p);
        r.done += n;
    }
    lk.unlock();
    fire_waiters(wake, true);
    return result;
}

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
        submit_pages(own, Op::Write, own.front()->memcg_owner, sync);
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
        Exec x;
        x.where = BufferedWhere::TaskWork;
        x.pid = r->task->pid;
        x.t = loop_.now();
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
        Exec x;
        x.where = BufferedWhere::TaskWork;
        x.pid = r->task->pid;
        x.t = loop_.now();
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
        Exec x = submitter_exec(task.pid);
        complete(*r, x, error);
        submitter_done(x);
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
    std::lock_guard<std::mutex> lock(cache_->mutex());
    stats_.invalidations++;
    stats_.invalidated_pages += cache_->invalidate_clean();
    for (auto& [pid, ra] : ra_states_) {
        uint64_t pages = ra.ra_pages;
        ra = FileRaState{};
        ra.ra_pages = pages;
    }
}

// ---------------------------------------------------------------- statistics

BufferedStats BufferedIo::stats() const {
    BufferedStats s;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        s = stats_;
    }
    std::lock_guard<std::mutex> lock(wq_mutex_);
    s.busy_worker_high_water = stats_busy_high_water_;
    return s;
}

void BufferedIo::write_unused_json(std::ostream& o, const PageCacheConfig& config) {
    o << "{\"enabled\": false, \"size_bytes\": " << config.size_bytes
      << ", \"ra_kb\": " << config.ra_kb << ", \"rasync\": " << (config.rasync ? "true" : "false")
      << ", \"variant\": \"" << buffered_variant_name(config.variant) << "\"}";
}

void BufferedIo::write_json(std::ostream& o) const {
    BufferedStats s = stats();
    PageCacheStats c;
    size_t pages, dirty, writeback;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        c = cache_->stats();
        pages = cache_->nr_pages();
        dirty = cache_->nr_dirty();
        writeback = cache_->nr_writeback();
    }
    uint64_t looks = s.hits + s.misses;
    o << "{\"enabled\": " << (used_ ? "true" : "false")
      << ", \"size_bytes\": " << config_.size_bytes
      << ", \"capacity_pages\": " << cache_->capacity_pages() << ", \"ra_kb\": " << config_.ra_kb
      << ", \"rasync\": " << (config_.rasync ? "true" : "false") << ", \"variant\": \""
      << buffered_variant_name(config_.variant)
      << "\", \"virtual_time\": " << (virtual_ ? "true" : "false")
      << ", \"max_workers\": " << max_workers() << ", \"pages\": " << pages
      << ", \"dirty\": " << dirty << ", \"writeback\": " << writeback
      << ", \"high_water_pages\": " << c.high_water << ", \"pages_added\": " << c.pages_added
      << ", \"evictions\": " << c.evictions << ", \"evict_skipped\": " << c.evict_skipped
      << ", \"over_limit\": " << c.over_limit << ", \"memory_bytes\": " << c.data_bytes
      << ", \"reads\": " << s.reads << ", \"writes\": " << s.writes << ", \"fsyncs\": " << s.fsyncs
      << ", \"read_bytes\": " << s.read_bytes << ", \"write_bytes\": " << s.write_bytes
      << ", \"hits\": " << s.hits << ", \"misses\": " << s.misses
      << ", \"hit_ratio\": " << (looks ? double(s.hits) / double(looks) : 0.0)
      << ", \"readahead\": {";
    uint64_t windows = 0, ra_pages = 0;
    for (int k = 0; k < 4; k++) {
        windows += s.ra_windows[k];
        ra_pages += s.ra_pages[k];
    }
    o << "\"windows\": " << windows << ", \"pages\": " << ra_pages;
    for (int k = 0; k < 4; k++)
        o << ", \"" << ra_kind_name(RaKind(k)) << "\": {\"windows\": " << s.ra_windows[k]
          << ", \"pages\": " << s.ra_pages[k] << "}";
    o << ", \"window_sizes\": {";
    bool first = true;
    for (auto& [size, count] : s.ra_window_sizes) {
        o << (first ? "" : ", ") << "\"" << size << "\": " << count;
        first = false;
    }
    o << "}}, \"pages_read\": " << s.pages_read << ", \"read_bios\": " << s.read_bios
      << ", \"read_errors\": " << s.read_errors << ", \"inline_attempts\": " << s.inline_attempts
      << ", \"worker_attempts\": " << s.worker_attempts
      << ", \"callbacks_armed\": " << s.callbacks_armed
      << ", \"task_work_runs\": " << s.task_work_runs << ", \"punts\": " << s.punts
      << ", \"inline_completions\": " << s.inline_completions
      << ", \"task_work_completions\": " << s.task_work_completions
      << ", \"worker_completions\": " << s.worker_completions
      << ", \"submitter_page_reads\": " << s.submitter_page_reads
      << ", \"worker_page_reads\": " << s.worker_page_reads
      << ", \"workers_created\": " << s.workers_created
      << ", \"worker_high_water\": " << s.worker_high_water
      << ", \"busy_worker_high_water\": " << s.busy_worker_high_water
      << ", \"worker_sleeps\": " << s.worker_sleeps
      << ", \"submitter_blocks\": " << s.submitter_blocks
      << ", \"pages_dirtied\": " << s.pages_dirtied << ", \"read_for_write\": " << s.read_for_write
      << ", \"write_waits\": " << s.write_waits << ", \"throttled_writes\": " << s.throttled_writes
      << ", \"writeback_pages\": " << s.writeback_pages
      << ", \"writeback_bios\": " << s.writeback_bios
      << ", \"writeback_errors\": " << s.writeback_errors << ", \"syncs\": " << s.syncs
      << ", \"invalidations\": " << s.invalidations
      << ", \"invalidated_pages\": " << s.invalidated_pages << ", \"errors\": " << s.errors
      << ", \"double_completions\": " << s.double_completions << "}";
}

}  // namespace mdsplit
