// The submitting task's CPU, real or modelled (submitter_cpu.h); its
// task_work queue follows kernel/task_work.c (task_work_add(), and
// task_work_run() when the task next runs).
#include "core/io_uring/submitter_cpu.h"

#include <algorithm>

#include "core/io_uring/kiocb.h"

namespace mdsplit {

ExecContext SubmitterCpuReal::enter(BufferedWhere where, uint32_t pid) {
    ExecContext x;
    x.where = where;
    x.pid = pid;
    return x;
}

ExecContext SubmitterCpuReal::wake(uint32_t pid) const {
    ExecContext x;
    x.where = BufferedWhere::TaskWork;
    x.pid = pid;
    x.t = io_.loop_.now();
    return x;
}

// The loop thread is the submitting task: its task_work runs now.
void SubmitterCpuReal::queue_task_work(BufferedIo::Request& r) { io_.run_task_work(r); }

ExecContext SubmitterCpuModelled::enter(BufferedWhere where, uint32_t pid) {
    ExecContext x;
    x.where = where;
    x.pid = pid;
    x.modelled = true;
    x.t = std::max(io_.loop_.now(), busy_until_);
    return x;
}

void SubmitterCpuModelled::leave(const ExecContext& x) { busy_until_ = std::max(busy_until_, x.t); }

ExecContext SubmitterCpuModelled::wake(uint32_t pid) const {
    ExecContext x;
    x.where = BufferedWhere::TaskWork;
    x.pid = pid;
    x.modelled = true;
    x.t = io_.loop_.now();
    return x;
}

void SubmitterCpuModelled::charge(uint64_t ns) {
    busy_until_ = std::max(busy_until_, io_.loop_.now()) + ns;
}

// The task_work queues for the submitter's modelled CPU, one item per turn.
void SubmitterCpuModelled::queue_task_work(BufferedIo::Request& r) {
    task_work_.push_back(&r);
    if (!timer_armed_) arm_timer();
}

void SubmitterCpuModelled::arm_timer() {
    timer_armed_ = true;
    io_.loop_.schedule_at(std::max(io_.loop_.now(), busy_until_),
                          &SubmitterCpuModelled::task_work_timer, this);
}

void SubmitterCpuModelled::task_work_timer(void* arg, uint64_t) {
    auto* self = static_cast<SubmitterCpuModelled*>(arg);
    self->timer_armed_ = false;
    if (self->task_work_.empty()) return;
    if (self->busy_until_ <= self->io_.loop_.now()) {
        BufferedIo::Request* r = self->task_work_.front();
        self->task_work_.pop_front();
        self->io_.run_task_work(*r);
    }
    if (!self->task_work_.empty()) self->arm_timer();
}

uint64_t SubmitterCpuModelled::cqe_wakeup(const ExecContext& x) const {
    return x.where == BufferedWhere::Worker && busy_until_ <= x.t ? io_.costs_.wakeup_ns : 0;
}

}  // namespace mdsplit
