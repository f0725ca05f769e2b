// Plugging and merging on a member queue (block/blk-mq.c blk_mq_submit_bio,
// blk_add_rq_to_plug, blk_mq_flush_plug_list; block/blk-merge.c
// blk_attempt_plug_merge, bio_attempt_back_merge, bio_attempt_front_merge),
// driver tags (blk_mq_get_driver_tag: requests wait when the queue depth is
// exhausted), iostat's await (blk_account_io_start/done), and the data that
// merged requests carry to the backend.
#include <gtest/gtest.h>

#include "member_queue_rig.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "config/config_loader.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/backend.h"
#include "core/drivers/ram_backend.h"
#include "core/drivers/timed_backend.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

// bio_attempt_back_merge(): bios that continue the plugged request join it
// (M), each counted as a merge in diskstats; one request is issued on unplug.
TEST(PlugMergeTest, BackMergesAdjacentBiosInOnePlug) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    h.submit(m, Op::Read, 0, 8);
    h.submit(m, Op::Read, 8, 8);
    h.submit(m, Op::Read, 16, 8);
    EXPECT_EQ(h.actions(m), "QGPQMQM");
    EXPECT_EQ(m.stats().merges[0], 2u);
    EXPECT_EQ(h.plug().rq_count, 1u);
    std::vector<TraceEvent> merges = h.events(m, TraceAction::BackMerge);
    ASSERT_EQ(merges.size(), 2u);
    EXPECT_EQ(merges[0].sector, 8u);
    EXPECT_EQ(merges[1].sector, 16u);

    h.finish_plug();
    EXPECT_EQ(h.actions(m), "QGPQMQMUD");
    ASSERT_EQ(h.recorder(0).issued.size(), 1u);
    EXPECT_EQ(h.recorder(0).issued[0].sector, 0u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_sectors, 24u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_bios, 3u);
    EXPECT_EQ(h.events(m, TraceAction::Unplug).at(0).depth, 1u);

    h.run_until_idle();
    EXPECT_EQ(h.completed, 3);
    EXPECT_EQ(m.stats().ios[0], 1u);
    EXPECT_EQ(m.stats().sectors[0], 24u);
    EXPECT_EQ(m.stats().merges[0], 2u);
}

// bio_attempt_front_merge(): bios that end where the plugged request starts
// join it at the front (F); the request then starts at the new bio.
TEST(PlugMergeTest, FrontMergesAdjacentBiosInOnePlug) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    h.submit(m, Op::Write, 16, 8);
    h.submit(m, Op::Write, 8, 8);
    h.submit(m, Op::Write, 0, 8);
    EXPECT_EQ(h.actions(m), "QGPQFQF");
    EXPECT_EQ(m.stats().merges[1], 2u);
    EXPECT_EQ(m.stats().merges[0], 0u);
    h.finish_plug();
    ASSERT_EQ(h.recorder(0).issued.size(), 1u);
    EXPECT_EQ(h.recorder(0).issued[0].sector, 0u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_sectors, 24u);
    std::vector<TraceEvent> issues = h.events(m, TraceAction::Issue);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].sector, 0u);
    EXPECT_EQ(issues[0].bytes, 12 * kKiB);
    h.run_until_idle();
    EXPECT_EQ(h.completed, 3);
    EXPECT_EQ(m.stats().ios[1], 1u);
    EXPECT_EQ(m.stats().sectors[1], 24u);
}

TEST(PlugMergeTest, BackAndFrontMergesGrowOneRequest) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    h.submit(m, Op::Read, 100, 8);
    h.submit(m, Op::Read, 108, 8);  // back
    h.submit(m, Op::Read, 92, 8);   // front
    h.submit(m, Op::Read, 116, 8);  // back again
    EXPECT_EQ(h.actions(m), "QGPQMQFQM");
    h.finish_plug();
    ASSERT_EQ(h.recorder(0).issued.size(), 1u);
    EXPECT_EQ(h.recorder(0).issued[0].sector, 92u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_sectors, 32u);
    EXPECT_EQ(m.stats().merges[0], 3u);
}

