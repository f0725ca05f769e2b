#include "core/workload.h"

#include <cstdlib>
#include <cstring>
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
        throw std::invalid_argument("workload: bs must be a positive multiple of the logical block size");
    if (spec.offset >= dev) throw std::invalid_argument("workload: offset is past the end of the device");
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
            uint64_t lat = now - issued_at[slot];
            r.total_latency_ns += lat;
            if (lat > r.max_latency_ns) r.max_latency_ns = lat;
            if (c.error) r.errors++;
            else {
                r.ios++;
                r.bytes += spec.block_size - c.resid;
            }
            free_slots.push_back(slot);
        }
        task.completions.clear();
    }
    r.elapsed_ns = stack.loop().now() - start;
    return r;
}

}  // namespace mdsplit
