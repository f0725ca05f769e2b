// Turns one direct I/O (a user buffer) into bios the way Linux 6.6
// (the seed-001 thread's kernel) does in block/bio.c:
//   bio_iov_iter_get_pages() calls __bio_iov_iter_get_pages() until the bio
//   is full (bio_full(): bi_vcnt == bi_max_vecs = BIO_MAX_VECS = 256) or the
//   iterator is empty; each call pins at most bi_max_vecs - bi_vcnt pages
//   (iov_iter_extract_pages), trims the batch to the logical block size and
//   adds the pages one by one (bio_iov_add_page), a page merging into the
//   previous bvec when it is physically contiguous with it
//   (bvec_try_merge_page: multi-page bvecs, no size cap).
// So a bio is not "256 x run length" pages but the pages pinned by the
// batches 256, 256 - v1, 256 - v2, ... until one batch adds only new bvecs.
// The seed-001 policies change where a bio stops:
//   original     - as above;
//   align        - Ming Lei's patch in the seed (BIO_CHUNK_SIZE = `align`):
//                  a batch of a non-empty bio that is not the last is cut
//                  back to the next multiple of `align`, and when it cannot
//                  reach one and the bio is already aligned, the bio ends;
//   max_sectors  - Ed Tsai's first patch ("limiting max bio size to 512KB",
//                  Ming Lei's reply after the seed): a batch never takes the
//                  bio past the device's max_sectors, and a bio that reaches
//                  it ends.
// Physical contiguity (which page merges with the previous one) comes from
// [bio] contiguity: none, pagemap (real PFNs), a repeating pattern or a
// seeded distribution of run lengths laid out from the buffer's first page.
#pragma once

#include <cstdint>
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
    ~BioBuilder();
    BioBuilder(const BioBuilder&) = delete;
    BioBuilder& operator=(const BioBuilder&) = delete;

    // Bios for an I/O of `length` bytes at user address `buffer`.
    // Throws std::runtime_error when contiguity = pagemap cannot be read.
    void build(const void* buffer, uint64_t length, std::vector<BioPiece>& out);

private:
    bool fits_one_bio(uint64_t length, size_t pages) const;
    void map_contiguity(uintptr_t first_page, size_t pages);
    void map_pagemap(uintptr_t first_page, size_t pages);
    void map_pattern(size_t pages);
    void map_distribution(size_t pages);
    uint64_t extract_limit(uint64_t bio_size) const;
    uint64_t align_batch(uint64_t bio_size, uint64_t batch, bool last, bool& stop) const;

    BioConfig config_;
    uint64_t device_max_bytes_;
    uint32_t lbs_;
    int pagemap_fd_ = -1;
    // For each page of the I/O being built: true when it is physically
    // contiguous with the page before it (index 0 is always false).
    std::vector<bool> continues_;
};

}  // namespace mdsplit
