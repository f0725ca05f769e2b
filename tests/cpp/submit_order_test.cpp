// The order in which a stacked device's split pieces reach its members
// (block/blk-core.c __submit_bio_noacct with current->bio_list, and the
// split-remainder insertion of "block: fix disordered IO in the case
// recursive split"), splitting at a member's own max_sectors
// (__bio_split_to_limits / bio_submit_split with REQ_NOMERGE fronts) and
// chained completion (bio_chain / bio_endio).
//
// The stacked device here is a test-only md look-alike: like md_submit_bio()
// it first splits a bio to its own max_sectors, then like
// chunk_aligned_read() it splits at the chunk boundary, and like
// raid5_read_one_chunk() it remaps the piece to a member with a clone and
// submit_bio_noacct(). Members are real MemberQueues over RamBackends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/bio_pool.h"
#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/ram_backend.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint32_t kMdDevt = make_devt(9, 0);
constexpr uint64_t kMemberBytes = 64 * kMiB;

uint32_t sectors_of(uint64_t bytes) { return uint32_t(bytes >> kSectorShift); }

// A chunk-striped bio-based device (RAID0-like placement; the read path of
// md RAID5 has the same split/remap structure).
class ChunkStripedDevice final : public BlockDevice {
public:
    ChunkStripedDevice(BlockLayer& layer, std::vector<MemberQueue*> members, uint32_t max_sectors,
                       uint32_t chunk_sectors)
        : BlockDevice("md0", kMdDevt),
          layer_(layer),
          members_(std::move(members)),
          chunk_sectors_(chunk_sectors) {
        max_sectors_ = max_sectors;
        capacity_ = members_.front()->capacity() * members_.size();
    }

    bool stacked() const override { return true; }

    // md_submit_bio() -> raid5_make_request() -> chunk_aligned_read()
    void submit_bio(Bio* bio) override {
        // bio_split_to_limits(): md's own max_sectors, counted from the bio start.
        if (bio->nr_sectors > max_sectors_) bio = layer_.split_and_resubmit(bio, max_sectors_);
        // chunk_aligned_read(): split at chunk - (sector % chunk).
        uint32_t to_boundary = chunk_sectors_ - uint32_t(bio->sector % chunk_sectors_);
        if (bio->nr_sectors > to_boundary) bio = layer_.split_and_resubmit(bio, to_boundary);
        remap_to_member(bio);
    }

    // Which member and where a virtual sector lives.
    std::pair<size_t, sector_t> locate(sector_t sector) const {
        sector_t chunk = sector / chunk_sectors_;
        size_t member = size_t(chunk % members_.size());
        sector_t member_sector = chunk / members_.size() * chunk_sectors_ + sector % chunk_sectors_;
        return {member, member_sector};
    }

private:
    // raid5_read_one_chunk(): bio_alloc_clone(), trace A, submit_bio_noacct();
    // the piece completes when its clone does.
    void remap_to_member(Bio* piece) {
        auto [index, member_sector] = locate(piece->sector);
        Bio* clone = layer_.bios().clone(piece);
        clone->dev = members_[index];
        clone->sector = member_sector;
        if (layer_.tracer().enabled()) {
            TraceEvent e;
            e.device = clone->dev->devt();
            e.action = TraceAction::Remap;
            e.op = clone->op;
            e.sector = clone->sector;
            e.bytes = uint32_t(clone->bytes());
            e.pid = clone->pid;
            e.from_device = devt_;
            e.from_sector = piece->sector;
            layer_.tracer().emit(e);
        }
        layer_.submit_bio_noacct(clone);
        bio_endio(piece);  // drop the piece's own reference: the clone holds it now
    }

    BlockLayer& layer_;
    std::vector<MemberQueue*> members_;
    uint32_t chunk_sectors_;
};

