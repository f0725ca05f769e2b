// A request-based member device (blk-mq queue + driver): splits bios to its
// max_sectors, merges them into plugged requests, and issues requests to its
// backend up to its queue depth. One class over the kernel's files:
//   member_queue.cpp  block/blk-mq.c: submit, plug, issue, completion
//   blk_merge.cpp     block/blk-merge.c (and the elevator's insert merge)
//   blk_mq_sched.cpp  block/blk-mq-sched.c: the scheduler's dispatch
// How an issued request reaches the backend and comes back (the clock's
// and the storage's part) is a MemberDelivery chosen at construction
// (member_delivery.h).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "base/jiffies.h"
#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/io_scheduler.h"
#include "core/block/member_delivery.h"
#include "core/drivers/backend.h"
#include "core/trace/seek_histogram.h"
#include "core/trace/size_histogram.h"

namespace mdsplit {

struct MemberQueueLimits {
    uint32_t max_sectors = 1024;  // max_sectors_kb * 2
    uint32_t max_segments = 128;  // bios per request
    uint32_t queue_depth = 64;    // driver tags
    uint32_t logical_block_size = 512;
    // max_discard_sectors (a file-backed loop device's: UINT_MAX >> 9).
    // max_discard_segments is 1, as blk_set_default_limits() leaves it, so
    // discards never merge (blk_rq_get_max_segments()).
    uint32_t max_discard_sectors = UINT32_MAX >> kSectorShift;
    // CONFIG_HZ (100, 250, 300, 1000): the delayed queue re-run is kblockd
    // delayed work, rounded to whole jiffies (base/jiffies.h).
    uint32_t hz = jiffies::kConfigHz;
    // Slow motion (DeviceConfig::time_scale): the kernel's clock is device
    // time, loop time / time_scale, as the schedulers' constants are.
    double time_scale = 1.0;
};

class MemberQueue final : public BlockDevice {
public:
    // `delivery`: null is DirectDelivery (member_delivery.h).
    MemberQueue(BlockLayer& layer, std::string name, uint32_t devt,
                std::unique_ptr<Backend> backend, const MemberQueueLimits& limits,
                std::unique_ptr<MemberDelivery> delivery = nullptr);
    ~MemberQueue() override;

    void submit_bio(Bio* bio) override;
    bool stacked() const override { return false; }

    // A request leaves the plug (or arrives unplugged): issue it when a tag
    // is free, else it waits in the dispatch list.
    void dispatch(Request* rq);

    // --- I/O scheduler (none | bfq | mq-deadline) ----------------------------------------
    // With a scheduler, requests leaving the plug are inserted into it, and
    // the hardware queue pulls from it when it runs. As in blk-mq, it runs
    // after insertions, when the scheduler asks (bfq_schedule_dispatch, the
    // idle timer), after a completion only if a request was left waiting
    // for a driver tag (SCHED_RESTART), and BLK_MQ_BUDGET_DELAY (3 ms, in
    // jiffies) after a run that ended with the scheduler holding work it
    // would not give.
    void set_scheduler(std::unique_ptr<IoScheduler> scheduler);
    IoScheduler* scheduler() const { return scheduler_.get(); }
    // blk_mq_sched_dispatch_requests(): one run of the hardware queue.
    void run_queue();
    // A plug flush has inserted this queue's batch (blk_mq_dispatch_list).
    void end_unplug_batch();
    // ------------------------------------------------------------------------

    Backend& backend() { return *backend_; }
    // Makes every write this queue completed durable on the real storage:
    // the write-behind copies land first, then Backend::sync_data().
    int sync_data() { return delivery_->sync_data(); }
    // Writes to the real storage behind the model that failed
    // (WriteBehindDelivery; 0 for the other deliveries).
    uint64_t write_behind_errors() const { return delivery_->write_behind_errors(); }
    uint32_t in_flight() const { return in_flight_; }
    uint32_t queue_depth() const { return limits_.queue_depth; }
    const SeekHistogram& seeks() const { return seeks_; }
    const SizeHistogram& request_sizes() const { return request_sizes_; }
    const MemberQueueLimits& limits() const { return limits_; }

private:
    bool attempt_plug_merge(PlugList& plug, Bio* bio);
    bool try_back_merge(Request* rq, Bio* bio);
    bool try_front_merge(Request* rq, Bio* bio);
    Request* alloc_request(Bio* bio);
    void add_rq_to_plug(PlugList& plug, Request* rq);
    void issue(Request* rq);
    // No driver tag: rq waits at the tail of the hctx dispatch list.
    void wait_for_tag(Request* rq);
    void issue_waiting();
    static void end_request(void* ctx, Request* rq, int64_t res);
    void complete_request(Request* rq, int64_t res);

    BlockLayer& layer_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<MemberDelivery> delivery_;
    MemberQueueLimits limits_;
    uint64_t issue_seq_ = 0;
    uint32_t in_flight_ = 0;
    SeekHistogram seeks_;
    SizeHistogram request_sizes_;  // at issue (D)
    Request* waiting_head_ = nullptr;
    Request* waiting_tail_ = nullptr;
    // Scheduler state (null scheduler_: "none"). With a scheduler, the
    // waiting list above is hctx->dispatch: requests taken from the
    // scheduler that found no driver tag.
    bool attempt_sched_merge(Bio* bio);
    bool attempt_insert_merge(Request* rq);
    bool merge_requests(Request* rq, Request* next);
    void run_queue_async();
    static void run_queue_cb(void* ctx);
    static void deferred_run(void* arg, uint64_t tag);
    static void delayed_run(void* arg, uint64_t tag);
    enum class PassResult { Idle, Dispatched, Busy };
    PassResult dispatch_pass();
    void delay_run(uint64_t msecs);
    std::unique_ptr<IoScheduler> scheduler_;
    bool run_pending_ = false;  // an async run is queued
    bool restart_ = false;      // BLK_MQ_S_SCHED_RESTART
    uint64_t delay_timer_ = 0;  // pending BLK_MQ_BUDGET_DELAY re-run (timer id)
};

}  // namespace mdsplit
