// The generic block layer of one stack: submit_bio_noacct() with the
// recursion lists, bio splitting, plugging, and the pools. Devices call
// into it; it knows nothing of fio.
#pragma once

#include "base/event_loop.h"
#include "base/object_pool.h"
#include "config/stack_config.h"
#include "core/block/bio_pool.h"
#include "core/block/block_device.h"
#include "core/block/request.h"
#include "core/block/task_context.h"
#include "core/trace/tracer.h"

namespace mdsplit {

class MemberQueue;

// Where a split remainder goes on current->bio_list[0]: the tail before
// "block: fix disordered IO in the case recursive split", the head after.
enum class SplitInsert { Tail, Head };

class BlockLayer {
public:
    BlockLayer(EventLoop& loop, Tracer& tracer, SplitInsert insert)
        : loop_(loop), tracer_(tracer), split_insert_(insert) {}

    EventLoop& loop() { return loop_; }
    Tracer& tracer() { return tracer_; }
    BioPool& bios() { return bios_; }
    ObjectPool<Request>& requests() { return requests_; }
    SplitInsert split_insert() const { return split_insert_; }
    void set_plug_order(PlugOrder order) { plug_order_ = order; }
    PlugOrder plug_order() const { return plug_order_; }

    // The task whose context submissions run in (set by the stack).
    TaskContext* current() { return current_; }
    void set_current(TaskContext* task) { current_ = task; }

    // submit_bio_noacct() / submit_bio_noacct_nocheck(bio, split)
    void submit_bio_noacct(Bio* bio, bool split = false);

    // The submitting CPU's modelled time per ->submit_bio call, in loop time
    // (both clocks; 0 = none). A task whose cpu.modelled is set pays
    // it for every call of its __submit_bio_noacct loop (md_submit_bio of one
    // piece, blk_mq_submit_bio of one member bio, ...) and the loop pauses
    // (TaskSubmitCpu::paused) until its CPU is free; resume_submission()
    // continues it. Other tasks (raid5d, the page cache's) run at once.
    void set_submit_cost(uint64_t loop_ns) { submit_cost_ns_ = loop_ns; }
    uint64_t submit_cost() const { return submit_cost_ns_; }
    // ... and per request one of its plug flushes dispatches ([cpu]
    // dispatch): see flush_plug().
    void set_dispatch_cost(uint64_t loop_ns) { dispatch_cost_ns_ = loop_ns; }
    uint64_t dispatch_cost() const { return dispatch_cost_ns_; }
    // Whether submitting tasks' CPU time is modelled at all.
    bool cpu_modelled() const { return submit_cost_ns_ || dispatch_cost_ns_; }
    // Continues the task's paused loop (current() must be the task); it may
    // pause again.
    void resume_submission(TaskContext& task);

    // bio_submit_split(): splits off the first `sectors` of `bio` as a
    // REQ_NOMERGE front, traces X on `dev`, resubmits the remainder through
    // submit_bio_noacct(remainder, split=true) and returns the front.
    Bio* split_and_resubmit(Bio* bio, uint32_t sectors);

    // The end of a clone that carried a stacked device's bio to the layer
    // below (md_end_clone_io, dm's clone_endio): the original is accounted
    // on the stacked device (bio_end_io_acct, from the clone's start),
    // takes the clone's error and residue, and completes.
    void end_clone(DiskStats& device_stats, Bio* clone);

    // blk_start_plug() / blk_finish_plug()
    void start_plug(TaskContext& task) {
        task.plug.active = true;
        task.plug.cur_ktime = 0;
    }
    void finish_plug(TaskContext& task);
    // blk_mq_flush_plug_list(). Under a modelled task CPU with a dispatch
    // cost, the flush keeps the task busy for that cost per request and
    // each queue's batch reaches its queue later (hand_over_batch()).
    void flush_plug(PlugList& plug);

    // Tracepoints: inline checks, so that with tracing off they cost a test.
    void trace_bio(TraceAction action, const BlockDevice* dev, const Bio* bio) {
        if (tracer_.enabled()) emit_bio(action, dev, bio);
    }
    // trace_block_bio_remap(): A on the clone's (lower) device, with where
    // the bio came from.
    void trace_remap(const Bio* clone, uint32_t from_devt, sector_t from_sector) {
        if (tracer_.enabled()) emit_remap(clone, from_devt, from_sector);
    }
    void trace_rq(TraceAction action, const BlockDevice* dev, const Request* rq) {
        if (tracer_.enabled()) emit_rq(action, dev, rq);
    }

private:
    void emit_bio(TraceAction action, const BlockDevice* dev, const Bio* bio);
    void emit_remap(const Bio* clone, uint32_t from_devt, sector_t from_sector);
    void emit_rq(TraceAction action, const BlockDevice* dev, const Request* rq);
    static TraceEvent bio_event(TraceAction action, const BlockDevice* dev, const Bio* bio);
    void submit_stacked(Bio* bio);  // __submit_bio_noacct()
    void submit_mq(Bio* bio);       // __submit_bio_noacct_mq()
    // The loops, from `bio` with current->bio_list = lists (the caller's).
    void run_stacked(TaskContext* task, BioList* lists, Bio* bio);
    void run_mq(TaskContext* task, BioList* lists, Bio* bio);
    // After one ->submit_bio call: charges the task's CPU; true when the
    // loop must wait for it (its lists are then kept in task->cpu).
    bool pause_after_call(TaskContext* task, BioList* lists, bool stacked);
    // One queue's batch of a flush: inserted and run (blk_mq_dispatch_list)
    // now, or at `when` when the flushing task's CPU gets there.
    void hand_over_batch(MemberQueue* q, Request* batch, uint64_t when);
    static void deliver_batch(void* arg, uint64_t tag);
    static void dispatch_batch(MemberQueue* q, Request* batch);

    EventLoop& loop_;
    Tracer& tracer_;
    SplitInsert split_insert_;
    PlugOrder plug_order_ = PlugOrder::Fifo;
    TaskContext* current_ = nullptr;
    uint64_t submit_cost_ns_ = 0;
    uint64_t dispatch_cost_ns_ = 0;
    // Batches a modelled CPU is still dispatching (deliver_batch's tag).
    struct PendingBatch {
        MemberQueue* queue;
        Request* requests;
    };
    ObjectPool<PendingBatch> pending_batches_;
    TaskContext default_task_;
    BioPool bios_;
    ObjectPool<Request> requests_;
};

}  // namespace mdsplit