// A bio-based device that splits to its own max_sectors and then moves the
// bio itself to a member (bio_set_dev + submit_bio_noacct, as dm-linear or
// md RAID0 do), so a split front reaches the member with REQ_NOMERGE.
class RetargetingDevice final : public BlockDevice {
public:
    RetargetingDevice(BlockLayer& layer, MemberQueue& member, uint32_t max_sectors)
        : BlockDevice("dm0", make_devt(253, 0)), layer_(layer), member_(member) {
        max_sectors_ = max_sectors;
        capacity_ = member.capacity();
    }
    bool stacked() const override { return true; }
    void submit_bio(Bio* bio) override {
        if (bio->nr_sectors > max_sectors_) bio = layer_.split_and_resubmit(bio, max_sectors_);
        bio->dev = &member_;
        layer_.submit_bio_noacct(bio);
    }

private:
    BlockLayer& layer_;
    MemberQueue& member_;
};

// The pieces of one emulated kernel: virtual clock, loop, tracer with a
// recorder of every event, block layer, members over RAM.
class StackHarness {
public:
    StackHarness(SplitInsert insert, size_t member_count, const MemberQueueLimits& limits)
        : loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, insert) {
        tracer_.add_global_sink(&recorder_);
        for (size_t i = 0; i < member_count; i++)
            add_member(std::make_unique<RamBackend>(loop_, kMemberBytes), limits);
    }

    MemberQueue& add_member(std::unique_ptr<Backend> backend, const MemberQueueLimits& limits) {
        size_t i = members_.size();
        members_.push_back(std::make_unique<MemberQueue>(layer_, "m" + std::to_string(i),
                                                         make_devt(8, uint32_t(16 * i)),
                                                         std::move(backend), limits));
        return *members_.back();
    }

    BlockLayer& layer() { return layer_; }
    EventLoop& loop() { return loop_; }
    MemberQueue& member(size_t i) { return *members_.at(i); }
    std::vector<MemberQueue*> member_pointers() {
        std::vector<MemberQueue*> out;
        for (auto& m : members_) out.push_back(m.get());
        return out;
    }
    const std::vector<TraceEvent>& events() const { return recorder_.events; }

    bool is_member(uint32_t devt) const {
        for (auto& m : members_)
            if (m->devt() == devt) return true;
        return false;
    }

    std::vector<TraceEvent> events_where(TraceAction action, uint32_t devt) const {
        std::vector<TraceEvent> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.action == action && e.device == devt) out.push_back(e);
        return out;
    }
    std::vector<TraceEvent> member_events(TraceAction action) const {
        std::vector<TraceEvent> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.action == action && is_member(e.device)) out.push_back(e);
        return out;
    }

    // Virtual-device byte offsets of the member events of one action, in
    // trace order; the remap (A) events say where each member piece came from.
    std::vector<uint64_t> member_arrivals(TraceAction action) const {
        std::map<std::pair<uint32_t, sector_t>, sector_t> origin;
        for (const TraceEvent& e : recorder_.events)
            if (e.action == TraceAction::Remap) origin[{e.device, e.sector}] = e.from_sector;
        std::vector<uint64_t> out;
        for (const TraceEvent& e : member_events(action)) {
            auto it = origin.find({e.device, e.sector});
            out.push_back(it == origin.end() ? ~uint64_t(0) : it->second << kSectorShift);
        }
        return out;
    }

    void run_until_idle() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }

private:
    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    TraceRecorder recorder_;
    BlockLayer layer_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
};

// Completion of a top-level bio: how often, and how many member requests
// had completed (C on a member) when it did.
struct TopCompletion {
    const StackHarness* harness = nullptr;
    int times = 0;
    size_t member_completions_seen = 0;
    int32_t error = 0;
};

void top_bio_done(Bio* bio) {
    auto* done = static_cast<TopCompletion*>(bio->private_data);
    done->times++;
    done->member_completions_seen = done->harness->member_events(TraceAction::Complete).size();
    done->error = bio->error;
    bio->pool->put(bio);
}

