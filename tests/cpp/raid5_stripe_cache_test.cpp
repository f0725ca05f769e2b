// md's RAID5 write path with its stripe cache (drivers/md/raid5.c): the
// member reads and writes md issues, computed by hand for 3- and 5-member
// arrays with 64 KiB chunks (left-symmetric: chunk-stripe 0 has parity on the
// last member and data chunks 0.. on members 0..; a 64 KiB chunk is 16 rows
// of 4 KiB stripe heads). Writes are REQ_SYNC (O_DIRECT), so stripes are
// STRIPE_PREREAD_ACTIVE at once (make_stripe_request) and never delayed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/ram_backend.h"
#include "core/drivers/timed_backend.h"
#include "core/md/raid5_device.h"
#include "core/trace/tracer.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;

void done_bio(Bio* bio) {
    (*static_cast<int*>(bio->private_data))++;
    bio->pool->put(bio);
}

// Virtual clock, RAM members, the md device over them.
class CacheRig {
public:
    // `command_ns` > 0: members take that long per request (virtual time).
    CacheRig(uint32_t n, uint32_t stripe_cache_size = 256, uint64_t command_ns = 0)
        : n_(n), loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, SplitInsert::Head) {
        MemberQueueLimits limits;
        limits.max_sectors = 1024;
        std::vector<MemberQueue*> members;
        for (uint32_t i = 0; i < n; i++) {
            std::unique_ptr<Backend> backend = std::make_unique<RamBackend>(loop_, 4 << 20);
            if (command_ns) {
                TimingModelConfig model;
                model.command_ns = command_ns;
                model.parallelism = 32;
                backend = std::make_unique<TimedBackend>(loop_, std::move(backend), model);
            }
            members_.push_back(std::make_unique<MemberQueue>(
                layer_, "m" + std::to_string(i), make_devt(8, 16 * i), std::move(backend), limits));
            members.push_back(members_.back().get());
        }
        DeviceConfig config;
        config.kind = DeviceKind::Raid5;
        config.chunk_bytes = 64 * kKiB;
        config.stripe_cache_size = stripe_cache_size;
        config.devices_handle_discard_safely = true;
        md_ = std::make_unique<Raid5Device>(layer_, "md0", make_devt(9, 0), members,
                                            std::vector<bool>(n, false), config);
        buf_.assign(1 << 20, 0x5a);
        task_.pid = 1;
    }
    // Writes submitted inside one plug, then run to completion.
    void write_batch(const std::vector<std::pair<uint64_t, uint64_t>>& writes, bool sync = true) {
        layer_.set_current(&task_);
        layer_.start_plug(task_);
        int done = 0;
        for (auto [offset, length] : writes) {
            Bio* bio = layer_.bios().alloc();
            bio->op = Op::Write;
            bio->flags = sync ? kBioSync : 0;
            bio->sector = offset >> kSectorShift;
            bio->nr_sectors = uint32_t(length >> kSectorShift);
            bio->dev = md_.get();
            bio->data = buf_.data();
            bio->pid = 1;
            bio->end_io = &done_bio;
            bio->private_data = &done;
            layer_.submit_bio_noacct(bio);
        }
        layer_.finish_plug(task_);
        run();
        EXPECT_EQ(done, int(writes.size()));
    }
    void write(uint64_t offset, uint64_t length) { write_batch({{offset, length}}); }
    // One bio submitted (outside a plug) and left to run; `done` counts completions.
    void submit(Op op, uint64_t offset, uint64_t length, int* done, uint8_t* data = nullptr,
                uint32_t pid = 1) {
        layer_.set_current(&task_);
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->flags = op == Op::Discard ? 0 : kBioSync;
        bio->sector = offset >> kSectorShift;
        bio->nr_sectors = uint32_t(length >> kSectorShift);
        bio->dev = md_.get();
        bio->data = op == Op::Discard ? nullptr : data ? data : buf_.data();
        bio->pid = pid;
        bio->end_io = &done_bio;
        bio->private_data = done;
        layer_.submit_bio_noacct(bio);
    }
    std::vector<uint8_t> read(uint64_t offset, uint64_t length) {
        std::vector<uint8_t> out(length, 0xee);
        int done = 0;
        submit(Op::Read, offset, length, &done, out.data());
        run();
        EXPECT_EQ(done, 1);
        return out;
    }
    void run_ready() { loop_.run_ready(); }
    // Runs until *flag is set; false if the loop ran dry first.
    bool run_until(const int* flag) {
        loop_.run_ready();
        while (!*flag && loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
        return *flag != 0;
    }
    uint64_t now() const { return loop_.now(); }
    void run() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }
    // Member bios of each direction: requests plus merged bios.
    uint64_t bios(uint32_t i, int dir) const {
        return members_[i]->stats().ios[dir] + members_[i]->stats().merges[dir];
    }
    uint64_t reads(uint32_t i) const { return bios(i, 0); }
    uint64_t writes(uint32_t i) const { return bios(i, 1); }
    uint64_t total_reads() const {
        uint64_t r = 0;
        for (uint32_t i = 0; i < n_; i++) r += reads(i);
        return r;
    }
    Raid5Device& md() { return *md_; }
    EventLoop& loop() { return loop_; }

