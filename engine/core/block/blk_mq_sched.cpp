// MemberQueue's scheduler part (block/blk-mq-sched.c): requests leaving
// the plug are inserted into the I/O scheduler, and the hardware queue
// pulls from it when it runs (member_queue.h tells when).
#include "core/block/member_queue.h"

namespace mdsplit {

void MemberQueue::set_scheduler(std::unique_ptr<IoScheduler> scheduler) {
    scheduler_ = std::move(scheduler);
    if (scheduler_) scheduler_->set_run_queue(&MemberQueue::run_queue_cb, this);
}

// blk_mq_run_hw_queue(hctx, async): runs once, on the next turn of the loop.
void MemberQueue::run_queue_async() {
    if (run_pending_) return;
    run_pending_ = true;
    layer_.loop().defer(&MemberQueue::deferred_run, this);
}

void MemberQueue::run_queue_cb(void* ctx) { static_cast<MemberQueue*>(ctx)->run_queue_async(); }

void MemberQueue::deferred_run(void* arg, uint64_t) {
    auto* q = static_cast<MemberQueue*>(arg);
    q->run_pending_ = false;
    q->run_queue();
}

void MemberQueue::delayed_run(void* arg, uint64_t) {
    auto* q = static_cast<MemberQueue*>(arg);
    q->delay_timer_ = 0;
    q->run_queue();
}

// blk_mq_sched_dispatch_requests() -> __blk_mq_do_dispatch_sched(): first
// the requests already taken from the scheduler (hctx->dispatch), then ask
// the scheduler while it has work. A request without a driver tag waits on
// hctx->dispatch and marks the queue for restart; a run in which the
// scheduler had work but gave nothing re-runs the queue after
// BLK_MQ_BUDGET_DELAY (blk_mq_delay_run_hw_queues, mod_delayed_work).
void MemberQueue::run_queue() {
    if (!scheduler_) return;
    issue_waiting();
    if (waiting_head_) {
        restart_ = true;
        return;
    }
    constexpr uint64_t kBudgetDelayNs = 3'000'000;  // BLK_MQ_BUDGET_DELAY
    unsigned count = 0;
    while (scheduler_->has_work()) {
        Request* rq = scheduler_->dispatch();
        if (!rq) {
            if (!count) {
                // +1 ns: a re-run that falls on the very instant of a
                // completion runs after the submitter the completion wakes
                // (which, on the virtual clock, reacts at that same instant);
                // otherwise round model times would make the poll hit the
                // zero-length gap far more often than real timing does.
                if (delay_timer_) layer_.loop().cancel(delay_timer_);
                delay_timer_ = layer_.loop().schedule_at(layer_.loop().now() + kBudgetDelayNs + 1,
                                                         &MemberQueue::delayed_run, this);
            }
            break;
        }
        count++;
        if (in_flight_ < limits_.queue_depth) {
            issue(rq);
            continue;
        }
        // blk_mq_get_driver_tag() failed: onto hctx->dispatch, restart later.
        wait_for_tag(rq);
        restart_ = true;
        break;
    }
}

// The end of a plug flush's batch for this queue (blk_mq_dispatch_list):
// a scheduler that runs the hardware queue at once is run now.
void MemberQueue::end_unplug_batch() {
    if (scheduler_ && scheduler_->runs_queue_at_unplug()) run_queue();
}
}  // namespace mdsplit