// ll_back_merge_fn() / ll_front_merge_fn(): a merge may make a request
// exactly max_sectors long, never longer.
TEST(PlugMergeTest, NoMergeBeyondMaxSectors) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(8 * kKiB));  // 16 sectors
    h.start_plug();
    h.submit(m, Op::Read, 0, 8);
    h.submit(m, Op::Read, 8, 8);   // 16 sectors: still allowed
    h.submit(m, Op::Read, 16, 8);  // 24 > 16: a new request
    h.submit(m, Op::Read, 24, 8);  // merges into the new one
    EXPECT_EQ(h.actions(m), "QGPQMQGQM");
    EXPECT_EQ(m.stats().merges[0], 2u);
    h.finish_plug();
    ASSERT_EQ(h.recorder(0).issued.size(), 2u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_sectors, 16u);
    EXPECT_EQ(h.recorder(0).issued[1].sector, 16u);
    EXPECT_EQ(h.recorder(0).issued[1].nr_sectors, 16u);
    EXPECT_EQ(h.events(m, TraceAction::Unplug).at(0).depth, 2u);
}

TEST(PlugMergeTest, NoFrontMergeBeyondMaxSectors) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(8 * kKiB));
    h.start_plug();
    h.submit(m, Op::Read, 16, 12);
    h.submit(m, Op::Read, 8, 8);  // 20 > 16
    EXPECT_EQ(h.actions(m), "QGPQG");
    EXPECT_EQ(m.stats().merges[0], 0u);
}

// blk_rq_merge_ok(): a read never merges with a write; without a plug
// every bio is its own request.
TEST(PlugMergeTest, NoMergeAcrossOpsOrWithoutPlug) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    h.submit(m, Op::Read, 0, 8);
    h.submit(m, Op::Write, 8, 8);
    EXPECT_EQ(h.actions(m), "QGPQG");
    h.finish_plug();
    h.run_until_idle();

    PlugHarness unplugged;
    MemberQueue& u = unplugged.add_member(member_limits(512 * kKiB));
    unplugged.submit(u, Op::Read, 0, 8);
    unplugged.submit(u, Op::Read, 8, 8);
    EXPECT_EQ(unplugged.actions(u), "QGDQGD");
    EXPECT_EQ(u.stats().merges[0], 0u);
}

// blk_add_rq_to_plug(): a plug holding BLK_MAX_REQUEST_COUNT (32) requests
// is flushed when the next one is added; that one starts a new plug (P).
TEST(PlugMergeTest, FlushesWhenThePlugHolds32Requests) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    for (sector_t i = 0; i < 32; i++) h.submit(m, Op::Read, i * 64, 8);  // never adjacent
    EXPECT_EQ(h.count(TraceAction::Unplug), 0u);
    EXPECT_EQ(h.count(TraceAction::Issue), 0u);
    EXPECT_EQ(h.plug().rq_count, 32u);

    h.submit(m, Op::Read, 32 * 64, 8);
    std::vector<TraceEvent> unplugs = h.events(m, TraceAction::Unplug);
    ASSERT_EQ(unplugs.size(), 1u);
    EXPECT_EQ(unplugs[0].depth, 32u);
    EXPECT_EQ(h.count(TraceAction::Issue), 32u);
    EXPECT_EQ(h.count(TraceAction::Plug), 2u);
    EXPECT_EQ(h.plug().rq_count, 1u);
    std::string tail = h.actions(m).substr(h.actions(m).size() - 36);
    EXPECT_EQ(tail, "QGU" + std::string(32, 'D') + "P");

    h.finish_plug();
    unplugs = h.events(m, TraceAction::Unplug);
    ASSERT_EQ(unplugs.size(), 2u);
    EXPECT_EQ(unplugs[1].depth, 1u);
    h.run_until_idle();
    EXPECT_EQ(h.completed, 33);
}

