// The interface between a member queue (blk-mq hardware queue) and an I/O
// scheduler (struct elevator_mq_ops in include/linux/elevator.h), reduced to
// the hooks the emulation needs:
//
//   bio_merge        -> find_merge() + merged()   (bfq_bio_merge /
//                       blk_mq_sched_try_merge / bfq_request_merged)
//   insert_requests  -> insert()                  (bfq_insert_requests)
//   dispatch_request -> dispatch()                (bfq_dispatch_request)
//   has_work         -> has_work()
//   finish_request   -> completed()               (bfq_finish_requeue_request)
//
// The member queue inserts every request that leaves the plug, and pulls
// from dispatch() whenever it runs its hardware queue: after insertions,
// after each completion (a driver tag frees), and when the scheduler asks
// for a run (bfq_schedule_dispatch, e.g. when its idle timer fires).
#pragma once

#include <cstdint>

#include "base/json_writer.h"
#include "core/block/bio.h"
#include "core/block/request.h"
#include "core/block/task_context.h"

namespace mdsplit {

class IoScheduler {
public:
    // blk_mq_run_hw_queues(): the scheduler wants its queue run.
    using RunQueueFn = void (*)(void* ctx);

    virtual ~IoScheduler() = default;
    virtual const char* name() const = 0;

    // A queued request of the submitting task that `bio` may join, or null.
    // `front` tells which end: true = the bio ends where the request starts.
    // The caller checks size and segment limits and performs the merge.
    virtual Request* find_merge(const Bio* bio, const TaskContext* task, bool& front) = 0;
    // `rq` grew by a merge the caller performed (elv_merged_request).
    virtual void merged(Request* rq, bool front) = 0;

    // A request leaves the plug (or arrives unplugged). `task` is its
    // submitter (null: an anonymous context, scheduled as the root group's
    // default task).
    virtual void insert(Request* rq, const TaskContext* task) = 0;
    // The next request for the device, or null (nothing queued, or the
    // scheduler deliberately keeps the device idle).
    virtual Request* dispatch() = 0;
    virtual bool has_work() const = 0;
    // The device completed a request handed out by dispatch(); called
    // before the request is freed.
    virtual void completed(Request* rq) = 0;

    // Request-to-request merges (block/blk-merge.c attempt_merge), for
    // schedulers that keep elv_rqhash (mq-deadline); the defaults say "no
    // such request", so a scheduler without them (bfq here) merges no
    // requests. elv_rqhash_find(): a queued request ending at `sector`.
    virtual Request* queued_ending_at(sector_t, Op) { return nullptr; }
    // elv_rb_find(): a queued request starting at `sector`.
    virtual Request* queued_starting_at(sector_t, Op) { return nullptr; }
    // elv_merge_requests() -> requests_merged: `next` joined the back of the
    // queued `rq`; `next_queued` says whether the scheduler held `next`.
    virtual void requests_merged(Request*, Request*, bool) {}
    // blk_mq_dispatch_list(): after a plug flush inserted a queue's batch,
    // blk_mq_run_hw_queue(hctx, from_schedule = false) runs it at once.
    // True for mq-deadline; bfq keeps the emulator's deferred run.
    virtual bool runs_queue_at_unplug() const { return false; }
    // The submitting task exited, all its I/O done (its io_context's
    // exit_icq): bfq stops serving and idling for its queue.
    virtual void task_exited(const TaskContext&) {}

    // Statistics as one JSON object.
    virtual void write_json(JsonWriter& j) const = 0;

    void set_run_queue(RunQueueFn fn, void* ctx) {
        run_fn_ = fn;
        run_ctx_ = ctx;
    }

protected:
    void run_queue() {
        if (run_fn_) run_fn_(run_ctx_);
    }

private:
    RunQueueFn run_fn_ = nullptr;
    void* run_ctx_ = nullptr;
};

}  // namespace mdsplit
