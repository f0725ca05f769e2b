// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9): the pool of workers a
// punted request runs on, at most min(iodepth, 4 x CPUs)
// (io_wq_create()'s bound as io_uring sets it up).
#include <algorithm>
#include <mutex>

#include "core/kiocb.h"

namespace mdsplit {

uint32_t BufferedIo::max_workers() const {
    uint32_t cpus = virtual_ ? std::max(1u, costs_.cpus) : real_cpus_;
    uint32_t bound = 4 * cpus;
    return iodepth_ ? std::min(iodepth_, bound) : bound;
}

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
    self->loop_.schedule_at(self->loop_.now() + self->costs_.wakeup_ns, &BufferedIo::vworker_run_cb,
                            r);
}

}  // namespace mdsplit
