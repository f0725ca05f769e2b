// The submitting task's CPU: where the inline attempts, task_work
// (kernel/task_work.c: task_work_add(), run by the task itself) and the
// completions of the buffered path run. One interface, two implementations,
// chosen once with io-wq's pool (make_buffered_exec(), io_wq.cpp), so the
// issue path is written once and the execution mode is a parameter:
//   SubmitterCpuReal      the real clock: the steps cost what they really
//                         cost, nothing is accounted; task_work runs at once
//                         (the loop thread is the submitter)
//   SubmitterCpuModelled  the virtual clock: the submitter is a modelled CPU,
//                         busy until the time its last context reached; its
//                         task_work queues behind that, one item per turn,
//                         and a worker's CQE that finds it idle costs a
//                         wake-up (BufferedCosts::wakeup_ns)
#pragma once

#include <cstdint>
#include <deque>

#include "core/io_uring/buffered_io.h"

namespace mdsplit {

class SubmitterCpu {
public:
    virtual ~SubmitterCpu() = default;
    // A context on the submitter for job `pid`: the modelled one starts once
    // the CPU is free and its steps advance its time by their cost.
    virtual ExecContext enter(BufferedWhere where, uint32_t pid) = 0;
    // The context ended at x.t: the CPU is busy until then.
    virtual void leave(const ExecContext& x) = 0;
    // A context in the task that runs now, whatever the submitter does (a
    // completion that write-back wakes: fsync, a throttled writer).
    virtual ExecContext wake(uint32_t pid) const = 0;
    // The workload driver's own work (fio's per-I/O cost).
    virtual void charge(uint64_t ns) = 0;
    // When the submitter is free to issue again (0: always).
    virtual uint64_t free_at() const = 0;
    // io_req_task_work_add(): r's retry runs on the submitter
    // (BufferedIo::run_task_work()).
    virtual void queue_task_work(BufferedIo::Request& r) = 0;
    // What a CQE posted from context x adds before the task sees it: a
    // worker's CQE wakes the task sleeping in io_cqring_wait() on another
    // CPU (io_cqring_ev_posted() -> wake_up(&ctx->wait)); a busy submitter
    // sees it without one.
    virtual uint64_t cqe_wakeup(const ExecContext& x) const = 0;
};

class SubmitterCpuReal final : public SubmitterCpu {
public:
    explicit SubmitterCpuReal(BufferedIo& io) : io_(io) {}
    ExecContext enter(BufferedWhere where, uint32_t pid) override;
    void leave(const ExecContext&) override {}
    ExecContext wake(uint32_t pid) const override;
    void charge(uint64_t) override {}
    uint64_t free_at() const override { return 0; }
    void queue_task_work(BufferedIo::Request& r) override;
    uint64_t cqe_wakeup(const ExecContext&) const override { return 0; }

private:
    BufferedIo& io_;
};

class SubmitterCpuModelled final : public SubmitterCpu {
public:
    explicit SubmitterCpuModelled(BufferedIo& io) : io_(io) {}
    ExecContext enter(BufferedWhere where, uint32_t pid) override;
    void leave(const ExecContext& x) override;
    ExecContext wake(uint32_t pid) const override;
    void charge(uint64_t ns) override;
    uint64_t free_at() const override { return busy_until_; }
    void queue_task_work(BufferedIo::Request& r) override;
    uint64_t cqe_wakeup(const ExecContext& x) const override;

private:
    void arm_timer();
    static void task_work_timer(void* arg, uint64_t);

    BufferedIo& io_;
    uint64_t busy_until_ = 0;
    std::deque<BufferedIo::Request*> task_work_;
    bool timer_armed_ = false;
};

}  // namespace mdsplit