private:
    uint32_t n_;
    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    BlockLayer layer_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
    std::unique_ptr<Raid5Device> md_;
    std::vector<uint8_t> buf_;
    TaskContext task_;
};

// 3 members, 32 sequential 4 KiB writes one at a time (iodepth 1) over
// chunk-stripe 0. Writes 0..15 (chunk 0, member 0, rows 0..15) miss the
// cache: rcw reads the other data unit (1, member 1) < rmw's data + parity
// (2); each writes data + parity. Writes 16..31 (chunk 1, member 1) hit the
// same rows, all pages R5_UPTODATE: nothing read. Reads: m1 16. Writes: m0
// 16, m1 16, m2 (parity) 32.
TEST(Raid5StripeCacheTest, SequentialWritesDepthOneThreeMembers) {
    CacheRig rig(3);
    for (uint64_t k = 0; k < 32; k++) rig.write(k * 4 * kKiB, 4 * kKiB);
    EXPECT_EQ(rig.reads(0), 0u);
    EXPECT_EQ(rig.reads(1), 16u);
    EXPECT_EQ(rig.reads(2), 0u);
    EXPECT_EQ(rig.writes(0), 16u);
    EXPECT_EQ(rig.writes(1), 16u);
    EXPECT_EQ(rig.writes(2), 32u);
    const auto& c = rig.md().counters();
    EXPECT_EQ(c.rcw, 32u);
    EXPECT_EQ(c.rmw, 0u);
    EXPECT_EQ(c.full_stripe_writes, 0u);
    EXPECT_EQ(c.preread_reads, 16u);
    EXPECT_EQ(c.delayed_stripes, 0u);
    EXPECT_EQ(rig.md().cache_counters().misses, 16u);
    EXPECT_EQ(rig.md().cache_counters().hits, 16u);
}

// 5 members, 64 sequential 4 KiB writes at iodepth 1 over chunk-stripe 0
// (data on m0..m3, parity m4). Chunk 0 (miss): rmw reads d0+p (2) < rcw's
// d1,d2,d3 (3). Chunk 1 (d0, p cached): rmw reads d1 (1) < rcw d2,d3 (2).
// Chunk 2: rmw d2 (1) = rcw d3 (1), the tie goes to rcw: read d3. Chunk 3:
// everything cached, nothing read (rcw). Reads: m0 16, m1 16, m2 0, m3 16,
// m4 16 = 64; writes: 16 on each data member, 64 on parity.
TEST(Raid5StripeCacheTest, SequentialWritesDepthOneFiveMembers) {
    CacheRig rig(5);
    for (uint64_t k = 0; k < 64; k++) rig.write(k * 4 * kKiB, 4 * kKiB);
    const uint64_t reads[5] = {16, 16, 0, 16, 16};
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(rig.reads(i), reads[i]) << i;
        EXPECT_EQ(rig.writes(i), i == 4 ? 64u : 16u) << i;
    }
    const auto& c = rig.md().counters();
    EXPECT_EQ(c.rmw, 32u);
    EXPECT_EQ(c.rcw, 32u);
    EXPECT_EQ(c.preread_reads, 64u);
}

