// mq-deadline (block/mq-deadline.c) on a member queue: insert merges
// (elv_attempt_insert_merge), bio merges into queued requests (elv_merge,
// attempt_back_merge/attempt_front_merge), dispatch in sector order from
// latest_pos with a restart at the FIFO head (__dd_dispatch_request), the
// expired-deadline pick, and the run at unplug (blk_mq_dispatch_list).
#include <gtest/gtest.h>

#include "member_queue_rig.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/block/mq_deadline.h"
#include "core/drivers/backend.h"
#include "core/drivers/ram_backend.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"

namespace mdsplit {
namespace {

constexpr uint32_t k64k = 128;  // sectors

// A member with mq-deadline whose device holds at most `depth` requests.
MemberQueue& deadline_member(PlugHarness& h, uint32_t depth = 64) {
    MemberQueue& m = h.add_member(member_limits(512 * kKiB, depth));
    m.set_scheduler(std::make_unique<MqDeadlineScheduler>(h.loop()));
    return m;
}

std::vector<std::pair<sector_t, uint32_t>> issued(RecordingBackend& r) {
    std::vector<std::pair<sector_t, uint32_t>> out;
    for (const auto& i : r.issued) out.emplace_back(i.sector, i.nr_sectors);
    return out;
}

using Issued = std::vector<std::pair<sector_t, uint32_t>>;

// A plug batch of chunks 2, 0, 1 (1 back-merges into 0 in the plug) is
// inserted as [2], [0, 2) and dispatched in sector order: [0, 2), then [2].
TEST(MqDeadlineTest, DispatchesAPlugBatchInSectorOrder) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.start_plug();
    h.submit(m, Op::Read, 2 * k64k, k64k);
    h.submit(m, Op::Read, 0, k64k);
    h.submit(m, Op::Read, k64k, k64k);
    h.finish_plug();
    EXPECT_EQ(issued(h.recorder(0)), (Issued{{0, 2 * k64k}, {2 * k64k, k64k}}));
}

// elv_attempt_insert_merge(): a request entering the scheduler joins the
// back of a queued request ending where it starts, and counts one merge.
TEST(MqDeadlineTest, InsertMergesOntoTheBackOfAQueuedRequest) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.start_plug();
    h.submit(m, Op::Read, 0, k64k);
    h.submit(m, Op::Read, 4 * k64k, k64k);
    h.submit(m, Op::Read, k64k, k64k);  // the plug tries only its tail [4]: a new request
    h.finish_plug();
    EXPECT_EQ(issued(h.recorder(0)), (Issued{{0, 2 * k64k}, {4 * k64k, k64k}}));
    EXPECT_EQ(m.stats().merges[0], 1u);
    EXPECT_EQ(static_cast<MqDeadlineScheduler*>(m.scheduler())->insert_merges(), 1u);
}

// "The merged request could be merged with others, try again": a plug of
// chunks 2, 0, 1, 3 inserts [2], [0, 2), [3]; [3] joins [2], and [2, 4)
// then joins [0, 2), which ends at its start: one request, three merges.
TEST(MqDeadlineTest, InsertMergeChainsBackwards) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.start_plug();
    h.submit(m, Op::Read, 2 * k64k, k64k);
    h.submit(m, Op::Read, 0, k64k);
    h.submit(m, Op::Read, k64k, k64k);      // plug back merge: [0, 2)
    h.submit(m, Op::Read, 3 * k64k, k64k);  // the plug's tail is [0, 2): a new request
    h.finish_plug();
    h.run_until_idle();
    EXPECT_EQ(issued(h.recorder(0)), (Issued{{0, 4 * k64k}}));
    EXPECT_EQ(m.stats().merges[0], 3u);
    EXPECT_EQ(m.stats().ios[0], 1u);
    EXPECT_EQ(h.completed, 4);
}

// elv_merge() front merge (dd_request_merge): a bio ending where a queued
// request starts joins its front.
TEST(MqDeadlineTest, BioFrontMergesIntoAQueuedRequest) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.submit(m, Op::Read, 2 * k64k, k64k);  // unplugged: queued until the loop runs the queue
    h.submit(m, Op::Read, k64k, k64k);
    h.run_until_idle();
    EXPECT_EQ(issued(h.recorder(0)), (Issued{{k64k, 2 * k64k}}));
    EXPECT_EQ(m.stats().merges[0], 1u);
}