// blk_plug_max_rq_count(): once the plug holds requests of several queues
// the limit is 64; the flush unplugs each queue with its own depth.
TEST(PlugMergeTest, FlushesAt64RequestsWithSeveralQueues) {
    PlugHarness h;
    MemberQueue& m0 = h.add_member(member_limits(512 * kKiB));
    MemberQueue& m1 = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    for (sector_t i = 0; i < 64; i++) h.submit(i % 2 ? m1 : m0, Op::Read, i * 64, 8);
    EXPECT_TRUE(h.plug().multiple_queues);
    EXPECT_EQ(h.plug().rq_count, 64u);
    EXPECT_EQ(h.count(TraceAction::Unplug), 0u);

    h.submit(m0, Op::Read, 64 * 64, 8);
    std::vector<TraceEvent> u0 = h.events(m0, TraceAction::Unplug);
    std::vector<TraceEvent> u1 = h.events(m1, TraceAction::Unplug);
    ASSERT_EQ(u0.size(), 1u);
    ASSERT_EQ(u1.size(), 1u);
    EXPECT_EQ(u0[0].depth, 32u);
    EXPECT_EQ(u1[0].depth, 32u);
    EXPECT_LT(u0[0].sequence, u1[0].sequence);  // the queue of the oldest request first
    EXPECT_EQ(h.count(TraceAction::Issue), 64u);
    EXPECT_FALSE(h.plug().multiple_queues);

    // Back to one queue: the limit is 32 again.
    for (sector_t i = 1; i < 32; i++) h.submit(m0, Op::Read, (64 + i) * 64, 8);
    EXPECT_EQ(h.events(m0, TraceAction::Unplug).size(), 1u);
    h.submit(m0, Op::Read, 96 * 64, 8);
    u0 = h.events(m0, TraceAction::Unplug);
    ASSERT_EQ(u0.size(), 2u);
    EXPECT_EQ(u0[1].depth, 32u);
    h.finish_plug();
    h.run_until_idle();
    EXPECT_EQ(h.completed, 97);
}

// BLK_PLUG_FLUSH_SIZE: a new request flushes the plug when the newest one
// holds >= 128 KiB, also when it got there by merging.
TEST(PlugMergeTest, FlushesWhenTheLastRequestHolds128KiB) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    h.start_plug();
    h.submit(m, Op::Read, 0, sectors_of(128 * kKiB));
    EXPECT_EQ(h.count(TraceAction::Unplug), 0u);
    h.submit(m, Op::Read, 4096, 8);  // not adjacent: a new request
    std::vector<TraceEvent> unplugs = h.events(m, TraceAction::Unplug);
    ASSERT_EQ(unplugs.size(), 1u);
    EXPECT_EQ(unplugs[0].depth, 1u);
    EXPECT_EQ(h.events(m, TraceAction::Issue).at(0).bytes, 128 * kKiB);
    h.finish_plug();

    // Just below the limit nothing is flushed.
    PlugHarness below;
    MemberQueue& b = below.add_member(member_limits(512 * kKiB));
    below.start_plug();
    below.submit(b, Op::Read, 0, sectors_of(124 * kKiB));
    below.submit(b, Op::Read, 4096, 8);
    EXPECT_EQ(below.count(TraceAction::Unplug), 0u);
    EXPECT_EQ(below.plug().rq_count, 2u);
    below.finish_plug();
    EXPECT_EQ(below.events(b, TraceAction::Unplug).at(0).depth, 2u);

    // Two merged 64 KiB bios make a 128 KiB request.
    PlugHarness merged;
    MemberQueue& g = merged.add_member(member_limits(512 * kKiB));
    merged.start_plug();
    merged.submit(g, Op::Write, 0, sectors_of(64 * kKiB));
    merged.submit(g, Op::Write, sectors_of(64 * kKiB), sectors_of(64 * kKiB));
    EXPECT_EQ(merged.count(TraceAction::BackMerge), 1u);
    EXPECT_EQ(merged.count(TraceAction::Unplug), 0u);
    merged.submit(g, Op::Write, 4096, 8);
    ASSERT_EQ(merged.events(g, TraceAction::Unplug).size(), 1u);
    EXPECT_EQ(merged.events(g, TraceAction::Issue).at(0).bytes, 128 * kKiB);
    merged.finish_plug();
}

// blk_mq_get_driver_tag(): with every tag in use a request waits (I) and
// is issued when a request completes and frees its tag, in FIFO order.
TEST(PlugMergeTest, RequestsWaitForAFreeTagAndIssueOnCompletion) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB, /*queue_depth=*/2));
    for (sector_t i = 0; i < 4; i++) h.submit(m, Op::Read, i * 64, 8);
    EXPECT_EQ(h.actions(m), "QGDQGDQGIQGI");
    EXPECT_EQ(m.in_flight(), 2u);
    EXPECT_EQ(m.stats().in_flight, 4u);  // accounting counts the waiting ones

    h.run_until_idle();
    EXPECT_EQ(h.actions(m), "QGDQGDQGIQGICDCDCC");
    std::vector<TraceEvent> issues = h.events(m, TraceAction::Issue);
    ASSERT_EQ(issues.size(), 4u);
    for (sector_t i = 0; i < 4; i++) EXPECT_EQ(issues[i].sector, i * 64);
    EXPECT_EQ(m.in_flight(), 0u);
    EXPECT_EQ(h.completed, 4);
    EXPECT_EQ(m.stats().ios[0], 4u);
}

