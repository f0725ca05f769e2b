// Turns one direct I/O (a user buffer) into bios the way
// block/bio.c bio_iov_iter_get_pages() does: a bio holds at most
// BIO_MAX_VECS bvecs, and physically contiguous pages share one bvec. The
// seed-001 policies then decide where a bio stops:
//   original     - as many bvecs as fit (sizes unrelated to max_sectors)
//   align        - a bio that is not the last stops at a multiple of `align`
//   max_sectors  - never larger than the device's max_sectors
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "config/stack_config.h"

namespace mdsplit {

inline constexpr uint32_t kBioMaxVecs = 256;  // BIO_MAX_VECS

struct BioPiece {
    uint64_t offset;  // within the I/O
    uint64_t length;
    uint32_t bvecs;
};

class BioBuilder {
public:
    // device_max_bytes: the target device's max_sectors in bytes.
    BioBuilder(const BioConfig& config, uint64_t device_max_bytes, uint32_t logical_block_size);

    // Pieces for an I/O of `length` bytes at user address `buffer`.
    // Throws std::runtime_error when contiguity = pagemap cannot be read.
    void build(const void* buffer, uint64_t length, std::vector<BioPiece>& out);

    // Bytes of physical contiguity starting at `addr` (at most `limit`).
    uint64_t contiguous_run(uintptr_t addr, uint64_t limit);

private:
    uint64_t pagemap_run(uintptr_t addr, uint64_t limit);
    uint64_t distribution_run(uintptr_t addr, uint64_t limit);
    uint64_t pattern_run(uintptr_t addr, uint64_t limit);

    BioConfig config_;
    uint64_t device_max_bytes_;
    uint32_t lbs_;
    int pagemap_fd_ = -1;
    std::vector<double> cumulative_;
    std::vector<uint64_t> pattern_ends_;  // cumulative pattern lengths in pages
    uintptr_t buffer_start_page_ = 0;
};

}  // namespace mdsplit