// 3 members, the same 32 writes all in flight at once (iodepth 32, one
// plug): every row gets both data units before raid5d handles it, so all 16
// rows are full-stripe writes: no reads, 16 writes per member.
TEST(Raid5StripeCacheTest, SequentialWritesDepth32AreFullStripeWrites) {
    CacheRig rig(3);
    std::vector<std::pair<uint64_t, uint64_t>> batch;
    for (uint64_t k = 0; k < 32; k++) batch.push_back({k * 4 * kKiB, 4 * kKiB});
    rig.write_batch(batch);
    for (uint32_t i = 0; i < 3; i++) {
        EXPECT_EQ(rig.reads(i), 0u) << i;
        EXPECT_EQ(rig.writes(i), 16u) << i;
    }
    EXPECT_EQ(rig.md().counters().full_stripe_writes, 16u);
    EXPECT_EQ(rig.md().counters().rcw + rig.md().counters().rmw, 0u);
}

// 5 members, iodepth 32 of sequential 4 KiB writes: two batches of 32
// cover chunks 0-1 then 2-3 of chunk-stripe 0. Batch 1: each row has d0, d1
// new, rmw reads d0,d1,p (3) > rcw d2,d3 (2): rcw reads 2 per row (m2, m3).
// Batch 2: d2, d3 new, everything cached: no reads. Reads 32, rcw 32.
TEST(Raid5StripeCacheTest, SequentialWritesDepth32FiveMembers) {
    CacheRig rig(5);
    for (uint64_t b = 0; b < 2; b++) {
        std::vector<std::pair<uint64_t, uint64_t>> batch;
        for (uint64_t k = 0; k < 32; k++) batch.push_back({(b * 32 + k) * 4 * kKiB, 4 * kKiB});
        rig.write_batch(batch);
    }
    const uint64_t reads[5] = {0, 0, 16, 16, 0};
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(rig.reads(i), reads[i]) << i;
        EXPECT_EQ(rig.writes(i), i == 4 ? 32u : 16u) << i;
    }
    EXPECT_EQ(rig.md().counters().rcw, 32u);
}

// 5 members, one 256 KiB write of chunk-stripe 0: 16 full-stripe writes,
// nothing read, 16 stripe bios on every member.
TEST(Raid5StripeCacheTest, FullStripeWriteReadsNothing) {
    CacheRig rig(5);
    rig.write(0, 256 * kKiB);
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(rig.reads(i), 0u) << i;
        EXPECT_EQ(rig.writes(i), 16u) << i;
    }
    EXPECT_EQ(rig.md().counters().full_stripe_writes, 16u);
}

// 5 members, row 0: a 4 KiB write to chunk 0 reads d0+p (rmw, 2); then one
// to chunk 1 finds d0 and p cached: rmw reads d1 only (1); rewriting chunk 0
// finds everything it needs cached: no read.
TEST(Raid5StripeCacheTest, WriteToCachedStripeReadsOnlyWhatIsMissing) {
    CacheRig rig(5);
    rig.write(0, 4 * kKiB);
    EXPECT_EQ(rig.total_reads(), 2u);
    rig.write(64 * kKiB, 4 * kKiB);
    EXPECT_EQ(rig.total_reads(), 3u);
    EXPECT_EQ(rig.reads(1), 1u);
    rig.write(0, 4 * kKiB);
    EXPECT_EQ(rig.total_reads(), 3u);
    EXPECT_EQ(rig.md().counters().rmw, 3u);
    EXPECT_EQ(rig.md().cache_counters().hits, 2u);
    EXPECT_EQ(rig.md().cache_counters().misses, 1u);
}