TEST(PlugMergeTest, UnplugBeyondTheQueueDepthLeavesRequestsWaiting) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB, /*queue_depth=*/2));
    h.start_plug();
    for (sector_t i = 0; i < 4; i++) h.submit(m, Op::Read, i * 64, 8);
    h.finish_plug();
    EXPECT_EQ(h.actions(m), "QGPQGQGQGUDDII");
    EXPECT_EQ(h.events(m, TraceAction::Unplug).at(0).depth, 4u);
    h.run_until_idle();
    EXPECT_EQ(h.completed, 4);
    EXPECT_EQ(h.recorder(0).issued.size(), 4u);
}

// iostat's r_await counts from request allocation (start_time_ns), so the
// time a request waits for a tag is part of it; %util counts busy time.
TEST(PlugMergeTest, AwaitCountsTheWaitForATag) {
    PlugHarness h;
    TimingModelConfig model;
    model.command_ns = 100'000;  // 100 us per request, one at a time
    model.parallelism = 1;
    auto ram = std::make_unique<RamBackend>(h.loop(), kMemberBytes);
    MemberQueue& m = h.add_member(std::make_unique<TimedBackend>(h.loop(), std::move(ram), model),
                                  member_limits(512 * kKiB, /*queue_depth=*/1));
    for (sector_t i = 0; i < 3; i++) h.submit(m, Op::Read, i * 64, 8);
    h.run_until_idle();
    EXPECT_EQ(h.completed, 3);
    EXPECT_EQ(h.clock().now_ns(), 300'000u);
    EXPECT_EQ(m.stats().ios[0], 3u);
    EXPECT_EQ(m.stats().ticks_ns[0], 100'000u + 200'000u + 300'000u);
    EXPECT_EQ(m.stats().time_in_queue_ns, 600'000u);
    EXPECT_EQ(m.stats().io_ticks_ns, 300'000u);
    EXPECT_EQ(m.stats().in_flight, 0u);
}

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
    std::vector<uint8_t> out(bytes);
    std::mt19937 rng(seed);
    for (auto& b : out) b = uint8_t(rng());
    return out;
}

// Merged requests gather bios whose buffers are not adjacent in memory: the
// request's iovec has one entry per buffer, and each byte lands at the
// sector its bio names, for back and front merges, writes and reads.
TEST(PlugMergeTest, MergedRequestsFromSeparateBuffersKeepTheData) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    // Three separate 4 KiB buffers for sectors [8,16), [16,24) and [0,8).
    std::vector<std::vector<uint8_t>> written = {pattern(4 * kKiB, 1), pattern(4 * kKiB, 2),
                                                 pattern(4 * kKiB, 3)};
    h.start_plug();
    h.submit(m, Op::Write, 8, 8, written[0].data());
    h.submit(m, Op::Write, 16, 8, written[1].data());  // back merge
    h.submit(m, Op::Write, 0, 8, written[2].data());   // front merge
    h.finish_plug();
    h.run_until_idle();
    ASSERT_EQ(h.recorder(0).issued.size(), 1u);
    EXPECT_EQ(h.recorder(0).issued[0].iovecs, 3u);
    EXPECT_EQ(h.recorder(0).issued[0].nr_sectors, 24u);

    // The device holds [2][0][1]: check it directly ...
    std::vector<uint8_t> expected;
    for (int i : {2, 0, 1}) expected.insert(expected.end(), written[i].begin(), written[i].end());
    std::vector<uint8_t> stored(12 * kKiB);
    h.recorder(0).ram().read_bytes(0, stored.data(), stored.size());
    EXPECT_EQ(stored, expected);

    // ... with one read bio ...
    std::vector<uint8_t> whole(12 * kKiB, 0);
    h.submit(m, Op::Read, 0, 24, whole.data());
    h.run_until_idle();
    EXPECT_EQ(whole, expected);

    // ... and with three merged read bios into separate buffers, in reverse.
    std::vector<std::vector<uint8_t>> pieces(3, std::vector<uint8_t>(4 * kKiB, 0));
    h.start_plug();
    h.submit(m, Op::Read, 16, 8, pieces[0].data());
    h.submit(m, Op::Read, 8, 8, pieces[1].data());
    h.submit(m, Op::Read, 0, 8, pieces[2].data());
    h.finish_plug();
    h.run_until_idle();
    ASSERT_EQ(h.recorder(0).issued.size(), 3u);
    EXPECT_EQ(h.recorder(0).issued[2].nr_bios, 3u);
    EXPECT_EQ(h.recorder(0).issued[2].iovecs, 3u);
    EXPECT_EQ(pieces[0], written[1]);
    EXPECT_EQ(pieces[1], written[0]);
    EXPECT_EQ(pieces[2], written[2]);
}

// Bios whose buffers happen to be adjacent are joined into one iovec.
TEST(PlugMergeTest, AdjacentBuffersShareOneIovec) {
    PlugHarness h;
    MemberQueue& m = h.add_member(member_limits(512 * kKiB));
    std::vector<uint8_t> data = pattern(16 * kKiB, 9);
    h.start_plug();
    for (sector_t i = 0; i < 4; i++) h.submit(m, Op::Write, i * 8, 8, data.data() + i * 4 * kKiB);
    h.finish_plug();
    h.run_until_idle();
    ASSERT_EQ(h.recorder(0).issued.size(), 1u);
    EXPECT_EQ(h.recorder(0).issued[0].iovecs, 1u);
    std::vector<uint8_t> stored(16 * kKiB);
    h.recorder(0).ram().read_bytes(0, stored.data(), stored.size());
    EXPECT_EQ(stored, data);
}

struct AlignedBuffer {
    explicit AlignedBuffer(size_t bytes) : size(bytes) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, bytes)) throw std::bad_alloc();
        data = static_cast<uint8_t*>(p);
    }
    ~AlignedBuffer() { free(data); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    uint8_t* data;
    size_t size;
};

