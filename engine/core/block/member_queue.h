// A request-based member device (blk-mq queue + driver): splits bios to its
// max_sectors, merges them into plugged requests, and issues requests to its
// backend up to its queue depth (block/blk-mq.c blk_mq_submit_bio).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/io_scheduler.h"
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
};

class MemberQueue final : public BlockDevice {
public:
    MemberQueue(BlockLayer& layer, std::string name, uint32_t devt,
                std::unique_ptr<Backend> backend, const MemberQueueLimits& limits);
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
    // for a driver tag (SCHED_RESTART), and BLK_MQ_BUDGET_DELAY (3 ms) after
    // a run in which the scheduler had work but returned nothing.
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
    int sync_data();
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
    static void on_backend_complete(void* ctx, Request* rq, int64_t res);
    void complete_request(Request* rq, int64_t res);

    BlockLayer& layer_;
    std::unique_ptr<Backend> backend_;
    MemberQueueLimits limits_;
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
    std::unique_ptr<IoScheduler> scheduler_;
    bool run_pending_ = false;  // an async run is queued
    bool restart_ = false;      // BLK_MQ_S_SCHED_RESTART
    uint64_t delay_timer_ = 0;  // pending BLK_MQ_BUDGET_DELAY re-run (timer id)

    // Virtual clock over a real (io_uring) member: the ring returns the
    // requests of one instant in the host's order, so they are completed
    // together, in issue order, once that instant's completions are in
    // (EventLoop::settle): a run does not depend on the host.
    static void complete_in_issue_order(void* arg, uint64_t tag);
    bool order_completions_ = false;
    uint64_t issue_seq_ = 0;
    std::vector<std::pair<Request*, int64_t>> arrived_;

    // Write-behind (virtual clock, a timed real member without faults): a
    // write completes at its modelled time while the host writes a copy of
    // its data in the background; reads and overlapping writes wait for the
    // copies in flight, so every read sees what was written before it.
    void issue_write_behind(Request* rq);
    void wait_for_write_behind(const Request* rq);
    static void on_write_behind_model_time(void* arg, uint64_t tag);
    void end_write_behind_copy(Request* copy, int64_t res);
    class TimedBackend* timed_ = nullptr;
    std::vector<Request*> behind_;  // copies in flight
    uint64_t write_behind_errors_ = 0;

public:
    // Turns write-behind on where it applies (see above); false when the
    // member is not a timed real member on the virtual clock.
    bool set_write_behind(bool on);
    uint64_t write_behind_errors() const { return write_behind_errors_; }
};

}  // namespace mdsplit
