// What every closed-loop workload of the virtual-time runs shares, as fio's
// io_u pool is shared by its engines: the region its blocks are drawn from
// (WorkloadRegion) and `iodepth` slots, each with its own buffer, that keep
// that many I/Os in flight (IoSlots). The direct drivers (workload.h) and
// the buffered one (buffered_workload.h) differ in how they submit and reap,
// not in these.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "base/units.h"

namespace mdsplit {

// What a closed-loop workload is, as a fio job names it: the I/O, where,
// how much, how deep.
struct ClosedLoopSpec {
    Op op = Op::Read;
    bool random = false;  // rw=randread / randwrite: blocks drawn from `seed`
    uint64_t block_size = 4096;
    uint64_t offset = 0;       // start of the region
    uint64_t size = 0;         // region size (0 = device size - offset)
    uint64_t total_bytes = 0;  // stop after this many bytes (0 = one pass of the region)
    uint32_t iodepth = 1;
    uint32_t batch = 1;  // I/Os queued per commit (fio's iodepth_batch)
    uint64_t seed = 1;
    uint32_t pid = 1;
};

// The blocks a workload reads or writes: `blocks` of `block_size` bytes
// from `offset`.
struct WorkloadRegion {
    uint64_t offset = 0;
    uint64_t block_size = 0;
    uint64_t blocks = 0;

    uint64_t block_offset(uint64_t block) const { return offset + block * block_size; }
    uint64_t bytes() const { return blocks * block_size; }
};

/**
 * workload_region - the region a workload spec names on a device
 * @device_bytes: the device's size
 * @offset: start of the region
 * @size: its size (0 = to the end of the device; clipped to the device)
 * @block_size: each I/O's size
 * @alignment: what block_size must be a multiple of (the logical block size
 *             for direct I/O, 1 for buffered I/O)
 *
 * Throws std::invalid_argument, naming what is wrong, when the block size is
 * 0 or unaligned, the offset is past the end, or no whole block fits.
 */
inline WorkloadRegion workload_region(uint64_t device_bytes, uint64_t offset, uint64_t size,
                                      uint64_t block_size, uint64_t alignment) {
    if (block_size == 0 || block_size % alignment)
        throw std::invalid_argument(
            alignment > 1 ? "workload: bs must be a positive multiple of the logical block size"
                          : "workload: bs must be positive");
    if (offset >= device_bytes)
        throw std::invalid_argument("workload: offset is past the end of the device");
    uint64_t region = size ? size : device_bytes - offset;
    if (region > device_bytes - offset) region = device_bytes - offset;
    WorkloadRegion r{offset, block_size, region / block_size};
    if (!r.blocks) throw std::invalid_argument("workload: region is smaller than one block");
    return r;
}

// `depth` I/O slots of `block_size` bytes each (page-aligned buffers, each
// filled with its own byte so that a misplaced buffer shows in the data).
// take() hands out the most recently freed slot, as a stack.
class IoSlots {
public:
    IoSlots(uint32_t depth, uint64_t block_size) : issued_at_(depth, 0) {
        for (uint32_t i = 0; i < depth; i++) {
            void* p = nullptr;
            if (posix_memalign(&p, 4096, block_size)) throw std::bad_alloc();
            memset(p, int(0xa5 ^ i), block_size);
            buffers_.emplace_back(static_cast<uint8_t*>(p));
        }
        for (uint32_t i = depth; i > 0; i--) free_.push_back(i - 1);
    }

    uint32_t depth() const { return uint32_t(buffers_.size()); }
    bool any_free() const { return !free_.empty(); }
    uint8_t* buffer(uint32_t slot) { return buffers_[slot].get(); }
    uint64_t issued_at(uint32_t slot) const { return issued_at_[slot]; }

    // Takes the slot on top of the free stack for an I/O issued at `now`.
    uint32_t take(uint64_t now) {
        uint32_t slot = free_.back();
        free_.pop_back();
        issued_at_[slot] = now;
        return slot;
    }
    // Returns a completed I/O's slot; its latency as of `now`.
    uint64_t give_back(uint32_t slot, uint64_t now) {
        free_.push_back(slot);
        return now - issued_at_[slot];
    }
    // Moves the free slot nearest the top whose `ready(slot)` holds to the
    // top (so take() hands it out next); false when none does.
    template <class Ready>
    bool raise_first(Ready ready) {
        for (size_t k = free_.size(); k > 0; k--)
            if (ready(free_[k - 1])) {
                std::swap(free_[k - 1], free_.back());
                return true;
            }
        return false;
    }

private:
    struct Free {
        void operator()(uint8_t* p) const { free(p); }
    };
    std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
    std::vector<uint32_t> free_;  // a stack: the last freed is taken first
    std::vector<uint64_t> issued_at_;
};

}  // namespace mdsplit
