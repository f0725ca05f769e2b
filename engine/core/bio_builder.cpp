#include "core/bio_builder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "core/units.h"

namespace mdsplit {

namespace {
// MADV_POPULATE_WRITE (Linux 5.14); older headers lack the name.
constexpr int kMadvPopulateWrite = 23;
}  // namespace

BioBuilder::BioBuilder(const BioConfig& config, uint64_t device_max_bytes, uint32_t lbs)
    : config_(config), device_max_bytes_(device_max_bytes), lbs_(lbs) {
    uint64_t acc_pages = 0;
    for (uint32_t pages : config_.run_pattern) pattern_ends_.push_back(acc_pages += pages);
    if (config_.contiguity == Contiguity::Distribution) {
        double total = 0;
        for (auto& [pages, weight] : config_.run_pages) total += weight;
        double acc = 0;
        for (auto& [pages, weight] : config_.run_pages) {
            acc += weight / total;
            cumulative_.push_back(acc);
        }
    }
}

// Physical contiguity from /proc/self/pagemap (bits 0-54: PFN, bit 63:
// present). Unprivileged readers see PFN 0, which we refuse: a fallback
// would silently give different bios than the kernel would build.
uint64_t BioBuilder::pagemap_run(uintptr_t addr, uint64_t limit) {
    if (pagemap_fd_ < 0) {
        pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (pagemap_fd_ < 0)
            throw std::runtime_error(
                "mdsplit: [bio] contiguity = \"pagemap\": cannot open /proc/self/pagemap");
    }
    auto pfn_of = [&](uintptr_t page) -> uint64_t {
        uint64_t entry = 0;
        if (pread(pagemap_fd_, &entry, 8, off_t(page / kPageSize * 8)) != 8 || !(entry >> 63))
            return 0;
        return entry & ((1ull << 55) - 1);
    };
    uintptr_t page = addr & ~(kPageSize - 1);
    uint64_t pfn = pfn_of(page);
    if (!pfn)
        throw std::runtime_error(
            "mdsplit: [bio] contiguity = \"pagemap\" needs root (CAP_SYS_ADMIN) to read physical "
            "page numbers; allowed without root: \"none\" or a distribution");
    uint64_t run = std::min<uint64_t>(page + kPageSize - addr, limit);
    while (run < limit) {
        page += kPageSize;
        if (pfn_of(page) != ++pfn) break;
        run = std::min<uint64_t>(run + kPageSize, limit);
    }
    return run;
}

// Run lengths drawn from the configured distribution, deterministic for a
// given buffer address (the same buffer always has the same layout).
uint64_t BioBuilder::distribution_run(uintptr_t addr, uint64_t limit) {
    uintptr_t page = addr / kPageSize;
    std::mt19937_64 rng(page * 0x9E3779B97F4A7C15ull);
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    size_t i = std::lower_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin();
    if (i >= config_.run_pages.size()) i = config_.run_pages.size() - 1;
    uint64_t pages = config_.run_pages[i].first;
    uint64_t run = pages * kPageSize - (addr & (kPageSize - 1));
    return std::min(run, limit);
}

// Runs repeating the configured pattern from the first page of the buffer.
uint64_t BioBuilder::pattern_run(uintptr_t addr, uint64_t limit) {
    uint64_t page = addr / kPageSize - buffer_start_page_;
    uint64_t period = pattern_ends_.back();
    uint64_t in_period = page % period;
    auto end = std::upper_bound(pattern_ends_.begin(), pattern_ends_.end(), in_period);
    uint64_t pages_left = *end - in_period;
    uint64_t run = pages_left * kPageSize - (addr & (kPageSize - 1));
    return std::min(run, limit);
}

uint64_t BioBuilder::contiguous_run(uintptr_t addr, uint64_t limit) {
    switch (config_.contiguity) {
        case Contiguity::Pattern:
            return pattern_run(addr, limit);
        case Contiguity::Pagemap:
            return pagemap_run(addr, limit);
        case Contiguity::Distribution:
            return distribution_run(addr, limit);
        case Contiguity::None:
            break;
    }
    return std::min<uint64_t>(kPageSize - (addr & (kPageSize - 1)), limit);
}

void BioBuilder::build(const void* buffer, uint64_t length, std::vector<BioPiece>& out) {
    out.clear();
    auto base = reinterpret_cast<uintptr_t>(buffer);
    buffer_start_page_ = base / kPageSize;
    if (config_.contiguity == Contiguity::Pagemap) {
        // A read buffer fio never touched has no pages yet, and pagemap would
        // report them absent: fault them in (contents kept) as the kernel's
        // get_user_pages() would while pinning them.
        uintptr_t first = base & ~(kPageSize - 1);
        uintptr_t end = (base + length + kPageSize - 1) & ~(kPageSize - 1);
        if (madvise(reinterpret_cast<void*>(first), end - first, kMadvPopulateWrite) != 0) {
            for (uintptr_t p = first; p < end; p += kPageSize)
                __atomic_fetch_add(reinterpret_cast<volatile uint8_t*>(p), 0, __ATOMIC_RELAXED);
        }
    }
    uint64_t pos = 0;
    while (pos < length) {
        uint64_t size = 0;
        uint32_t bvecs = 0;
        while (pos + size < length && bvecs < kBioMaxVecs) {
            size += contiguous_run(base + pos + size, length - pos - size);
            bvecs++;
        }
        bool last = pos + size == length;
        if (config_.policy == BioPolicy::MaxSectors && size > device_max_bytes_) {
            size = device_max_bytes_;
        } else if (config_.policy == BioPolicy::Align && !last && size > config_.align_bytes) {
            size -= size % config_.align_bytes;
        }
        // bio_iov_iter_get_pages() trims to the logical block size.
        if (size > lbs_ && size % lbs_) size -= size % lbs_;
        out.push_back(BioPiece{pos, size, bvecs});
        pos += size;
    }
}

}  // namespace mdsplit