Bio* make_top_bio(BlockLayer& layer, BlockDevice& dev, Op op, uint64_t offset, uint64_t length,
                  uint8_t* data, TopCompletion* done) {
    Bio* bio = layer.bios().alloc();
    bio->op = op;
    bio->flags = kBioSync;
    bio->sector = offset >> kSectorShift;
    bio->nr_sectors = sectors_of(length);
    bio->dev = &dev;
    bio->data = data;
    bio->pid = 42;
    bio->end_io = &top_bio_done;
    bio->private_data = done;
    return bio;
}

MemberQueueLimits member_limits(uint64_t max_bytes, uint32_t queue_depth = 64) {
    MemberQueueLimits limits;
    limits.max_sectors = sectors_of(max_bytes);
    limits.queue_depth = queue_depth;
    return limits;
}

struct OrderRun {
    std::vector<uint64_t> queued;   // member Q events
    std::vector<uint64_t> arrived;  // member G events: order of member submit_bio calls
    std::vector<uint64_t> issued;   // member D events
    std::vector<TraceEvent> md_splits;
    TopCompletion completion;
    size_t bios_outstanding = 0;
    size_t requests_outstanding = 0;
};

// The ARCHITECTURE.md example: a 2 MiB read at offset 0 on a device with
// max_sectors 1 MiB and 512 KiB chunks.
OrderRun run_two_mib_read(SplitInsert insert, size_t member_count) {
    StackHarness h(insert, member_count, member_limits(512 * kKiB));
    ChunkStripedDevice md(h.layer(), h.member_pointers(), sectors_of(1 * kMiB),
                          sectors_of(512 * kKiB));
    std::vector<uint8_t> buffer(2 * kMiB);
    OrderRun run;
    run.completion.harness = &h;
    h.layer().submit_bio_noacct(
        make_top_bio(h.layer(), md, Op::Read, 0, 2 * kMiB, buffer.data(), &run.completion));
    h.run_until_idle();
    run.queued = h.member_arrivals(TraceAction::Queue);
    run.arrived = h.member_arrivals(TraceAction::GetRq);
    run.issued = h.member_arrivals(TraceAction::Issue);
    run.md_splits = h.events_where(TraceAction::Split, kMdDevt);
    run.bios_outstanding = h.layer().bios().outstanding();
    run.requests_outstanding = h.layer().requests().outstanding();
    return run;
}

const std::vector<uint64_t> kLegacyOrder = {0, 1 * kMiB, 1536 * kKiB, 512 * kKiB};
const std::vector<uint64_t> kFixedOrder = {0, 512 * kKiB, 1 * kMiB, 1536 * kKiB};

// Before the fix the remainder of md's max_sectors split and the remainder
// of the chunk split both go to the tail of current->bio_list[0]; the
// two-list loop then gives 0 -> 1M -> 1536K -> 512K. (The seed thread's prose
// describes a single FIFO and says 0 -> 1M -> 512K -> 1536K; the code gives
// this order, see ARCHITECTURE.md.)
TEST(SubmitOrderTest, LegacyTailInsertOneMember) {
    OrderRun run = run_two_mib_read(SplitInsert::Tail, 1);
    EXPECT_EQ(run.queued, kLegacyOrder);
    EXPECT_EQ(run.arrived, kLegacyOrder);
    EXPECT_EQ(run.issued, kLegacyOrder);
}

// After the fix split remainders go to the head: pieces arrive in order.
TEST(SubmitOrderTest, FixedHeadInsertOneMember) {
    OrderRun run = run_two_mib_read(SplitInsert::Head, 1);
    EXPECT_EQ(run.queued, kFixedOrder);
    EXPECT_EQ(run.arrived, kFixedOrder);
    EXPECT_EQ(run.issued, kFixedOrder);
}

// The order is the same across members: the global trace sequence orders
// the events of different member devices.
TEST(SubmitOrderTest, LegacyTailInsertStripedOverThreeMembers) {
    OrderRun run = run_two_mib_read(SplitInsert::Tail, 3);
    EXPECT_EQ(run.queued, kLegacyOrder);
    EXPECT_EQ(run.arrived, kLegacyOrder);
}

