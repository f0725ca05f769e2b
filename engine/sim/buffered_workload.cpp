#include "sim/buffered_workload.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/io_uring/buffered_io.h"

namespace mdsplit {

namespace {
struct AlignedFree {
    void operator()(uint8_t* p) const { free(p); }
};
void wake_up(void*, uint64_t) {}
constexpr uint64_t kFsyncCookie = ~uint64_t(0);
}  // namespace

BufferedWorkloadResult run_buffered_workload(Stack& stack, const BufferedWorkloadSpec& spec) {
    uint64_t dev = stack.size_bytes();
    if (spec.block_size == 0) throw std::invalid_argument("workload: bs must be positive");
    if (spec.offset >= dev)
        throw std::invalid_argument("workload: offset is past the end of the device");
    uint64_t region = spec.size ? spec.size : dev - spec.offset;
    if (region > dev - spec.offset) region = dev - spec.offset;
    uint64_t blocks = region / spec.block_size;
    if (!blocks) throw std::invalid_argument("workload: region is smaller than one block");
    uint64_t total = spec.total_bytes ? spec.total_bytes : blocks * spec.block_size;
    uint32_t depth = spec.iodepth ? spec.iodepth : 1;
    uint32_t batch = spec.batch ? spec.batch : 1;

    BufferedIo& bio = stack.buffered();
    bio.set_iodepth(depth);
    EventLoop& loop = stack.loop();

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
            r.record(c, spec.block_size, now - issued_at[slot]);
            free_slots.push_back(slot);
        }
        task.completions.clear();
    };

    for (;;) {
        stack.reap(task, 0, 0);
        account();
        bool more = submitted < total;
        if (more && !free_slots.empty()) {
            if (bio.submitter_free_at() > loop.now()) {
                // fio's thread is still busy (its own work, inline attempts,
                // task_work): the next submission waits for it.
                loop.schedule_at(bio.submitter_free_at(), &wake_up, nullptr);
                loop.wait_for_next();
                continue;
            }
            stack.begin_batch(task);
            for (uint32_t n = 0; n < batch && submitted < total && !free_slots.empty(); n++) {
                uint32_t slot = free_slots.back();
                free_slots.pop_back();
                busy[slot] = true;
                uint64_t block = spec.random ? rng() % blocks : next_block++ % blocks;
                bio.charge_submitter(bio.costs().fio_submit_ns);
                issued_at[slot] = loop.now();
                stack.queue_buffered(task, spec.op, spec.offset + block * spec.block_size,
                                     spec.block_size, buffers[slot].get(), slot);
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
    r.elapsed_ns = loop.now() - start;
    return r;
}

}  // namespace mdsplit