// stripe_cache_size 17: hash bucket 0 (rows 0, 8, 16, ...) holds 3 heads
// (grow_one_stripe: k % 8). Writing rows 0, 8, 16, 24 evicts row 0, the
// least recently released; rewriting it reads d0+p again (2), where a
// cached row 8 would read nothing.
TEST(Raid5StripeCacheTest, LeastRecentlyUsedStripeIsEvicted) {
    CacheRig rig(5, 17);
    for (uint64_t row : {0, 8}) rig.write(row * 4 * kKiB, 4 * kKiB);  // chunk 0: rows < 16
    rig.write(256 * kKiB + 0 * 4 * kKiB, 4 * kKiB);                   // chunk-stripe 1, row 16
    rig.write(256 * kKiB + 8 * 4 * kKiB, 4 * kKiB);                   // row 24
    EXPECT_EQ(rig.total_reads(), 8u);
    rig.write(8 * 4 * kKiB, 4 * kKiB);  // row 8: still cached
    EXPECT_EQ(rig.total_reads(), 8u);
    rig.write(0, 4 * kKiB);  // row 0: evicted
    EXPECT_EQ(rig.total_reads(), 10u);
    EXPECT_EQ(rig.md().cache_counters().misses, 5u);
}

// Random 4 KiB writes at iodepth 1 to distinct rows (64 rows of 3 chunk-
// stripes, a random data unit each): every write misses; on 5 members each
// is an rmw reading data + parity (2) and writing 2; on 3 members an rcw
// reading the other unit (1) and writing 2.
TEST(Raid5StripeCacheTest, RandomWritesToDistinctRows) {
    for (uint32_t n : {3u, 5u}) {
        CacheRig rig(n);
        uint64_t seed = 12345;
        std::vector<uint64_t> rows;
        for (uint64_t r = 0; r < 48; r++) rows.push_back(r);
        uint64_t writes = 0;
        while (!rows.empty()) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t pick = size_t(seed >> 33) % rows.size();
            uint64_t row = rows[pick];
            rows.erase(rows.begin() + long(pick));
            uint64_t chunk_stripe = row / 16, unit = (seed >> 20) % (n - 1);
            uint64_t offset = (chunk_stripe * (n - 1) + unit) * 64 * kKiB + (row % 16) * 4 * kKiB;
            rig.write(offset, 4 * kKiB);
            writes++;
        }
        uint64_t total_writes = 0;
        for (uint32_t i = 0; i < n; i++) total_writes += rig.writes(i);
        EXPECT_EQ(rig.total_reads(), (n == 5 ? 2u : 1u) * writes) << n;
        EXPECT_EQ(total_writes, 2u * writes) << n;
        EXPECT_EQ(rig.md().cache_counters().misses, writes);
        EXPECT_EQ(n == 5 ? rig.md().counters().rmw : rig.md().counters().rcw, writes);
    }
}

// Writes without REQ_SYNC (writeback) that need pre-reads are delayed
// (STRIPE_DELAYED) and the delayed stripes activated together once no
// pre-reading stripe is active (raid5_activate_delayed, IO_THRESHOLD 1).
TEST(Raid5StripeCacheTest, NonSyncWritesNeedingReadsAreDelayed) {
    CacheRig rig(5);
    rig.write_batch({{0, 4 * kKiB}, {4 * kKiB, 4 * kKiB}}, false);
    EXPECT_EQ(rig.md().counters().delayed_stripes, 2u);
    EXPECT_EQ(rig.md().counters().rmw, 2u);
    EXPECT_EQ(rig.total_reads(), 4u);
    EXPECT_EQ(rig.md().active_stripes(), 0u);
}

