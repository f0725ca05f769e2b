#include "sim/buffered_workload.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/io_uring/buffered_io.h"
#include "sim/io_slots.h"

namespace mdsplit {

namespace {
void wake_up(void*, uint64_t) {}
constexpr uint64_t kFsyncCookie = ~uint64_t(0);
}  // namespace

BufferedWorkloadResult run_buffered_workload(Stack& stack, const BufferedWorkloadSpec& spec,
                                             InterruptPoll interrupt) {
    // Buffered I/O needs no alignment: any block size goes through the page cache.
    WorkloadRegion region =
        workload_region(stack.size_bytes(), spec.offset, spec.size, spec.block_size, 1, spec.where);
    uint64_t total = spec.total_bytes ? spec.total_bytes : region.bytes();
    uint32_t depth = spec.iodepth ? spec.iodepth : 1;
    uint32_t batch = spec.batch ? spec.batch : 1;

    BufferedIo& bio = stack.buffered();
    bio.set_iodepth(depth);
    EventLoop& loop = stack.loop();

    IoSlots slots(slots_needed(depth, total, spec.block_size), spec.block_size);
    std::vector<bool> busy(depth, false);

    std::mt19937_64 rng(spec.seed);
    TaskContext task;
    task.pid = spec.pid;
    BufferedWorkloadResult r;
    uint64_t submitted = 0, next_block = 0;
    uint64_t start = loop.now();
    bool fsync_done = !spec.end_fsync, fsync_sent = false;

    auto account = [&] {
        uint64_t now = loop.now();
        for (const IoCompletion& c : task.completions) {
            bio.charge_submitter(bio.costs().fio_complete_ns);
            if (c.cookie == kFsyncCookie) {
                fsync_done = true;
                if (c.error) r.errors++;
                continue;
            }
            uint32_t slot = uint32_t(c.cookie);
            if (slot >= depth || !busy[slot]) {
                r.unexpected_completions++;
                continue;
            }
            busy[slot] = false;
            r.record(c, spec.block_size, slots.give_back(slot, now));
        }
        task.completions.clear();
    };

    for (;;) {
        if (interrupt.requested()) {
            total = std::min(total, submitted);
            if (!fsync_sent) fsync_done = true;
        }
        stack.reap(task, 0, 0);
        account();
        bool more = submitted < total;
        if (more && slots.any_free()) {
            if (bio.submitter_free_at() > loop.now()) {
                // fio's thread is still busy (its own work, inline attempts,
                // task_work): the next submission waits for it.
                loop.schedule_at(bio.submitter_free_at(), &wake_up, nullptr);
                loop.wait_for_next();
                continue;
            }
            stack.begin_batch(task);
            for (uint32_t n = 0; n < batch && submitted < total && slots.any_free(); n++) {
                uint64_t block = spec.random ? rng() % region.blocks : next_block++ % region.blocks;
                bio.charge_submitter(bio.costs().fio_submit_ns);
                uint32_t slot = slots.take(loop.now());
                busy[slot] = true;
                stack.queue_buffered(task, spec.op, region.block_offset(block), spec.block_size,
                                     slots.buffer(slot), slot);
                submitted += spec.block_size;
            }
            stack.commit(task);
            continue;
        }
        if (!more && !task.in_flight) {
            if (fsync_done) break;
            if (!fsync_sent) {
                fsync_sent = true;
                stack.fsync(task, kFsyncCookie);
                continue;
            }
        }
        size_t before = task.completions.size();
        stack.reap(task, 1, ~uint64_t(0) / 2);
        if (task.completions.size() == before && !loop.has_pending() && task.in_flight)
            throw std::runtime_error(
                "mdsplit: buffered workload: " + std::to_string(task.in_flight) +
                " I/Os in flight with nothing pending (lost)");
    }
    interrupt.throw_if_requested();
    r.elapsed_ns = loop.now() - start;
    return r;
}

}  // namespace mdsplit
