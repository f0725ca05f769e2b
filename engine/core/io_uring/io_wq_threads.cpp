// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9) on the real clock: workers
// are std::threads created on demand (io_wqe_create_worker()) that take
// work from one queue (io_wqe_worker() -> io_worker_handle_work()) and
// sleep on page locks for real (wait_on_page_locked_killable()). The reads
// they start and their completions go to the loop thread by post()
// (ExecContext::on_loop = false, core/mm/kiocb.h).
#include <algorithm>

#include "core/io_uring/io_wq.h"
#include "core/io_uring/kiocb.h"

namespace mdsplit {

IoWqThreads::IoWqThreads(BufferedIo& io)
    : io_(io), cpus_(std::max(1u, std::thread::hardware_concurrency())) {}

IoWqThreads::~IoWqThreads() { stop(); }

void IoWqThreads::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_)
        if (t.joinable()) t.join();
}

uint64_t IoWqThreads::busy_high_water() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return busy_high_water_;
}

void IoWqThreads::enqueue(BufferedIo::Request& r, uint64_t /*t*/) {
    r.remote = true;
    io_.loop_.expect_remote(1);
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(&r);
    if (idle_ > 0) cv_.notify_one();
    if (queue_.size() > idle_ && threads_.size() < io_.max_workers()) {
        uint32_t id = uint32_t(threads_.size()) + 1;
        threads_.emplace_back(&IoWqThreads::worker_main, this, id);
        io_.stats_.workers_created++;
        io_.stats_.worker_high_water =
            std::max<uint64_t>(io_.stats_.worker_high_water, threads_.size());
    }
}

// io_wqe_worker(): takes work, runs it to completion.
void IoWqThreads::worker_main(uint32_t id) {
    std::unique_lock<std::mutex> lk(mutex_);
    for (;;) {
        while (queue_.empty() && !stop_) {
            idle_++;
            cv_.wait(lk);
            idle_--;
        }
        if (stop_) return;
        BufferedIo::Request* r = queue_.front();
        queue_.pop_front();
        busy_++;
        busy_high_water_ = std::max<uint64_t>(busy_high_water_, busy_);
        lk.unlock();
        run_work(*r, id);
        lk.lock();
        busy_--;
    }
}

// The worker's blocking read: io_wq_submit_work() until it completes,
// sleeping on each page it must wait for.
void IoWqThreads::run_work(BufferedIo::Request& r, uint32_t id) {
    r.path.worker = id;
    ExecContext x;
    x.where = BufferedWhere::Worker;
    x.pid = r.task->pid;
    x.on_loop = false;
    while (Page* page = io_.io_wq_submit_work(r, x))
        if (!io_.filemap_->wait_on_page_locked(page)) return;  // shutting down
}

}  // namespace mdsplit
