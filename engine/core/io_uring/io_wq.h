// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9): the pool of workers a
// punted request runs on. One interface, two implementations, chosen once
// by the clock the stack runs on (as TigerBeetle's simulated storage takes
// time as a parameter rather than a branch):
//   IoWqThreads (io_wq_threads.cpp)  real std::threads that sleep on page
//                                    locks for real (the real clock)
//   IoWqVirtual (io_wq_virtual.cpp)  modelled CPUs on the virtual clock: a
//                                    worker's sleep is a page-wait callback
//                                    and a wake-up costs BufferedCosts::wakeup_ns
// What a worker does with a request is written once, in BufferedIo
// (io_wq_submit_work(), io_uring_rw.cpp); the pools only decide where and
// when it runs, and which of Filemap's page waits a worker uses (sleeping:
// wait_on_page_locked(); modelled: wait_on_page_locked_async()). The
// submitter's CPU is the other half of the execution mode
// (submitter_cpu.h); make_buffered_exec() chooses both at once.
// The bound is io_wq_create()'s as io_uring sets it up: at most
// min(iodepth, 4 x CPUs) workers (io_wqe_create_worker() on demand).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/io_uring/buffered_io.h"

namespace mdsplit {

class IoWq {
public:
    virtual ~IoWq() = default;
    // io_wq_enqueue(): r runs on a worker; `t` is when the punt was made
    // (the submitter's modelled time on the virtual clock).
    virtual void enqueue(BufferedIo::Request& r, uint64_t t) = 0;
    // The CPUs the 4 x CPUs bound counts.
    virtual uint32_t cpus() const = 0;
    // Most workers running work at once.
    virtual uint64_t busy_high_water() const = 0;
    // Before destruction: sleeping and idle workers give up.
    virtual void stop() = 0;
};

// The real clock: one std::thread per worker (io_wqe_worker()).
class IoWqThreads final : public IoWq {
public:
    explicit IoWqThreads(BufferedIo& io);
    ~IoWqThreads() override;
    void enqueue(BufferedIo::Request& r, uint64_t t) override;
    uint32_t cpus() const override { return cpus_; }
    uint64_t busy_high_water() const override;
    void stop() override;

private:
    void worker_main(uint32_t id);
    void run_work(BufferedIo::Request& r, uint32_t id);

    BufferedIo& io_;
    uint32_t cpus_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<BufferedIo::Request*> queue_;
    std::vector<std::thread> threads_;
    uint32_t idle_ = 0;
    uint32_t busy_ = 0;
    uint64_t busy_high_water_ = 0;  // under mutex_
    bool stop_ = false;
};

// The virtual clock: workers are modelled CPUs. A sleeping worker takes
// wakeup_ns to run; a busy one picks the next work as soon as it is free.
class IoWqVirtual final : public IoWq {
public:
    explicit IoWqVirtual(BufferedIo& io) : io_(io) {}
    void enqueue(BufferedIo::Request& r, uint64_t t) override;
    uint32_t cpus() const override;
    uint64_t busy_high_water() const override { return busy_high_water_; }
    void stop() override {}

private:
    struct Worker {
        uint32_t id = 0;
        bool busy = false;
        uint64_t free_at = 0;
    };
    void dispatch(uint64_t t);
    void start(Worker& w, BufferedIo::Request& r, uint64_t t);
    static void run_cb(void* arg, uint64_t);
    void run(BufferedIo::Request& r);
    static void on_page_wake(PageWaiter* w);

    BufferedIo& io_;
    std::vector<Worker> workers_;
    std::deque<BufferedIo::Request*> queue_;
    uint64_t busy_ = 0;
    uint64_t busy_high_water_ = 0;
};

// The execution mode of the buffered path: the submitter's CPU and io-wq's
// pool, both real (the real clock) or both modelled (the virtual clock).
struct BufferedExec {
    std::unique_ptr<SubmitterCpu> cpu;
    std::unique_ptr<IoWq> wq;
};
BufferedExec make_buffered_exec(BufferedIo& io, bool virtual_clock);

}  // namespace mdsplit
