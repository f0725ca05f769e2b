// SeekHistogram: the two bucket conventions (ours [lo, hi), the thread's (lo, hi]).
#include "core/trace/seek_histogram.h"

#include <gtest/gtest.h>

namespace mdsplit {

// A 64 KiB distance (md's parity skip) is "64 .. 128" for us and "32 .. 64" for the thread.
TEST(SeekHistogram, SixtyFourKiBSkipLandsInBothConventionsRows) {
    EXPECT_EQ(SeekHistogram::bucket_of(64 * 1024), 7);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(64 * 1024), 6);
}

// Zero stays in row 0 in both conventions; 1 KiB is row 1 for us, row 0 for the thread.
TEST(SeekHistogram, ZeroAndOneKiBRows) {
    EXPECT_EQ(SeekHistogram::bucket_of(0), 0);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(0), 0);
    EXPECT_EQ(SeekHistogram::bucket_of(1024), 1);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(1024), 0);
}

// Just above a power of two moves to the next thread row; far distances cap at the last row.
TEST(SeekHistogram, ThreadRowsAreUpperInclusiveAndCapped) {
    EXPECT_EQ(SeekHistogram::thread_bucket_of(64 * 1024 + 512), 7);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(1024 * 1024), 10);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(1024 * 1024 + 512), 11);
    EXPECT_EQ(SeekHistogram::thread_bucket_of(uint64_t(1) << 40), 11);
}

// record_issue fills both arrays from the same distances (two requests after the first).
TEST(SeekHistogram, RecordIssueCountsBothConventions) {
    SeekHistogram h;
    h.record_issue(0, 128);    // 0..64 KiB
    h.record_issue(256, 128);  // 64 KiB gap
    h.record_issue(384, 128);  // contiguous
    EXPECT_EQ(h.count(), 2u);
    EXPECT_EQ(h.zero_count(), 1u);
    EXPECT_EQ(h.buckets()[7], 1u);
    EXPECT_EQ(h.thread_buckets()[6], 1u);
    EXPECT_EQ(h.thread_buckets()[0], 1u);
}

}  // namespace mdsplit
