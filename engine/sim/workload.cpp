#include "sim/workload.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

namespace mdsplit {

namespace {
struct AlignedFree {
    void operator()(uint8_t* p) const { free(p); }
};
}  // namespace

WorkloadResult run_workload(Stack& stack, const WorkloadSpec& spec) {
    uint64_t dev = stack.size_bytes();
    if (spec.block_size == 0 || spec.block_size % stack.logical_block_size())
        throw std::invalid_argument(
            "workload: bs must be a positive multiple of the logical block size");
    if (spec.offset >= dev)
        throw std::invalid_argument("workload: offset is past the end of the device");
    uint64_t region = spec.size ? spec.size : dev - spec.offset;
    if (region > dev - spec.offset) region = dev - spec.offset;
    uint64_t blocks = region / spec.block_size;
    if (!blocks) throw std::invalid_argument("workload: region is smaller than one block");
    uint64_t total = spec.total_bytes ? spec.total_bytes : blocks * spec.block_size;
    uint32_t depth = spec.iodepth ? spec.iodepth : 1;
    uint32_t batch = spec.batch ? spec.batch : 1;

    std::vector<std::unique_ptr<uint8_t, AlignedFree>> buffers;
    for (uint32_t i = 0; i < depth; i++) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, spec.block_size)) throw std::bad_alloc();
        memset(p, int(0xa5 ^ i), spec.block_size);
        buffers.emplace_back(static_cast<uint8_t*>(p));
    }
    std::vector<uint32_t> free_slots;
    for (uint32_t i = depth; i > 0; i--) free_slots.push_back(i - 1);
    std::vector<uint64_t> issued_at(depth, 0);

    std::mt19937_64 rng(spec.seed);
    TaskContext task;
    task.pid = spec.pid;
    WorkloadResult r;
    uint64_t submitted = 0, next_block = 0;
    uint64_t start = stack.loop().now();

    while (r.bytes + r.errors * spec.block_size < total || task.in_flight) {
        if (submitted < total && !free_slots.empty()) {
            stack.begin_batch(task);
            for (uint32_t n = 0; n < batch && submitted < total && !free_slots.empty(); n++) {
                uint32_t slot = free_slots.back();
                free_slots.pop_back();
                uint64_t block = spec.random ? rng() % blocks : next_block++ % blocks;
                issued_at[slot] = stack.loop().now();
                stack.queue(task, spec.op, spec.offset + block * spec.block_size, spec.block_size,
                            buffers[slot].get(), slot);
                submitted += spec.block_size;
            }
            stack.commit(task);
            if (!task.completions.empty() || (submitted < total && !free_slots.empty())) {
                stack.reap(task, 0, 0);
            } else {
                stack.reap(task, 1, ~uint64_t(0) / 2);
            }
        } else {
            stack.reap(task, 1, ~uint64_t(0) / 2);
        }
        if (task.completions.empty() && !task.in_flight && submitted >= total) break;
        uint64_t now = stack.loop().now();
        for (const IoCompletion& c : task.completions) {
            uint32_t slot = uint32_t(c.cookie);
            r.record(c, spec.block_size, now - issued_at[slot]);
            free_slots.push_back(slot);
        }
        task.completions.clear();
    }
    r.elapsed_ns = stack.loop().now() - start;
    return r;
}

// --- Several tasks in one event loop -------------------------------------------
namespace {

struct TaskRun {
    const WorkloadSpec* spec = nullptr;
    TaskContext task;
    std::vector<std::unique_ptr<uint8_t, AlignedFree>> buffers;
    std::vector<uint32_t> free_slots;
    std::vector<uint64_t> issued_at;
    std::vector<uint64_t> ready_at;  // think time: when a freed slot may be reused
    std::mt19937_64 rng;
    uint64_t blocks = 0;
    uint64_t total = 0;  // bytes to submit
    uint64_t submitted = 0;
    uint64_t next_block = 0;
    uint64_t start_at = 0;
    uint32_t batch = 1;
    bool started = false, stopped = false, done = false;
    WorkloadResult r;
};

void wake_up(void*, uint64_t) {}  // a task's start time: only advances the loop

}  // namespace

