#include "sim/workload.h"

#include "sim/io_slots.h"
#include "sim/virtual_time.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

namespace mdsplit {

WorkloadResult run_workload(Stack& stack, const WorkloadSpec& spec, InterruptPoll interrupt) {
    WorkloadRegion region =
        workload_region(stack.size_bytes(), spec.offset, spec.size, spec.block_size,
                        stack.logical_block_size(), spec.where);
    uint64_t total = spec.total_bytes ? spec.total_bytes : region.bytes();
    uint32_t batch = spec.batch ? spec.batch : 1;
    IoSlots slots(slots_needed(spec.iodepth, total, spec.block_size), spec.block_size);

    std::mt19937_64 rng(spec.seed);
    TaskContext task;
    task.pid = spec.pid;
    WorkloadResult r;
    uint64_t submitted = 0, next_block = 0;
    uint64_t start = stack.loop().now();

    while (r.bytes + r.errors * spec.block_size < total || task.in_flight) {
        if (interrupt.requested()) total = std::min(total, submitted);
        if (submitted < total && slots.any_free()) {
            stack.begin_batch(task);
            for (uint32_t n = 0; n < batch && submitted < total && slots.any_free(); n++) {
                uint32_t slot = slots.take(stack.loop().now());
                uint64_t block = spec.random ? rng() % region.blocks : next_block++ % region.blocks;
                stack.queue(task, spec.op, region.block_offset(block), spec.block_size,
                            slots.buffer(slot), slot);
                submitted += spec.block_size;
            }
            stack.commit(task);
            if (!task.completions.empty() || (submitted < total && slots.any_free())) {
                stack.reap(task, 0, 0);
            } else {
                stack.reap(task, 1, ~uint64_t(0) / 2);
            }
        } else {
            stack.reap(task, 1, ~uint64_t(0) / 2);
        }
        if (task.completions.empty() && !task.in_flight && submitted >= total) break;
        uint64_t now = stack.loop().now();
        for (const IoCompletion& c : task.completions)
            r.record(c, spec.block_size, slots.give_back(uint32_t(c.cookie), now));
        task.completions.clear();
    }
    interrupt.throw_if_requested();
    r.elapsed_ns = stack.loop().now() - start;
    return r;
}

// --- Several tasks in one event loop -------------------------------------------
namespace {

struct TaskRun {
    const WorkloadSpec* spec = nullptr;
    TaskContext task;
    WorkloadRegion region;
    std::unique_ptr<IoSlots> slots;
    std::vector<uint64_t> ready_at;  // think time: when a freed slot may be reused
    std::mt19937_64 rng;
    uint64_t total = 0;  // bytes to submit
    uint64_t submitted = 0;
    uint64_t next_block = 0;
    uint64_t start_at = 0;
    uint64_t start_timer = 0;  // the loop's timer for start_at (0 = none)
    uint32_t batch = 1;
    bool started = false, stopped = false, done = false;
    InstantCounter instant;  // runtime-only tasks: is virtual time passing?
    WorkloadResult r;
};

void wake_up(void*, uint64_t) {}  // a task's start time: only advances the loop

// Puts a free slot whose think time is over on top of the task's free
// slots (take() hands it out next); false when there is none.
bool raise_ready_slot(TaskRun& t, uint64_t now) {
    return t.slots->raise_first([&](uint32_t slot) { return t.ready_at[slot] <= now; });
}

// Queues up to a batch of the task's next I/Os in one plug; how many.
uint32_t issue_batch(Stack& stack, TaskRun& t, uint64_t now) {
    const WorkloadSpec& spec = *t.spec;
    stack.begin_batch(t.task);
    uint32_t n = 0;
    for (; n < t.batch && t.submitted < t.total && raise_ready_slot(t, now); n++) {
        uint32_t slot = t.slots->take(now);
        uint64_t block = spec.random ? t.rng() % t.region.blocks : t.next_block++ % t.region.blocks;
        stack.queue(t.task, spec.op, t.region.block_offset(block), spec.block_size,
                    t.slots->buffer(slot), slot);
        t.submitted += spec.block_size;
    }
    stack.commit(t.task);
    return n;
}

}  // namespace

std::vector<WorkloadResult> run_workloads(Stack& stack, const std::vector<WorkloadSpec>& specs,
                                          InterruptPoll interrupt) {
    EventLoop& loop = stack.loop();
    uint64_t t0 = loop.now();
    std::vector<std::unique_ptr<TaskRun>> runs;
    for (const WorkloadSpec& spec : specs) {
        auto t = std::make_unique<TaskRun>();
        t->spec = &spec;
        t->region = workload_region(stack.size_bytes(), spec.offset, spec.size, spec.block_size,
                                    stack.logical_block_size(), spec.where);
        t->total = spec.total_bytes  ? spec.total_bytes
                   : spec.runtime_ns ? std::numeric_limits<uint64_t>::max()
                                     : t->region.bytes();
        uint32_t depth = slots_needed(spec.iodepth, t->total, spec.block_size);
        t->batch = spec.batch ? spec.batch : 1;
        t->slots = std::make_unique<IoSlots>(depth, spec.block_size);
        t->ready_at.assign(depth, 0);
        t->rng.seed(spec.seed);
        t->task.pid = spec.pid;
        t->task.sched = spec.sched;
        t->start_at = t0 + spec.start_ns;
        if (t->start_at > t0) t->start_timer = loop.schedule_at(t->start_at, &wake_up, nullptr);
        runs.push_back(std::move(t));
    }

    // Set when the run cannot end as asked: every task then stops issuing,
    // and once what is in flight has drained (the tasks' buffers are still
    // in use until then) it is thrown.
    std::string refused;
    for (;;) {
        uint64_t now = loop.now();
        if (refused.empty() && now >= kTimeHorizonNs) refused = horizon_message("run_workloads");
        bool interrupted = interrupt.requested();
        bool all_done = true;
        for (size_t i = 0; i < runs.size(); i++) {
            TaskRun& t = *runs[i];
            const WorkloadSpec& spec = *t.spec;
            if (t.done) continue;
            all_done = false;
            if (!t.started) {
                if (interrupted) {
                    t.done = true;  // never started: nothing to drain, nothing to wait for
                    if (t.start_timer) loop.cancel(t.start_timer);
                    continue;
                }
                if (now < t.start_at) continue;
                t.started = true;
                t.r.start_ns = t.r.end_ns = now;
            }
            for (const IoCompletion& c : t.task.completions) {
                uint32_t slot = uint32_t(c.cookie);
                t.r.record(c, spec.block_size, t.slots->give_back(slot, now));
                t.r.end_ns = now;
                if (spec.think_ns) {
                    t.ready_at[slot] = now + spec.think_ns;
                    loop.schedule_at(t.ready_at[slot], &wake_up, nullptr);
                }
            }
            t.task.completions.clear();
            if (t.submitted >= t.total ||
                (spec.runtime_ns && now >= t.r.start_ns + spec.runtime_ns) || !refused.empty() ||
                interrupted)
                t.stopped = true;
            // Slots still in their think time are not reused yet.
            if (!t.stopped && raise_ready_slot(t, now)) {
                uint32_t n = issue_batch(stack, t, now);
                bool time_bound_only = !spec.total_bytes && spec.runtime_ns;
                if (time_bound_only && t.instant.stuck(now, n, t.slots->depth()) && refused.empty())
                    refused = zero_time_message(
                        "run_workloads: tasks[" + std::to_string(i) + "]", "runtime_ns",
                        "a total instead, or think_ns > 0, or a stack with a timing model");
            }
            if (t.stopped && !t.task.in_flight && t.task.completions.empty()) {
                t.done = true;
                t.r.elapsed_ns = t.r.end_ns - t.r.start_ns;
            }
        }
        if (all_done) break;
        if (loop.run_ready()) continue;
        bool progress = false;
        for (auto& tp : runs) progress |= !tp->done && !tp->task.completions.empty();
        if (progress) continue;
        if (!loop.wait_for_next()) break;  // nothing can happen any more
    }
    stack.drain();
    interrupt.throw_if_requested();
    if (!refused.empty()) throw std::invalid_argument(refused);
    std::vector<WorkloadResult> out;
    for (auto& tp : runs) out.push_back(tp->r);
    return out;
}
// ----------------------------------------------------------------------------

}  // namespace mdsplit
