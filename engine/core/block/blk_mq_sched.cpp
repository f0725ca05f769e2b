// MemberQueue's scheduler part (block/blk-mq-sched.c): requests leaving
// the plug are inserted into the I/O scheduler, and the hardware queue
// pulls from it when it runs (member_queue.h tells when).
#include "core/block/member_queue.h"

#include "base/device_clock.h"

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

// blk_mq_sched_dispatch_requests(): first the requests already taken from
// the scheduler (hctx->dispatch); if they all went, the scheduler's
// (blk_mq_do_dispatch_sched). A request without a driver tag waits on
// hctx->dispatch and marks the queue for restart.
void MemberQueue::run_queue() {
    if (!scheduler_) return;
    issue_waiting();
    if (waiting_head_) {
        restart_ = true;
        return;
    }
    // blk_mq_do_dispatch_sched() (block/blk-mq-sched.c, 6.1 source):
    // passes are repeated while the last one dispatched, so a run always
    // ends with a pass that gave nothing, and that pass asks for the
    // delayed re-run if the scheduler had work it kept (bfq idling). The
    // loop's bail-out after HZ jiffies or on need_resched() is CPU time,
    // which the model has none of.
    while (dispatch_pass() == PassResult::Dispatched) {
    }
}

// __blk_mq_do_dispatch_sched(): one pass. Requests are taken while the
// scheduler has work and hctx->dispatch is empty, and each is issued at
// once (blk_mq_dispatch_rq_list() on the pass's list, here per request);
// one that finds no driver tag ends the pass on hctx->dispatch. The pass
// limit max_dispatch (nr_requests) is never the binding one: the tag
// depth is smaller. A pass that took nothing because the scheduler
// returned no request kicks the queue after BLK_MQ_BUDGET_DELAY.
MemberQueue::PassResult MemberQueue::dispatch_pass() {
    constexpr uint64_t kBudgetDelayMs = 3;  // BLK_MQ_BUDGET_DELAY
    unsigned count = 0;
    bool issued = false;
    while (scheduler_->has_work()) {
        if (waiting_head_) return PassResult::Busy;  // -EAGAIN
        Request* rq = scheduler_->dispatch();
        if (!rq) {
            if (!count) delay_run(kBudgetDelayMs);
            break;
        }
        count++;
        if (in_flight_ >= limits_.queue_depth) {
            // blk_mq_get_driver_tag() failed: onto hctx->dispatch.
            wait_for_tag(rq);
            restart_ = true;
            break;
        }
        issue(rq);
        issued = true;
    }
    return issued ? PassResult::Dispatched : PassResult::Idle;
}

// blk_mq_delay_run_hw_queues(q, msecs) (6.1): a re-run already pending
// (the delayed one, or an async run queued on the same run_work) is left
// untouched; otherwise kblockd_mod_delayed_work_on(.., msecs_to_jiffies)
// arms it, to fire at a tick. +1 ns: a re-run that falls on the very
// instant of a completion runs after the submitter the completion wakes
// (which, on the virtual clock, reacts at that same instant); otherwise
// round model times would make the poll hit the zero-length gap far more
// often than real timing does.
// The jiffies are device time: with slow motion (time_scale k) the tick
// comes every k/HZ s of loop time.
void MemberQueue::delay_run(uint64_t msecs) {
    if (delay_timer_ || run_pending_) return;
    const uint32_t hz = limits_.hz;
    const DeviceClock clock(limits_.time_scale);
    const uint64_t device_now = clock.device_ns(layer_.loop().now());
    const uint64_t at = jiffies::timer_fires_ns(device_now, jiffies::from_msecs(msecs, hz), hz);
    delay_timer_ =
        layer_.loop().schedule_at(clock.loop_ns(at) + 1, &MemberQueue::delayed_run, this);
}

// The end of a plug flush's batch for this queue (blk_mq_dispatch_list):
// a scheduler that runs the hardware queue at once is run now.
void MemberQueue::end_unplug_batch() {
    if (scheduler_ && scheduler_->runs_queue_at_unplug()) run_queue();
}
}  // namespace mdsplit
