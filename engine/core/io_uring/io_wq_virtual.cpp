// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9) on the virtual clock: the
// workers are modelled CPUs (BufferedCosts::cpus bounds them), nothing runs
// on another thread, so a run is deterministic. A worker that must wait for
// a locked page arms a page-wait callback instead of sleeping; waking it
// (and starting an idle one) costs BufferedCosts::wakeup_ns; a worker that
// finishes takes the next work at once (io_worker_handle_work()).
#include <algorithm>

#include "core/io_uring/io_wq.h"
#include "core/io_uring/kiocb.h"

namespace mdsplit {

uint32_t IoWqVirtual::cpus() const { return std::max(1u, io_.costs_.cpus); }

void IoWqVirtual::enqueue(BufferedIo::Request& r, uint64_t t) {
    queue_.push_back(&r);
    dispatch(t);
}

// io_wqe_wake_worker() / io_wqe_create_worker(): an idle worker, else a new
// one under the bound, else the work waits for the first to finish.
void IoWqVirtual::dispatch(uint64_t t) {
    while (!queue_.empty()) {
        Worker* w = nullptr;
        for (Worker& v : workers_)
            if (!v.busy) {
                w = &v;
                break;
            }
        uint64_t at;
        if (w) {
            at = std::max(t, w->free_at) + io_.costs_.wakeup_ns;
        } else if (workers_.size() < io_.max_workers()) {
            workers_.push_back(Worker{uint32_t(workers_.size()) + 1, false, 0});
            w = &workers_.back();
            io_.stats_.workers_created++;
            io_.stats_.worker_high_water =
                std::max<uint64_t>(io_.stats_.worker_high_water, workers_.size());
            at = t + io_.costs_.wakeup_ns;
        } else {
            return;  // all busy: the first to finish takes it
        }
        BufferedIo::Request* r = queue_.front();
        queue_.pop_front();
        start(*w, *r, at);
    }
}

void IoWqVirtual::start(Worker& w, BufferedIo::Request& r, uint64_t t) {
    w.busy = true;
    r.path.worker = w.id;
    busy_++;
    busy_high_water_ = std::max<uint64_t>(busy_high_water_, busy_);
    io_.loop_.schedule_at(std::max(t, io_.loop_.now()), &IoWqVirtual::run_cb, &r);
}

void IoWqVirtual::run_cb(void* arg, uint64_t) {
    auto* r = static_cast<BufferedIo::Request*>(arg);
    static_cast<IoWqVirtual&>(*r->self->wq_).run(*r);
}

// One turn of io_wq_submit_work() on r's worker; a wait on a page resumes
// from on_page_wake().
void IoWqVirtual::run(BufferedIo::Request& r) {
    ExecContext x;
    x.where = BufferedWhere::Worker;
    x.pid = r.task->pid;
    x.modelled = true;
    x.t = io_.loop_.now();
    const uint32_t id = r.path.worker;
    if (Page* page = io_.io_wq_submit_work(r, x)) {  // may free r when it completes
        io_.filemap_->wait_on_page_locked_async(r, page, &IoWqVirtual::on_page_wake);
        return;
    }
    Worker& w = workers_[id - 1];
    w.busy = false;
    w.free_at = x.t;
    busy_--;
    if (!queue_.empty()) {
        // io_worker_handle_work(): still running, no wake-up needed.
        BufferedIo::Request* next = queue_.front();
        queue_.pop_front();
        start(w, *next, x.t);
    }
}

void IoWqVirtual::on_page_wake(PageWaiter* w) {
    auto* r = &BufferedIo::Request::of(w);
    BufferedIo& io = *r->self;
    io.filemap_->drop_waiter_page(*w);
    // The page's read completes on the CPU that issued it (nvme's per-CPU
    // queues; QUEUE_FLAG_SAME_COMP, blk_mq_complete_request(), 5.9): a
    // worker that read the page itself is woken by the interrupt on its own
    // CPU (ttwu on the local runqueue, nothing to add); a worker sleeping
    // on a page the submitter read (forced-ra) is woken from the
    // submitter's CPU, a cross-CPU wake-up (try_to_wake_up() -> IPI).
    uint64_t wake = r->path.worker_reads ? 0 : io.costs_.wakeup_ns;
    io.loop_.schedule_at(io.loop_.now() + wake, &IoWqVirtual::run_cb, r);
}

}  // namespace mdsplit