// A bio back merge, then attempt_back_merge(): the grown request touches
// the next queued one in sort order and the two become one request.
TEST(MqDeadlineTest, BioBackMergeJoinsTheNextQueuedRequest) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.submit(m, Op::Read, 0, k64k);
    h.submit(m, Op::Read, 2 * k64k, k64k);
    h.submit(m, Op::Read, k64k, k64k);
    h.run_until_idle();
    EXPECT_EQ(issued(h.recorder(0)), (Issued{{0, 3 * k64k}}));
    EXPECT_EQ(m.stats().merges[0], 2u);
    EXPECT_EQ(h.completed, 3);
}

// latest_pos: with nothing queued at or above the last dispatched start,
// dispatch restarts at the FIFO head (the oldest request), then climbs.
TEST(MqDeadlineTest, RestartsFromTheOldestRequestBelowLatestPos) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.start_plug();
    h.submit(m, Op::Read, 20 * k64k, k64k);
    h.finish_plug();  // latest_pos = chunk 20
    h.start_plug();
    h.submit(m, Op::Read, 6 * k64k, k64k);
    h.submit(m, Op::Read, 2 * k64k, k64k);
    h.submit(m, Op::Read, 9 * k64k, k64k);
    h.finish_plug();
    EXPECT_EQ(issued(h.recorder(0)),
              (Issued{{20 * k64k, k64k}, {6 * k64k, k64k}, {9 * k64k, k64k}, {2 * k64k, k64k}}));
}

// A plug flush runs the queue at once (blk_mq_dispatch_list with
// from_schedule = false): the batch is issued before the submitter goes on.
TEST(MqDeadlineTest, PlugFlushIssuesTheBatchAtOnce) {
    PlugHarness h;
    MemberQueue& m = deadline_member(h);
    h.start_plug();
    h.submit(m, Op::Read, 0, k64k);
    h.finish_plug();
    EXPECT_EQ(h.recorder(0).issued.size(), 1u);
}

// deadline_check_fifo(): when a batch ends (fifo_batch = 1 here) and the
// oldest read's 500 ms deadline has passed, it goes before the request
// above latest_pos.
TEST(MqDeadlineTest, ExpiredDeadlinePicksTheOldestRequest) {
    VirtualClock clock;
    EventLoop loop(clock);
    MqDeadlineScheduler::Options options;
    options.fifo_batch = 1;
    MqDeadlineScheduler dd(loop, options);
    Request a, b, c;
    for (Request* r : {&a, &b, &c}) r->nr_sectors = 8;
    a.sector = 100;
    b.sector = 10;
    c.sector = 200;
    dd.insert(&a, nullptr);
    EXPECT_EQ(dd.dispatch(), &a);  // latest_pos = 100
    dd.insert(&b, nullptr);
    clock.advance_to(600'000'000);
    dd.insert(&c, nullptr);
    EXPECT_EQ(dd.dispatch(), &b);
    EXPECT_EQ(dd.dispatch(), &c);
    EXPECT_FALSE(dd.has_work());
}

// Without an expired deadline the same queue continues upwards from latest_pos.
TEST(MqDeadlineTest, UnexpiredQueueContinuesAboveLatestPos) {
    VirtualClock clock;
    EventLoop loop(clock);
    MqDeadlineScheduler::Options options;
    options.fifo_batch = 1;
    MqDeadlineScheduler dd(loop, options);
    Request a, b, c;
    for (Request* r : {&a, &b, &c}) r->nr_sectors = 8;
    a.sector = 100;
    b.sector = 10;
    c.sector = 200;
    dd.insert(&a, nullptr);
    EXPECT_EQ(dd.dispatch(), &a);
    dd.insert(&b, nullptr);
    dd.insert(&c, nullptr);
    EXPECT_EQ(dd.dispatch(), &c);
    EXPECT_EQ(dd.dispatch(), &b);
}

}  // namespace
}  // namespace mdsplit
