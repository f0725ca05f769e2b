#include "core/block/bio_builder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <random>
#include <stdexcept>

#include "base/units.h"

namespace mdsplit {

namespace {
// MADV_POPULATE_WRITE (Linux 5.14); older headers lack the name.
constexpr int kMadvPopulateWrite = 23;
constexpr uint64_t kPfnMask = (1ull << 55) - 1;
}  // namespace

BioBuilder::BioBuilder(const BioConfig& config, uint64_t device_max_bytes, uint32_t lbs)
    : config_(config), device_max_bytes_(device_max_bytes), lbs_(lbs) {}

BioBuilder::~BioBuilder() {
    if (pagemap_fd_ >= 0) close(pagemap_fd_);
}

// Physical contiguity from /proc/self/pagemap (bits 0-54: PFN, bit 63:
// present). Unprivileged readers see PFN 0, which we refuse: a fallback
// would silently give different bios than the kernel would build.
void BioBuilder::map_pagemap(uintptr_t first_page, size_t pages) {
    if (pagemap_fd_ < 0) {
        pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (pagemap_fd_ < 0)
            throw std::runtime_error(
                "mdsplit: [bio] contiguity = \"pagemap\": cannot open /proc/self/pagemap");
    }
    std::vector<uint64_t> entries(pages);
    ssize_t want = ssize_t(pages * sizeof(uint64_t));
    if (pread(pagemap_fd_, entries.data(), size_t(want), off_t(first_page / kPageSize * 8)) != want)
        throw std::runtime_error("mdsplit: [bio] contiguity = \"pagemap\": short pagemap read");
    for (size_t i = 0; i < pages; ++i) {
        if (!(entries[i] >> 63) || !(entries[i] & kPfnMask))
            throw std::runtime_error(
                "mdsplit: [bio] contiguity = \"pagemap\" needs root (CAP_SYS_ADMIN) to read "
                "physical page numbers; allowed without root: \"none\", a pattern or a "
                "distribution");
        continues_[i] = i > 0 && (entries[i] & kPfnMask) == (entries[i - 1] & kPfnMask) + 1;
    }
}

// Runs repeating the configured pattern from the first page of the buffer.
void BioBuilder::map_pattern(size_t pages) {
    size_t page = 0;
    for (size_t k = 0; page < pages; k = (k + 1) % config_.run_pattern.size()) {
        for (uint32_t j = 0; j < config_.run_pattern[k] && page < pages; ++j, ++page)
            continues_[page] = j > 0;
    }
}

// Run lengths drawn in order from the buffer's first page by a generator
// seeded with [bio] contiguity.seed: the same layout on every machine and
// for every I/O on the same buffer length (a virtual-clock run repeats).
void BioBuilder::map_distribution(size_t pages) {
    std::mt19937_64 rng(config_.run_seed);
    std::vector<double> cumulative;
    double acc = 0;
    for (auto& [run, weight] : config_.run_pages) cumulative.push_back(acc += weight);
    size_t page = 0;
    while (page < pages) {
        double u = double(rng() >> 11) * 0x1.0p-53 * acc;
        size_t i =
            size_t(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
        uint32_t run = config_.run_pages[std::min(i, config_.run_pages.size() - 1)].first;
        for (uint32_t j = 0; j < run && page < pages; ++j, ++page) continues_[page] = j > 0;
    }
}

void BioBuilder::map_contiguity(uintptr_t first_page, size_t pages) {
    continues_.assign(pages, false);
    switch (config_.contiguity) {
        case Contiguity::Pattern:
            map_pattern(pages);
            break;
        case Contiguity::Pagemap:
            map_pagemap(first_page, pages);
            break;
        case Contiguity::Distribution:
            map_distribution(pages);
            break;
        case Contiguity::None:
            break;
    }
}

// The common case in one step: no contiguity to map, and few enough pages
// (at most BIO_MAX_VECS) that the first batch takes the whole I/O whatever
// the policy (align leaves a bio's first batch alone; max_sectors only cuts
// beyond the device limit).
bool BioBuilder::fits_one_bio(uint64_t length, size_t pages) const {
    if (config_.contiguity != Contiguity::None || pages > kBioMaxVecs) return false;
    if (length == 0 || length % lbs_) return false;
    return config_.policy != BioPolicy::MaxSectors || length <= device_max_bytes_;
}

// iov_iter_extract_pages()'s maxsize: UINT_MAX - bi_size, or for the
// max_sectors policy what is left up to the device limit.
uint64_t BioBuilder::extract_limit(uint64_t bio_size) const {
    if (config_.policy == BioPolicy::MaxSectors) return device_max_bytes_ - bio_size;
    return uint64_t(UINT_MAX) - bio_size;
}

// Ming Lei's align patch (seed 001), after the logical-block trim:
//   if (iov_iter_count(iter) && bio->bi_iter.bi_size) {
//       aligned_size = (bi_size + size) & ~(BIO_CHUNK_SIZE - 1);
//       if (aligned_size <= bi_size) { if bi_size aligned: stop (revert all) }
//       else size = aligned_size - bi_size (revert the rest) }
// Returns the batch size to add; `stop` ends the bio without adding.
uint64_t BioBuilder::align_batch(uint64_t bio_size, uint64_t batch, bool last, bool& stop) const {
    stop = false;
    if (config_.policy != BioPolicy::Align || last || bio_size == 0) return batch;
    uint64_t chunk = config_.align_bytes;
    uint64_t aligned = (bio_size + batch) & ~(chunk - 1);
    if (aligned <= bio_size) {
        stop = bio_size % chunk == 0;
        return stop ? 0 : batch;
    }
    return aligned - bio_size;
}

void BioBuilder::build(const void* buffer, uint64_t length, std::vector<BioPiece>& out) {
    out.clear();
    auto base = reinterpret_cast<uintptr_t>(buffer);
    uintptr_t first_page = base & ~(kPageSize - 1);
    uintptr_t end_page = (base + length + kPageSize - 1) & ~(kPageSize - 1);
    size_t pages = (end_page - first_page) / kPageSize;
    if (fits_one_bio(length, pages)) {
        // Without contiguity every page is a bvec of its own.
        out.push_back(BioPiece{0, length, uint32_t(pages)});
        return;
    }
    if (config_.contiguity == Contiguity::Pagemap) {
        // A read buffer fio never touched has no pages yet, and pagemap would
        // report them absent: fault them in (contents kept) as the kernel's
        // get_user_pages() would while pinning them.
        if (madvise(reinterpret_cast<void*>(first_page), end_page - first_page,
                    kMadvPopulateWrite) != 0) {
            for (uintptr_t p = first_page; p < end_page; p += kPageSize)
                __atomic_fetch_add(reinterpret_cast<volatile uint8_t*>(p), 0, __ATOMIC_RELAXED);
        }
    }
    map_contiguity(first_page, pages);

    uint64_t pos = 0;  // bytes of the I/O already in bios
    while (pos < length) {
        uint64_t bio_size = 0;
        uint32_t vcnt = 0;
        // bio_iov_iter_get_pages(): do { __bio_iov_iter_get_pages() }
        // while (!ret && iov_iter_count(iter) && !bio_full(bio, 0)).
        while (pos + bio_size < length && vcnt < kBioMaxVecs) {
            uint64_t at = pos + bio_size;
            // iov_iter_extract_pages(): at most bi_max_vecs - bi_vcnt pages.
            uint64_t in_first = kPageSize - ((base + at) & (kPageSize - 1));
            uint64_t pages_bytes = in_first + uint64_t(kBioMaxVecs - vcnt - 1) * kPageSize;
            uint64_t batch = std::min({pages_bytes, length - at, extract_limit(bio_size)});
            batch -= batch % lbs_;  // trim to the logical block size
            if (batch == 0) break;
            bool stop = false;
            batch = align_batch(bio_size, batch, at + batch == length, stop);
            if (stop) break;
            // bio_iov_add_page() page by page; bvec_try_merge_page() merges a
            // page that starts where the last bvec ends, physically.
            for (uint64_t off = at; off < at + batch;) {
                uint64_t addr = base + off;
                uint64_t len = std::min(kPageSize - (addr & (kPageSize - 1)), at + batch - off);
                size_t page = (addr - first_page) / kPageSize;
                bool same_page = off > pos && (addr & (kPageSize - 1)) != 0;
                bool merges = off > pos && (same_page || continues_[page]);
                if (!merges) vcnt++;
                off += len;
            }
            bio_size += batch;
            if (config_.policy == BioPolicy::MaxSectors && bio_size >= device_max_bytes_) break;
        }
        if (bio_size == 0) {
            // Less than one logical block left: the kernel fails the I/O
            // (-EFAULT); keep the remainder as one piece so the caller sees it.
            bio_size = length - pos;
        }
        out.push_back(BioPiece{pos, bio_size, vcnt});
        pos += bio_size;
    }
}

}  // namespace mdsplit
