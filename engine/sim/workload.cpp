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

}  // namespace mdsplit
