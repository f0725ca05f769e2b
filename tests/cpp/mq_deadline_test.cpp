// mq-deadline (block/mq-deadline.c) on a member queue: insert merges
// (elv_attempt_insert_merge), bio merges into queued requests (elv_merge,
// attempt_back_merge/attempt_front_merge), dispatch in sector order from
// latest_pos with a restart at the FIFO head (__dd_dispatch_request), the
// expired-deadline pick, and the run at unplug (blk_mq_dispatch_list).
#include <gtest/gtest.h>

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

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kMemberBytes = 64 * kMiB;

uint32_t sectors_of(uint64_t bytes) { return uint32_t(bytes >> kSectorShift); }

// Forwards to a RamBackend and records what each issued request looked like.
class RecordingBackend final : public Backend {
public:
    struct Issued {
        Op op;
        sector_t sector;
        uint32_t nr_sectors;
        uint32_t nr_bios;
        size_t iovecs;
    };
    RecordingBackend(EventLoop& loop, uint64_t size)
        : ram_(std::make_unique<RamBackend>(loop, size)) {
        ram_->set_completion(&RecordingBackend::forward, this);
    }
    void submit(Request* rq) override {
        issued.push_back(Issued{rq->op, rq->sector, rq->nr_sectors, rq->nr_bios, rq->iov.size()});
        ram_->submit(rq);
    }
    uint64_t size_bytes() const override { return ram_->size_bytes(); }
    const char* kind() const override { return "recording"; }
    RamBackend& ram() { return *ram_; }
    std::vector<Issued> issued;

private:
    static void forward(void* ctx, Request* rq, int64_t res) {
        static_cast<RecordingBackend*>(ctx)->complete(rq, res);
    }
    std::unique_ptr<RamBackend> ram_;
};

MemberQueueLimits member_limits(uint64_t max_bytes, uint32_t queue_depth = 64) {
    MemberQueueLimits limits;
    limits.max_sectors = sectors_of(max_bytes);
    limits.queue_depth = queue_depth;
    return limits;
}

// A block layer with members and one submitting task whose plug is open.
class PlugHarness {
public:
    PlugHarness() : loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, SplitInsert::Head) {
        tracer_.add_global_sink(&recorder_);
        task_.pid = 7;
        layer_.set_current(&task_);
    }
    ~PlugHarness() { layer_.set_current(nullptr); }

    MemberQueue& add_member(const MemberQueueLimits& limits) {
        auto backend = std::make_unique<RecordingBackend>(loop_, kMemberBytes);
        recorders_.push_back(backend.get());
        return add_member(std::move(backend), limits);
    }
    MemberQueue& add_member(std::unique_ptr<Backend> backend, const MemberQueueLimits& limits) {
        size_t i = members_.size();
        members_.push_back(std::make_unique<MemberQueue>(layer_, "m" + std::to_string(i),
                                                         make_devt(8, uint32_t(16 * i)),
                                                         std::move(backend), limits));
        return *members_.back();
    }
    RecordingBackend& recorder(size_t i) { return *recorders_.at(i); }

    void start_plug() { layer_.start_plug(task_); }
    void finish_plug() { layer_.finish_plug(task_); }
    PlugList& plug() { return task_.plug; }

    // submit_bio() of one bio from the task; it completes into `completed`.
    void submit(MemberQueue& dev, Op op, sector_t sector, uint32_t nr_sectors,
                uint8_t* data = nullptr) {
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->flags = kBioSync;
        bio->sector = sector;
        bio->nr_sectors = nr_sectors;
        bio->dev = &dev;
        bio->data = data;
        bio->pid = task_.pid;
        bio->end_io = &PlugHarness::bio_done;
        bio->private_data = this;
        submitted++;
        layer_.submit_bio_noacct(bio);
    }

    void run_until_idle() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }

    // The blktrace letters of one device's events, in order.
    std::string actions(const MemberQueue& dev) const {
        std::string out;
        for (const TraceEvent& e : recorder_.events)
            if (e.device == dev.devt()) out += char(e.action);
        return out;
    }
    std::vector<TraceEvent> events(const MemberQueue& dev, TraceAction action) const {
        std::vector<TraceEvent> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.device == dev.devt() && e.action == action) out.push_back(e);
        return out;
    }
    size_t count(TraceAction action) const {
        size_t n = 0;
        for (const TraceEvent& e : recorder_.events) n += e.action == action;
        return n;
    }

    EventLoop& loop() { return loop_; }
    VirtualClock& clock() { return clock_; }
    BlockLayer& layer() { return layer_; }
    int submitted = 0;
    int completed = 0;

private:
    static void bio_done(Bio* bio) {
        static_cast<PlugHarness*>(bio->private_data)->completed++;
        bio->pool->put(bio);
    }

    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    TraceRecorder recorder_;
    BlockLayer layer_;
    TaskContext task_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
    std::vector<RecordingBackend*> recorders_;
};

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
