#include "core/block/block_layer.h"

#include <algorithm>

#include "core/block/member_queue.h"

namespace mdsplit {

TraceEvent BlockLayer::bio_event(TraceAction action, const BlockDevice* dev, const Bio* bio) {
    TraceEvent e;
    e.device = dev->devt();
    e.action = action;
    e.op = bio->op;
    e.sync = bio->flags & kBioSync;
    e.sector = bio->sector;
    e.bytes = uint32_t(bio->bytes());
    e.pid = bio->pid;
    e.error = bio->error;
    return e;
}

void BlockLayer::emit_bio(TraceAction action, const BlockDevice* dev, const Bio* bio) {
    tracer_.emit(bio_event(action, dev, bio));
}

void BlockLayer::emit_remap(const Bio* clone, uint32_t from_devt, sector_t from_sector) {
    TraceEvent e = bio_event(TraceAction::Remap, clone->dev, clone);
    e.from_device = from_devt;
    e.from_sector = from_sector;
    tracer_.emit(e);
}

void BlockLayer::emit_rq(TraceAction action, const BlockDevice* dev, const Request* rq) {
    TraceEvent e;
    e.device = dev->devt();
    e.action = action;
    e.op = rq->op;
    e.sync = rq->op != Op::Discard;  // a discard is not REQ_SYNC (blkdev_issue_discard)
    e.sector = rq->sector;
    e.bytes = uint32_t(rq->bytes());
    e.pid = rq->pid;
    e.error = rq->error;
    tracer_.emit(e);
}

// block/blk-core.c submit_bio_noacct_nocheck()
void BlockLayer::submit_bio_noacct(Bio* bio, bool split) {
    if (!(bio->flags & kBioTraced)) {
        trace_bio(TraceAction::Queue, bio->dev, bio);
        bio->flags |= kBioTraced;
    }
    TaskContext* task = current_ ? current_ : &default_task_;
    if (task->bio_list) {
        if (split && split_insert_ == SplitInsert::Head)
            task->bio_list[0].push_front(bio);
        else
            task->bio_list[0].push_back(bio);
    } else if (!bio->dev->stacked()) {
        submit_mq(bio);
    } else {
        submit_stacked(bio);
    }
}

// __submit_bio_noacct_mq(): one list, popped until empty.
void BlockLayer::submit_mq(Bio* bio) {
    TaskContext* task = current_ ? current_ : &default_task_;
    BioList lists[2];
    run_mq(task, lists, bio);
}

void BlockLayer::run_mq(TaskContext* task, BioList* lists, Bio* bio) {
    task->bio_list = lists;
    do {
        bio->dev->submit_bio(bio);
        if (task->cpu.modelled && pause_after_call(task, lists, /*stacked=*/false)) return;
    } while ((bio = lists[0].pop_front()));
    task->bio_list = nullptr;
}

// __submit_bio_noacct(): bios a ->submit_bio method submits are collected in
// a fresh list; afterwards those for lower devices go first, then those for
// the same device, then what was pending before.
void BlockLayer::submit_stacked(Bio* bio) {
    TaskContext* task = current_ ? current_ : &default_task_;
    BioList lists[2];
    run_stacked(task, lists, bio);
}

void BlockLayer::run_stacked(TaskContext* task, BioList* lists, Bio* bio) {
    task->bio_list = lists;
    do {
        const BlockDevice* q = bio->dev;
        lists[1] = lists[0];
        lists[0] = BioList{};
        bio->dev->submit_bio(bio);
        BioList lower, same;
        while (Bio* b = lists[0].pop_front()) {
            if (b->dev == q)
                same.push_back(b);
            else
                lower.push_back(b);
        }
        lists[0].append(lower);
        lists[0].append(same);
        lists[0].append(lists[1]);
        if (task->cpu.modelled && pause_after_call(task, lists, /*stacked=*/true)) return;
    } while ((bio = lists[0].pop_front()));
    task->bio_list = nullptr;
}

// The submitting CPU: the next ->submit_bio call takes submit_cost_ns_ of
// the task's time, and what it does happens when it returns, so the loop
// waits that long first. Between two calls the loop's state is
// current->bio_list alone, which the task keeps while it waits. For a task
// whose CPU is modelled (the submit loops test that before calling).
bool BlockLayer::pause_after_call(TaskContext* task, BioList* lists, bool stacked) {
    if (lists[0].empty()) return false;
    TaskSubmitCpu& cpu = task->cpu;
    cpu.busy_until = std::max(cpu.busy_until, loop_.now()) + submit_cost_ns_;
    if (cpu.busy_until <= loop_.now()) return false;  // no CPU time modelled
    cpu.loop = lists[0];
    cpu.paused = true;
    cpu.paused_stacked = stacked;
    task->bio_list = nullptr;
    return true;
}

void BlockLayer::resume_submission(TaskContext& task) {
    TaskSubmitCpu& cpu = task.cpu;
    if (!cpu.paused) return;
    cpu.paused = false;
    BioList lists[2] = {cpu.loop, BioList{}};
    cpu.loop = BioList{};
    Bio* bio = lists[0].pop_front();
    if (cpu.paused_stacked)
        run_stacked(&task, lists, bio);
    else
        run_mq(&task, lists, bio);
}

// block/blk-merge.c bio_submit_split()
Bio* BlockLayer::split_and_resubmit(Bio* bio, uint32_t sectors) {
    Bio* front = bios_.split(bio, sectors);
    front->flags |= kBioNoMerge;
    if (tracer_.enabled()) {
        TraceEvent e = bio_event(TraceAction::Split, bio->dev, front);
        e.new_sector = bio->sector;
        tracer_.emit(e);
    }
    submit_bio_noacct(bio, /*split=*/true);
    return front;
}

void BlockLayer::end_clone(DiskStats& device_stats, Bio* clone) {
    auto* orig = static_cast<Bio*>(clone->private_data);
    device_stats.done(orig->op, orig->nr_sectors, clone->start_ns, loop_.now(), clone->error != 0);
    if (clone->error && !orig->error) orig->error = clone->error;
    orig->resid += clone->resid;
    bios_.put(clone);
    bio_endio(orig);
}

// blk_finish_plug() -> __blk_flush_plug(), which also drops the plug's
// cached time. The flushes blk_add_rq_to_plug() makes on the way
// (blk_mq_flush_plug_list() directly) keep it in the thread's kernel
// (6.9 .. 6.17): every request a task queues under one plug without
// sleeping is stamped with the time first read under it. ("block: drop the
// cached plug time when blk_add_rq_to_plug() flushes", in 6.12.117 stable
// and later, invalidates it there too.)
void BlockLayer::finish_plug(TaskContext& task) {
    if (task.plug.rq_count) flush_plug(task.plug);
    task.plug.cur_ktime = 0;
    task.plug.active = false;
}

// blk_mq_flush_plug_list(): requests go to their queues in plug order; each
// queue's batch is traced as one unplug of that depth. Before Linux 6.13 the
// plug list was LIFO and, for a single queue, blk_mq_plug_issue_direct()
// popped it newest first; with several queues blk_mq_dispatch_plug_list()
// restored submission order.
// The flushing task does the dispatching itself: with [cpu] dispatch its
// CPU spends that long per request (the elevator's insert, the queue run,
// the driver's ->queue_rq), so a queue's batch reaches the queue when the
// task has done the batches before it and the batch's first request, and
// the task is busy until it has done them all.
void BlockLayer::flush_plug(PlugList& plug) {
    bool newest_first = plug_order_ == PlugOrder::Lifo && !plug.multiple_queues;
    Request* list = plug.take_all();
    if (newest_first) {
        Request* reversed = nullptr;
        while (list) {
            Request* next = list->next;
            list->next = reversed;
            reversed = list;
            list = next;
        }
        list = reversed;
    }
    TaskContext* task = current_;
    const bool charged = dispatch_cost_ns_ && task && task->cpu.modelled;
    uint64_t at = charged ? std::max(task->cpu.busy_until, loop_.now()) : loop_.now();
    while (list) {
        MemberQueue* q = list->queue;
        // Collect this queue's requests, keep the others in order.
        Request *mine = nullptr, **mine_tail = &mine, *rest = nullptr, **rest_tail = &rest;
        uint32_t depth = 0;
        for (Request* rq = list; rq;) {
            Request* next = rq->next;
            rq->next = nullptr;
            if (rq->queue == q) {
                *mine_tail = rq;
                mine_tail = &rq->next;
                depth++;
            } else {
                *rest_tail = rq;
                rest_tail = &rq->next;
            }
            rq = next;
        }
        if (tracer_.enabled()) {
            TraceEvent e;
            e.device = q->devt();
            e.action = TraceAction::Unplug;
            e.pid = mine->pid;
            e.depth = depth;
            tracer_.emit(e);
        }
        if (charged) {
            hand_over_batch(q, mine, at + dispatch_cost_ns_);
            at += uint64_t(depth) * dispatch_cost_ns_;
        } else {
            dispatch_batch(q, mine);
        }
        list = rest;
    }
    if (charged) task->cpu.busy_until = at;
}

// blk_mq_dispatch_list() for one queue: the batch is inserted in order and
// the queue runs.
void BlockLayer::dispatch_batch(MemberQueue* q, Request* batch) {
    for (Request* rq = batch; rq;) {
        Request* next = rq->next;
        rq->next = nullptr;
        q->dispatch(rq);
        rq = next;
    }
    q->end_unplug_batch();
}

void BlockLayer::hand_over_batch(MemberQueue* q, Request* batch, uint64_t when) {
    PendingBatch* pending = pending_batches_.get();
    *pending = PendingBatch{q, batch};
    loop_.schedule_at(when, &BlockLayer::deliver_batch, this, reinterpret_cast<uint64_t>(pending));
}

void BlockLayer::deliver_batch(void* arg, uint64_t tag) {
    auto* self = static_cast<BlockLayer*>(arg);
    auto* pending = reinterpret_cast<PendingBatch*>(tag);
    PendingBatch batch = *pending;
    self->pending_batches_.put(pending);
    dispatch_batch(batch.queue, batch.requests);
    batch.queue->backend().kick();
}

}  // namespace mdsplit