TEST(SubmitOrderTest, FixedHeadInsertStripedOverThreeMembers) {
    OrderRun run = run_two_mib_read(SplitInsert::Head, 3);
    EXPECT_EQ(run.queued, kFixedOrder);
    EXPECT_EQ(run.arrived, kFixedOrder);
}

// trace_block_split(): md traces X for its max_sectors split and for each
// chunk split, with the remainder's start as the new sector; the split
// order does not change which splits happen, only when.
TEST(SubmitOrderTest, StackedSplitsAreTracedOnTheStackedDevice) {
    using Split = std::tuple<sector_t, uint32_t, sector_t>;  // front sector, bytes, new sector
    const std::vector<Split> expected = {
        {0, 512 * kKiB, sectors_of(512 * kKiB)},
        {0, 1 * kMiB, sectors_of(1 * kMiB)},
        {sectors_of(1 * kMiB), 512 * kKiB, sectors_of(1536 * kKiB)},
    };
    for (SplitInsert insert : {SplitInsert::Tail, SplitInsert::Head}) {
        OrderRun run = run_two_mib_read(insert, 1);
        std::vector<Split> splits;
        for (const TraceEvent& e : run.md_splits)
            splits.emplace_back(e.sector, e.bytes, e.new_sector);
        ASSERT_EQ(splits.size(), 3u);
        // md's own limit first, counted from the bio start.
        EXPECT_EQ(splits.front(), (Split{0, 1 * kMiB, sectors_of(1 * kMiB)}));
        std::sort(splits.begin(), splits.end());
        EXPECT_EQ(splits, expected);
    }
}

// bio_chain() / bio_endio(): the 2 MiB bio completes exactly once, after
// its four member requests, and every split and clone goes back to the pool.
TEST(SubmitOrderTest, ChainedCompletionCompletesTheParentOnceAfterAllPieces) {
    for (SplitInsert insert : {SplitInsert::Tail, SplitInsert::Head}) {
        OrderRun run = run_two_mib_read(insert, 3);
        EXPECT_EQ(run.completion.times, 1);
        EXPECT_EQ(run.completion.member_completions_seen, 4u);
        EXPECT_EQ(run.completion.error, 0);
        EXPECT_EQ(run.bios_outstanding, 0u);
        EXPECT_EQ(run.requests_outstanding, 0u);
    }
}

// The data of each piece lands where the layout says, through the clones.
TEST(SubmitOrderTest, StripedReadReturnsEachMembersChunk) {
    StackHarness h(SplitInsert::Head, 3, member_limits(512 * kKiB));
    ChunkStripedDevice md(h.layer(), h.member_pointers(), sectors_of(1 * kMiB),
                          sectors_of(512 * kKiB));
    // Each 512 KiB of each member holds its own byte: 0x10 * (member + 1) + piece.
    auto byte_at = [](size_t member, sector_t member_sector) {
        return uint8_t(0x10 * (member + 1) + member_sector / sectors_of(512 * kKiB));
    };
    for (size_t i = 0; i < 3; i++) {
        auto& ram = static_cast<RamBackend&>(h.member(i).backend());
        for (sector_t piece = 0; piece < 4; piece++) {
            sector_t member_sector = piece * sectors_of(512 * kKiB);
            std::vector<uint8_t> fill(512 * kKiB, byte_at(i, member_sector));
            ram.write_bytes(member_sector << kSectorShift, fill.data(), fill.size());
        }
    }
    std::vector<uint8_t> buffer(2 * kMiB, 0);
    TopCompletion done;
    done.harness = &h;
    h.layer().submit_bio_noacct(
        make_top_bio(h.layer(), md, Op::Read, 0, 2 * kMiB, buffer.data(), &done));
    h.run_until_idle();
    ASSERT_EQ(done.times, 1);
    for (uint64_t chunk = 0; chunk < 4; chunk++) {
        auto [member, member_sector] = md.locate(sectors_of(chunk * 512 * kKiB));
        uint8_t expected = byte_at(member, member_sector);
        uint64_t begin = chunk * 512 * kKiB;
        auto first = buffer.begin() + long(begin);
        EXPECT_TRUE(
            std::all_of(first, first + long(512 * kKiB), [&](uint8_t b) { return b == expected; }))
            << "chunk " << chunk << " from member " << member;
    }
}

