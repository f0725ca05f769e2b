// Distance between consecutive issued requests of one device, as the seed
// thread computes it from blktrace D events:
//   |next.offset - (prev.offset + prev.len)|, in power-of-two KiB buckets
// 0..1, 1..2, ..., 512..1024, >= 1024.
// Two conventions are kept. buckets(): [lo, hi) KiB, a 64 KiB distance in
// "64 .. 128". thread_buckets(): the seed thread's tool, whose fixed-variant
// histogram puts every 64 KiB parity skip in "32 .. 64": 0 alone in "0 .. 1"
// (with any sub-KiB distance), then (lo, hi] KiB, > 1024 in the last row.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "base/units.h"

namespace mdsplit {

class SeekHistogram {
public:
    static constexpr int kBuckets = 12;  // [0,1) [1,2) ... [512,1024) [1024,inf) KiB

    void record_issue(sector_t sector, uint32_t nr_sectors) {
        if (have_prev_) {
            uint64_t a = sector << kSectorShift, b = prev_end_ << kSectorShift;
            uint64_t dist = a > b ? a - b : b - a;
            buckets_[bucket_of(dist)]++;
            thread_buckets_[thread_bucket_of(dist)]++;
            count_++;
            if (dist == 0) zero_++;
        }
        have_prev_ = true;
        prev_end_ = sector + nr_sectors;
    }
    // [2^(b-1), 2^b) KiB is bucket b: 1 + floor(log2(kib)), capped.
    static int bucket_of(uint64_t bytes) {
        uint64_t kib = bytes / 1024;
        if (kib == 0) return 0;
        int b = 64 - std::countl_zero(kib);
        return b < kBuckets - 1 ? b : kBuckets - 1;
    }
    // (2^(b-1), 2^b] KiB is bucket b; 0 and (0, 1] KiB are bucket 0.
    static int thread_bucket_of(uint64_t bytes) {
        if (bytes <= 1024) return 0;
        uint64_t kib_up = (bytes + 1023) / 1024;    // ceil: 64 KiB + 512 B is above 64
        int b = 64 - std::countl_zero(kib_up - 1);  // ceil(log2(kib_up))
        return b < kBuckets - 1 ? b : kBuckets - 1;
    }
    uint64_t count() const { return count_; }
    uint64_t zero_count() const { return zero_; }
    const std::array<uint64_t, kBuckets>& buckets() const { return buckets_; }
    const std::array<uint64_t, kBuckets>& thread_buckets() const { return thread_buckets_; }

private:
    bool have_prev_ = false;
    sector_t prev_end_ = 0;
    uint64_t count_ = 0, zero_ = 0;
    std::array<uint64_t, kBuckets> buckets_{};
    std::array<uint64_t, kBuckets> thread_buckets_{};
};

}  // namespace mdsplit