std::vector<WorkloadResult> run_workloads(Stack& stack, const std::vector<WorkloadSpec>& specs) {
    uint64_t dev = stack.size_bytes();
    EventLoop& loop = stack.loop();
    uint64_t t0 = loop.now();
    std::vector<std::unique_ptr<TaskRun>> runs;
    for (const WorkloadSpec& spec : specs) {
        if (spec.block_size == 0 || spec.block_size % stack.logical_block_size())
            throw std::invalid_argument(
                "workload: bs must be a positive multiple of the logical block size");
        if (spec.offset >= dev)
            throw std::invalid_argument("workload: offset is past the end of the device");
        auto t = std::make_unique<TaskRun>();
        t->spec = &spec;
        uint64_t region = spec.size ? spec.size : dev - spec.offset;
        if (region > dev - spec.offset) region = dev - spec.offset;
        t->blocks = region / spec.block_size;
        if (!t->blocks) throw std::invalid_argument("workload: region is smaller than one block");
        t->total = spec.total_bytes  ? spec.total_bytes
                   : spec.runtime_ns ? std::numeric_limits<uint64_t>::max()
                                     : t->blocks * spec.block_size;
        uint32_t depth = spec.iodepth ? spec.iodepth : 1;
        t->batch = spec.batch ? spec.batch : 1;
        for (uint32_t i = 0; i < depth; i++) {
            void* p = nullptr;
            if (posix_memalign(&p, 4096, spec.block_size)) throw std::bad_alloc();
            memset(p, int(0xa5 ^ i), spec.block_size);
            t->buffers.emplace_back(static_cast<uint8_t*>(p));
        }
        for (uint32_t i = depth; i > 0; i--) t->free_slots.push_back(i - 1);
        t->issued_at.assign(depth, 0);
        t->ready_at.assign(depth, 0);
        t->rng.seed(spec.seed);
        t->task.pid = spec.pid;
        t->task.sched = spec.sched;
        t->start_at = t0 + spec.start_ns;
        if (t->start_at > t0) loop.schedule_at(t->start_at, &wake_up, nullptr);
        runs.push_back(std::move(t));
    }

    for (;;) {
        uint64_t now = loop.now();
        bool all_done = true;
        for (auto& tp : runs) {
            TaskRun& t = *tp;
            const WorkloadSpec& spec = *t.spec;
            if (t.done) continue;
            all_done = false;
            if (!t.started) {
                if (now < t.start_at) continue;
                t.started = true;
                t.r.start_ns = t.r.end_ns = now;
            }
            for (const IoCompletion& c : t.task.completions) {
                uint32_t slot = uint32_t(c.cookie);
                t.r.record(c, spec.block_size, now - t.issued_at[slot]);
                t.r.end_ns = now;
                t.free_slots.push_back(slot);
                if (spec.think_ns) {
                    t.ready_at[slot] = now + spec.think_ns;
                    loop.schedule_at(t.ready_at[slot], &wake_up, nullptr);
                }
            }
            t.task.completions.clear();
            if (t.submitted >= t.total ||
                (spec.runtime_ns && now >= t.r.start_ns + spec.runtime_ns))
                t.stopped = true;
            // Slots still in their think time are not reused yet.
            auto ready = [&]() {  // moves a reusable slot to the back
                for (size_t k = t.free_slots.size(); k > 0; k--)
                    if (t.ready_at[t.free_slots[k - 1]] <= now) {
                        std::swap(t.free_slots[k - 1], t.free_slots.back());
                        return true;
                    }
                return false;
            };
            if (!t.stopped && ready()) {
                stack.begin_batch(t.task);
                for (uint32_t n = 0; n < t.batch && t.submitted < t.total && ready(); n++) {
                    uint32_t slot = t.free_slots.back();
                    t.free_slots.pop_back();
                    uint64_t block = spec.random ? t.rng() % t.blocks : t.next_block++ % t.blocks;
                    t.issued_at[slot] = now;
                    stack.queue(t.task, spec.op, spec.offset + block * spec.block_size,
                                spec.block_size, t.buffers[slot].get(), slot);
                    t.submitted += spec.block_size;
                }
                stack.commit(t.task);
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
    std::vector<WorkloadResult> out;
    for (auto& tp : runs) out.push_back(tp->r);
    return out;
}
// ----------------------------------------------------------------------------

}  // namespace mdsplit