// blk_mq_submit_bio() -> __bio_split_to_limits(): a bio larger than the
// member's max_sectors is cut into max_sectors fronts (X on the member, each
// front REQ_NOMERGE) and a remainder; nothing merges with the fronts, and
// the parent completes once after all pieces.
TEST(SubmitOrderTest, MemberSplitsToMaxSectorsWithNoMergeFronts) {
    StackHarness h(SplitInsert::Head, 1, member_limits(8 * kKiB));  // 16 sectors
    MemberQueue& member = h.member(0);
    TaskContext task;
    task.pid = 42;
    h.layer().set_current(&task);
    h.layer().start_plug(task);

    std::vector<uint8_t> buffer(20 * kKiB);
    TopCompletion done;
    done.harness = &h;
    h.layer().submit_bio_noacct(
        make_top_bio(h.layer(), member, Op::Read, 0, 20 * kKiB, buffer.data(), &done));

    std::vector<TraceEvent> splits = h.events_where(TraceAction::Split, member.devt());
    ASSERT_EQ(splits.size(), 2u);
    EXPECT_EQ(splits[0].sector, 0u);
    EXPECT_EQ(splits[0].bytes, 8 * kKiB);
    EXPECT_EQ(splits[0].new_sector, 16u);
    EXPECT_EQ(splits[1].sector, 16u);
    EXPECT_EQ(splits[1].bytes, 8 * kKiB);
    EXPECT_EQ(splits[1].new_sector, 32u);

    // Three requests in the plug; none took a bio by merging.
    std::vector<TraceEvent> getrq = h.events_where(TraceAction::GetRq, member.devt());
    ASSERT_EQ(getrq.size(), 3u);
    EXPECT_EQ(getrq[0].sector, 0u);
    EXPECT_EQ(getrq[1].sector, 16u);
    EXPECT_EQ(getrq[2].sector, 32u);
    EXPECT_EQ(getrq[2].bytes, 4 * kKiB);
    ASSERT_NE(task.plug.head, nullptr);
    EXPECT_FALSE(task.plug.head->mergeable());        // front [0, 16)
    EXPECT_FALSE(task.plug.head->next->mergeable());  // front [16, 32)
    EXPECT_TRUE(task.plug.tail->mergeable());         // the remainder
    EXPECT_TRUE(h.events_where(TraceAction::BackMerge, member.devt()).empty());
    EXPECT_TRUE(h.events_where(TraceAction::FrontMerge, member.devt()).empty());
    EXPECT_EQ(member.stats().merges[0], 0u);

    h.layer().finish_plug(task);
    std::vector<TraceEvent> unplugs = h.events_where(TraceAction::Unplug, member.devt());
    ASSERT_EQ(unplugs.size(), 1u);
    EXPECT_EQ(unplugs[0].depth, 3u);
    EXPECT_EQ(done.times, 0);

    h.run_until_idle();
    EXPECT_EQ(done.times, 1);
    EXPECT_EQ(done.member_completions_seen, 3u);
    EXPECT_EQ(member.stats().ios[0], 3u);
    EXPECT_EQ(member.stats().sectors[0], 40u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
    EXPECT_EQ(h.layer().requests().outstanding(), 0u);
    h.layer().set_current(nullptr);
}

// A split front that reaches a member keeps REQ_NOMERGE: the remainder
// cannot back-merge into its request even though the size limit would allow
// it, while a later adjacent bio does merge into the remainder's request.
TEST(SubmitOrderTest, SplitFrontRequestIsNotMergedInto) {
    StackHarness h(SplitInsert::Head, 1, member_limits(512 * kKiB));
    MemberQueue& member = h.member(0);
    RetargetingDevice dm(h.layer(), member, 8);  // 4 KiB bios at most
    TaskContext task;
    h.layer().set_current(&task);
    h.layer().start_plug(task);

    std::vector<uint8_t> buffer(12 * kKiB);
    TopCompletion first, second;
    first.harness = second.harness = &h;
    h.layer().submit_bio_noacct(
        make_top_bio(h.layer(), dm, Op::Write, 0, 8 * kKiB, buffer.data(), &first));
    EXPECT_EQ(h.events_where(TraceAction::Split, dm.devt()).size(), 1u);
    EXPECT_EQ(h.events_where(TraceAction::GetRq, member.devt()).size(), 2u);
    EXPECT_TRUE(h.events_where(TraceAction::BackMerge, member.devt()).empty());

    h.layer().submit_bio_noacct(make_top_bio(h.layer(), dm, Op::Write, 8 * kKiB, 4 * kKiB,
                                             buffer.data() + 8 * kKiB, &second));
    std::vector<TraceEvent> merges = h.events_where(TraceAction::BackMerge, member.devt());
    ASSERT_EQ(merges.size(), 1u);
    EXPECT_EQ(merges[0].sector, 16u);
    EXPECT_EQ(h.events_where(TraceAction::GetRq, member.devt()).size(), 2u);
    EXPECT_EQ(member.stats().merges[1], 1u);

    h.layer().finish_plug(task);
    std::vector<TraceEvent> issues = h.events_where(TraceAction::Issue, member.devt());
    ASSERT_EQ(issues.size(), 2u);
    EXPECT_EQ(issues[0].sector, 0u);
    EXPECT_EQ(issues[0].bytes, 4 * kKiB);
    EXPECT_EQ(issues[1].sector, 8u);
    EXPECT_EQ(issues[1].bytes, 8 * kKiB);
    h.run_until_idle();
    EXPECT_EQ(first.times, 1);
    EXPECT_EQ(second.times, 1);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
    h.layer().set_current(nullptr);
}

// Errors travel up the chain: the first error of any piece is the parent's.
class FailingBackend final : public Backend {
public:
    FailingBackend(EventLoop& loop, uint64_t size, sector_t bad_sector)
        : loop_(loop), size_(size), bad_sector_(bad_sector) {}
    void submit(Request* rq) override {
        rq->ring_owner = this;
        rq->result = rq->sector == bad_sector_ ? -EIO : int64_t(rq->bytes());
        loop_.defer(&FailingBackend::finish, rq);
    }
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "failing"; }

private:
    static void finish(void* arg, uint64_t) {
        auto* rq = static_cast<Request*>(arg);
        static_cast<FailingBackend*>(rq->ring_owner)->complete(rq, rq->result);
    }
    EventLoop& loop_;
    uint64_t size_;
    sector_t bad_sector_;
};

TEST(SubmitOrderTest, ChainedCompletionCarriesAPiecesError) {
    StackHarness h(SplitInsert::Head, 0, member_limits(8 * kKiB));
    MemberQueue& member = h.add_member(std::make_unique<FailingBackend>(h.loop(), kMemberBytes, 16),
                                       member_limits(8 * kKiB));
    TopCompletion done;
    done.harness = &h;
    std::vector<uint8_t> buffer(24 * kKiB);
    h.layer().submit_bio_noacct(
        make_top_bio(h.layer(), member, Op::Read, 0, 24 * kKiB, buffer.data(), &done));
    h.run_until_idle();
    EXPECT_EQ(done.times, 1);
    EXPECT_EQ(done.member_completions_seen, 3u);
    EXPECT_EQ(done.error, -EIO);
    EXPECT_EQ(member.stats().errors[0], 1u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
}

}  // namespace
}  // namespace mdsplit