// The whole stack (Stack::queue inside a plug, passthrough device, member
// queue, RAM): batches of adjacent writes from separate buffers merge, and
// reads of any size return exactly what was written.
TEST(PlugMergeTest, StackWritesThenReadsReturnTheWrittenBytes) {
    StackConfig config = load_stack_text(R"(
[device]
kind = "passthrough"

[[members]]
backend = "ram"
size = "8m"
max_sectors = "64k"
)",
                                         "", "plug_merge_test");
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    TaskContext task;
    task.pid = 11;

    // Eight I/Os per batch, each continuing the previous one from its own buffer.
    const uint64_t region = 2 * kMiB;
    std::mt19937 rng(5);
    std::vector<uint8_t> expected(region, 0);
    std::vector<std::unique_ptr<AlignedBuffer>> buffers;
    uint64_t offset = 0;
    while (offset < region) {
        stack.begin_batch(task);
        for (int n = 0; n < 8 && offset < region; n++) {
            uint64_t length = std::min<uint64_t>((1 + rng() % 24) * 4 * kKiB, region - offset);
            auto buf = std::make_unique<AlignedBuffer>(length);
            for (uint64_t i = 0; i < length; i++) buf->data[i] = uint8_t(rng());
            std::copy(buf->data, buf->data + length, expected.begin() + long(offset));
            stack.queue(task, Op::Write, offset, length, buf->data, buffers.size());
            buffers.push_back(std::move(buf));
            offset += length;
        }
        stack.commit(task);
        stack.reap(task, 0, 0);
    }
    stack.drain();
    ASSERT_EQ(task.completions.size(), buffers.size());
    for (const IoCompletion& c : task.completions) {
        EXPECT_EQ(c.error, 0);
        EXPECT_EQ(c.resid, 0u);
    }
    MemberQueue& member = *stack.members().at(0);
    EXPECT_GT(member.stats().merges[1], 0u);
    EXPECT_EQ(member.stats().sectors[1], region >> kSectorShift);
    task.completions.clear();

    // Read back in random-sized pieces, also inside plugs.
    AlignedBuffer readback(region);
    std::fill(readback.data, readback.data + region, uint8_t(0xee));
    offset = 0;
    while (offset < region) {
        stack.begin_batch(task);
        for (int n = 0; n < 8 && offset < region; n++) {
            uint64_t length = std::min<uint64_t>((1 + rng() % 40) * 4 * kKiB, region - offset);
            stack.queue(task, Op::Read, offset, length, readback.data + offset, offset);
            offset += length;
        }
        stack.commit(task);
        stack.reap(task, 0, 0);
    }
    stack.drain();
    for (const IoCompletion& c : task.completions) EXPECT_EQ(c.error, 0);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), readback.data));
    EXPECT_GT(member.stats().merges[0], 0u);
    EXPECT_EQ(stack.layer().bios().outstanding(), 0u);
}

}  // namespace
}  // namespace mdsplit