// 5 members, row 0: a 4 KiB write to chunk 0 starts an rmw, reading d0+p
// (m0, m4). A write to chunk 1 (d1) arrives while those reads are in flight:
// it joins the pending write (still on dev->towrite), and the stripe, still
// STRIPE_PREREAD_ACTIVE, decides again without the units being read
// (R5_LOCKED): rmw reads d1 (1) < rcw d2,d3 (2). Once all three are back,
// one rmw writes d0, d1 and p. Nothing is delayed: O_DIRECT writes are
// REQ_SYNC. Reads 3 (m0, m1, m4), writes 3, one rmw.
TEST(Raid5StripeCacheTest, WriteArrivingDuringPreReadJoinsIt) {
    CacheRig rig(5, 256, 20000);  // members take 20 us
    int done = 0;
    rig.submit(Op::Write, 0, 4 * kKiB, &done);
    rig.run_ready();  // raid5d: the pre-reads are at the members, 20 us from done
    EXPECT_EQ(done, 0);
    rig.submit(Op::Write, 64 * kKiB, 4 * kKiB, &done);
    rig.run();
    EXPECT_EQ(done, 2);
    const uint64_t reads[5] = {1, 1, 0, 0, 1}, writes[5] = {1, 1, 0, 0, 1};
    for (uint32_t i = 0; i < 5; i++) {
        EXPECT_EQ(rig.reads(i), reads[i]) << i;
        EXPECT_EQ(rig.writes(i), writes[i]) << i;
    }
    EXPECT_EQ(rig.md().counters().rmw, 1u);
    EXPECT_EQ(rig.md().counters().delayed_stripes, 0u);
}

// 5 members (256 KiB stripes), stripe_cache_size 17 (2 or 3 heads per hash
// bucket): one 1 MiB write is 64 rows. raid5_make_request() walks it row by
// row, each row taking its four data pieces at once (add_all_stripe_bios),
// so the rows that wait for a free head lose nothing: 64 full-stripe
// writes, no member read, 64 stripe bios on every member.
TEST(Raid5StripeCacheTest, LargeWriteWithSmallCacheIsFullStripeWrites) {
    CacheRig rig(5, 17);
    rig.write(0, 1 << 20);
    EXPECT_GT(rig.md().cache_counters().waits, 0u);
    EXPECT_EQ(rig.total_reads(), 0u);
    for (uint32_t i = 0; i < 5; i++) EXPECT_EQ(rig.writes(i), 64u) << i;
    EXPECT_EQ(rig.md().counters().full_stripe_writes, 64u);
    EXPECT_EQ(rig.md().counters().rcw + rig.md().counters().rmw, 0u);
    EXPECT_EQ(rig.md().active_stripes(), 0u);
}

// The same with a sequential stream: 8 writes of 1 MiB in one plug (fio
// iodepth 8), 3 members (128 KiB stripes), stripe_cache_size 17: 8 MiB is
// 1024 rows (8 KiB of data each), every one a full-stripe write; nothing read.
TEST(Raid5StripeCacheTest, SequentialLargeWritesWithSmallCacheReadNothing) {
    CacheRig rig(3, 17);
    std::vector<std::pair<uint64_t, uint64_t>> batch;
    for (uint64_t k = 0; k < 8; k++) batch.push_back({k << 20, 1 << 20});
    rig.write_batch(batch);
    EXPECT_EQ(rig.total_reads(), 0u);
    for (uint32_t i = 0; i < 3; i++) EXPECT_EQ(rig.writes(i), 1024u) << i;
    EXPECT_EQ(rig.md().counters().full_stripe_writes, 1024u);
}

// A discard of stripe 0 (3 members, 128 KiB) submitted while a write to it
// is still queued in the stripe cache waits (make_discard_request: R5_Overlap
// on a head with requests) and reaches the members after the write; a write
// submitted while the discard is at the members waits for it. Stripe 0
// reads back as zeroes, then as the second write's data.
TEST(Raid5StripeCacheTest, DiscardWaitsForBusyStripesAndWritesWaitForIt) {
    CacheRig rig(3);
    int done = 0;
    rig.submit(Op::Write, 0, 128 * kKiB, &done);
    rig.submit(Op::Discard, 0, 128 * kKiB, &done);
    rig.run();
    EXPECT_EQ(done, 2);
    EXPECT_EQ(rig.md().counters().overlap_waits, 1u);
    EXPECT_EQ(rig.read(0, 128 * kKiB), std::vector<uint8_t>(128 * kKiB, 0));
    rig.submit(Op::Discard, 0, 128 * kKiB, &done);
    std::vector<uint8_t> data(128 * kKiB, 0x77);
    rig.submit(Op::Write, 0, 128 * kKiB, &done, data.data());
    rig.run();
    EXPECT_EQ(done, 4);
    EXPECT_EQ(rig.md().counters().overlap_waits, 2u);
    EXPECT_EQ(rig.read(0, 128 * kKiB), data);
    EXPECT_EQ(rig.md().active_stripes(), 0u);
}

// Two writes of the same 4 KiB, the second submitted while the first is
// still queued on the head (not yet drained into its pages): the second
// waits (stripe_bio_overlaps, R5_Overlap) and is written after it, in its
// own reconstruct; the data is the second's.
TEST(Raid5StripeCacheTest, OverlappingWriteWaitsForTheQueuedOne) {
    CacheRig rig(5);
    int done = 0;
    std::vector<uint8_t> a(4 * kKiB, 0x11), b(4 * kKiB, 0x22);
    rig.submit(Op::Write, 0, 4 * kKiB, &done, a.data());
    rig.submit(Op::Write, 0, 4 * kKiB, &done, b.data());
    rig.run();
    EXPECT_EQ(done, 2);
    EXPECT_EQ(rig.md().counters().overlap_waits, 1u);
    EXPECT_EQ(rig.writes(0), 2u);
    EXPECT_EQ(rig.read(0, 4 * kKiB), b);
}

// A submitter waiting on an overlap holds back only its own later requests
// (it sleeps in raid5_make_request's walk); another submitter goes on. Members
// take 20 us. 5 members. Submitter 1: W1 row 0 d0 (rmw pre-reads d0+p,
// 0-20 us, written 20-40 us), W2 the same 4 KiB (overlaps W1, queued until W1
// is drained at 20 us), W3 row 1 d0 (behind W2: pre-reads 20-40, written
// 40-60). Submitter 2: W4 row 2 d0, at once: pre-reads 0-20, written 20-40,
// so done while W3 is not.
TEST(Raid5StripeCacheTest, OverlapWaitHoldsBackOnlyItsSubmitter) {
    CacheRig rig(5, 256, 20000);
    int w1 = 0, w2 = 0, w3 = 0, w4 = 0;
    rig.submit(Op::Write, 0, 4 * kKiB, &w1);
    rig.submit(Op::Write, 0, 4 * kKiB, &w2);
    rig.submit(Op::Write, 4 * kKiB, 4 * kKiB, &w3);
    rig.submit(Op::Write, 8 * kKiB, 4 * kKiB, &w4, nullptr, 2);
    ASSERT_TRUE(rig.run_until(&w4));
    EXPECT_EQ(w3, 0);
    EXPECT_LT(rig.now(), 50000u);
    rig.run();
    EXPECT_EQ(w1 + w2 + w3 + w4, 4);
    EXPECT_EQ(rig.md().counters().overlap_waits, 1u);
    EXPECT_EQ(rig.md().cache_counters().waits, 1u);  // W3, behind W2
}

// Pieces beyond the cache wait for free heads (R5_INACTIVE_BLOCKED) and
// the write still completes, leaving no head active: a 1 MiB write on 5
// members is 64 rows, 8 per bucket, with 17 heads (2 or 3 per bucket).
TEST(Raid5StripeCacheTest, WritesLargerThanTheCacheWaitForHeads) {
    CacheRig rig(5, 17);
    rig.write(0, 1 << 20);
    EXPECT_GT(rig.md().cache_counters().waits, 0u);
    EXPECT_EQ(rig.md().active_stripes(), 0u);
}

}  // namespace
}  // namespace mdsplit
