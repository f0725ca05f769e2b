// md RAID5: the layouts of raid5_compute_sector(), the read path of
// md_submit_bio() -> chunk_aligned_read() -> raid5_read_one_chunk() with the
// recursive split order of seeds 000/002, the stripe-cache write path
// (full-stripe, read-modify-write, reconstruct-write), degraded reads and
// writes, and member errors. Members are MemberQueues over RAM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/ram_backend.h"
#include "core/md/raid5_device.h"
#include "core/md/raid5_layout.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"
#include "stack/stack.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint32_t kMdDevt = make_devt(9, 0);

uint32_t sectors_of(uint64_t bytes) { return uint32_t(bytes >> kSectorShift); }

const Raid5Layout kLayouts[] = {Raid5Layout::LeftAsymmetric, Raid5Layout::RightAsymmetric,
                                Raid5Layout::LeftSymmetric, Raid5Layout::RightSymmetric};

// ---------------------------------------------------------------- layouts

// The tables of mdadm(8) / md(4) for 4 disks: which chunk (D<n>) or parity
// (-1) each disk holds in chunk-stripes 0..3.
using Table = std::vector<std::vector<int>>;
const std::map<Raid5Layout, Table> kMdTables = {
    {Raid5Layout::LeftAsymmetric, {{0, 1, 2, -1}, {3, 4, -1, 5}, {6, -1, 7, 8}, {-1, 9, 10, 11}}},
    {Raid5Layout::RightAsymmetric, {{-1, 0, 1, 2}, {3, -1, 4, 5}, {6, 7, -1, 8}, {9, 10, 11, -1}}},
    {Raid5Layout::LeftSymmetric, {{0, 1, 2, -1}, {4, 5, -1, 3}, {8, -1, 6, 7}, {-1, 9, 10, 11}}},
    {Raid5Layout::RightSymmetric, {{-1, 0, 1, 2}, {5, -1, 3, 4}, {7, 8, -1, 6}, {9, 10, 11, -1}}},
};

TEST(Raid5LayoutTest, FourDiskLayoutsMatchMdTables) {
    const uint32_t cs = sectors_of(64 * kKiB);
    for (auto& [layout, table] : kMdTables) {
        Raid5Geometry g(4, cs, layout);
        for (uint32_t stripe = 0; stripe < 4; stripe++) {
            for (uint32_t disk = 0; disk < 4; disk++) {
                int chunk = table[stripe][disk];
                sector_t member_sector = stripe * cs + 5;
                if (chunk < 0) {
                    EXPECT_EQ(g.parity_disk(stripe), disk) << int(layout) << " stripe " << stripe;
                    EXPECT_EQ(g.compute_blocknr(member_sector, disk), Raid5Geometry::kParity);
                    continue;
                }
                Raid5Location loc = g.compute_sector(sector_t(chunk) * cs + 5);
                EXPECT_EQ(loc.dd_idx, disk) << int(layout) << " chunk " << chunk;
                EXPECT_EQ(loc.pd_idx, g.parity_disk(stripe));
                EXPECT_EQ(loc.member_sector, member_sector);
                EXPECT_EQ(g.compute_blocknr(member_sector, disk), sector_t(chunk) * cs + 5);
            }
        }
    }
}

// ALGORITHM_* numbers are md's: left-asymmetric 0 ... right-symmetric 3.
TEST(Raid5LayoutTest, AlgorithmNumbersAreMds) {
    EXPECT_EQ(raid5_algorithm(Raid5Layout::LeftAsymmetric), 0);
    EXPECT_EQ(raid5_algorithm(Raid5Layout::RightAsymmetric), 1);
    EXPECT_EQ(raid5_algorithm(Raid5Layout::LeftSymmetric), 2);
    EXPECT_EQ(raid5_algorithm(Raid5Layout::RightSymmetric), 3);
}

// ARCHITECTURE.md's left-symmetric formula, 8 members, random sectors.
TEST(Raid5LayoutTest, LeftSymmetricFollowsTheFormula) {
    const uint32_t n = 8, cs = 128;
    Raid5Geometry g(n, cs, Raid5Layout::LeftSymmetric);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 10000; i++) {
        sector_t s = rng() % (sector_t(1) << 32);
        sector_t chunk = s / cs, stripe = chunk / (n - 1), d = chunk % (n - 1);
        uint32_t pd = uint32_t((n - 1) - stripe % n);
        uint32_t dd = uint32_t((pd + 1 + d) % n);
        Raid5Location loc = g.compute_sector(s);
        ASSERT_EQ(loc.pd_idx, pd);
        ASSERT_EQ(loc.dd_idx, dd);
        ASSERT_EQ(loc.member_sector, stripe * cs + s % cs);
    }
}

// raid5_compute_blocknr() inverts raid5_compute_sector() for every layout,
// and every member holds parity once per N chunk-stripes.
TEST(Raid5LayoutTest, ComputeBlocknrInvertsComputeSector) {
    for (Raid5Layout layout : kLayouts) {
        for (uint32_t n : {3u, 5u, 8u}) {
            Raid5Geometry g(n, 16, layout);
            for (sector_t s = 0; s < sector_t(16) * (n - 1) * n * 3; s += 3) {
                Raid5Location loc = g.compute_sector(s);
                ASSERT_NE(loc.dd_idx, loc.pd_idx);
                ASSERT_EQ(g.compute_blocknr(loc.member_sector, loc.dd_idx), s);
            }
            std::vector<int> parity_count(n, 0);
            for (sector_t stripe = 0; stripe < n; stripe++) parity_count[g.parity_disk(stripe)]++;
            EXPECT_EQ(parity_count, std::vector<int>(n, 1));
        }
    }
}

// md exposes (N-1) x the smallest member rounded down to a chunk.
TEST(Raid5LayoutTest, UsableSizeIsSmallestMemberRoundedToChunk) {
    const uint32_t cs = sectors_of(64 * kKiB);
    std::vector<sector_t> sizes = {sectors_of(10 * kMiB), sectors_of(9 * kMiB + 100 * kKiB),
                                   sectors_of(12 * kMiB)};
    EXPECT_EQ(Raid5Geometry::usable_sectors(sizes, cs), 2 * sectors_of(9 * kMiB + 64 * kKiB));
}

// ---------------------------------------------------------------- harness

// A RAM member that can be told to fail its requests with -EIO.
class FailingBackend final : public Backend {
public:
    FailingBackend(EventLoop& loop, uint64_t size) : loop_(loop), ram_(loop, size) {
        ram_.set_completion(&FailingBackend::forward, this);
    }
    void submit(Request* rq) override {
        if ((rq->op == Op::Write && fail_writes) || (rq->op == Op::Read && fail_reads)) {
            rq->ring_owner = this;
            loop_.defer(&FailingBackend::fail, rq);
            return;
        }
        ram_.submit(rq);
    }
    uint64_t size_bytes() const override { return ram_.size_bytes(); }
    const char* kind() const override { return "ram"; }
    RamBackend& ram() { return ram_; }
    bool fail_writes = false;
    bool fail_reads = false;

private:
    static void forward(void* ctx, Request* rq, int64_t res) {
        static_cast<FailingBackend*>(ctx)->complete(rq, res);
    }
    static void fail(void* arg, uint64_t) {
        auto* rq = static_cast<Request*>(arg);
        static_cast<FailingBackend*>(rq->ring_owner)->complete(rq, -EIO);
    }
    EventLoop& loop_;
    RamBackend ram_;
};

struct Raid5Options {
    uint32_t members = 4;
    uint64_t chunk = 64 * kKiB;
    Raid5Layout layout = Raid5Layout::LeftSymmetric;
    uint64_t member_bytes = 4 * kMiB;
    uint64_t max_sectors = 1 * kMiB;   // md's own limit
    uint64_t member_max = 512 * kKiB;  // each member's
    SplitInsert insert = SplitInsert::Head;
    int failed = -1;
};

// Completion of one top-level bio.
struct Done {
    int times = 0;
    int32_t error = 0;
};

void top_bio_done(Bio* bio) {
    auto* done = static_cast<Done*>(bio->private_data);
    done->times++;
    done->error = bio->error;
    bio->pool->put(bio);
}

// Virtual clock, loop, tracer recording every event, block layer, RAM
// members and the RAID5 device over them.
class Raid5Harness {
public:
    explicit Raid5Harness(const Raid5Options& o)
        : options_(o), loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, o.insert) {
        tracer_.add_global_sink(&recorder_);
        MemberQueueLimits limits;
        limits.max_sectors = sectors_of(o.member_max);
        std::vector<MemberQueue*> members;
        std::vector<bool> failed;
        for (uint32_t i = 0; i < o.members; i++) {
            auto backend = std::make_unique<FailingBackend>(loop_, o.member_bytes);
            backends_.push_back(backend.get());
            members_.push_back(std::make_unique<MemberQueue>(
                layer_, "m" + std::to_string(i), make_devt(8, 16 * i), std::move(backend), limits));
            members.push_back(members_.back().get());
            failed.push_back(int(i) == o.failed);
        }
        DeviceConfig config;
        config.kind = DeviceKind::Raid5;
        config.chunk_bytes = o.chunk;
        config.layout = o.layout;
        config.max_sectors_bytes = o.max_sectors;
        md_ = std::make_unique<Raid5Device>(layer_, "md0", kMdDevt, members, failed, config);
        task_.pid = 42;
    }

    Raid5Device& md() { return *md_; }
    BlockLayer& layer() { return layer_; }
    MemberQueue& member(size_t i) { return *members_.at(i); }
    FailingBackend& backend(size_t i) { return *backends_.at(i); }
    RamBackend& ram(size_t i) { return backends_.at(i)->ram(); }
    uint64_t size() const { return md_->capacity() << kSectorShift; }
    const std::vector<TraceEvent>& events() const { return recorder_.events; }

    // One plug (blk_start_plug .. blk_finish_plug) around several submissions.
    void begin() {
        layer_.set_current(&task_);
        layer_.start_plug(task_);
    }
    void submit(Op op, uint64_t offset, uint64_t length, uint8_t* data, Done* done) {
        layer_.set_current(&task_);
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->flags = kBioSync;
        bio->sector = offset >> kSectorShift;
        bio->nr_sectors = sectors_of(length);
        bio->dev = md_.get();
        bio->data = data;
        bio->pid = task_.pid;
        bio->end_io = &top_bio_done;
        bio->private_data = done;
        layer_.submit_bio_noacct(bio);
    }
    void commit() {
        layer_.set_current(&task_);
        layer_.finish_plug(task_);
    }
    void run() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }
    // A synchronous I/O; returns its error.
    int32_t io(Op op, uint64_t offset, uint64_t length, uint8_t* data) {
        Done done;
        begin();
        submit(op, offset, length, data, &done);
        commit();
        run();
        EXPECT_EQ(done.times, 1);
        return done.error;
    }

    // XOR of every member's 4 KiB row is zero (no member failed).
    std::vector<uint64_t> bad_parity_rows() {
        std::vector<uint64_t> bad;
        uint64_t rows = (md_->capacity() / (options_.members - 1)) / kRaid5StripeSectors;
        std::vector<uint8_t> acc(kRaid5StripeBytes), page(kRaid5StripeBytes);
        for (uint64_t r = 0; r < rows; r++) {
            std::fill(acc.begin(), acc.end(), 0);
            for (uint32_t i = 0; i < options_.members; i++) {
                ram(i).read_bytes(r * kRaid5StripeBytes, page.data(), page.size());
                for (size_t k = 0; k < page.size(); k++) acc[k] ^= page[k];
            }
            if (std::any_of(acc.begin(), acc.end(), [](uint8_t b) { return b != 0; }))
                bad.push_back(r);
        }
        return bad;
    }

    // Fills the members directly with a consistent array holding `data`.
    void populate(const std::vector<uint8_t>& data) {
        const Raid5Geometry& g = md_->geometry();
        uint64_t rows = (md_->capacity() / (options_.members - 1)) / kRaid5StripeSectors;
        std::vector<uint8_t> parity(kRaid5StripeBytes);
        for (uint64_t r = 0; r < rows; r++) {
            sector_t member_sector = r * kRaid5StripeSectors;
            std::fill(parity.begin(), parity.end(), 0);
            uint32_t pd = 0;
            for (uint32_t i = 0; i < options_.members; i++) {
                sector_t v = g.compute_blocknr(member_sector, i);
                if (v == Raid5Geometry::kParity) {
                    pd = i;
                    continue;
                }
                const uint8_t* unit = data.data() + (v << kSectorShift);
                ram(i).write_bytes(r * kRaid5StripeBytes, unit, kRaid5StripeBytes);
                for (size_t k = 0; k < parity.size(); k++) parity[k] ^= unit[k];
            }
            ram(pd).write_bytes(r * kRaid5StripeBytes, parity.data(), parity.size());
        }
    }

    // Virtual offsets (from the A events' from_sector) of the remaps onto
    // members, in trace order.
    std::vector<uint64_t> remap_order() const {
        std::vector<uint64_t> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.action == TraceAction::Remap && e.from_device == kMdDevt)
                out.push_back(e.from_sector << kSectorShift);
        return out;
    }
    size_t count(TraceAction action, uint32_t devt) const {
        return size_t(std::count_if(
            recorder_.events.begin(), recorder_.events.end(),
            [&](const TraceEvent& e) { return e.action == action && e.device == devt; }));
    }

private:
    Raid5Options options_;
    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    TraceRecorder recorder_;
    BlockLayer layer_;
    std::vector<FailingBackend*> backends_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
    std::unique_ptr<Raid5Device> md_;
    TaskContext task_;
};

// posix_memalign'd buffers, as O_DIRECT members need.
struct AlignedBuffer {
    explicit AlignedBuffer(uint64_t n) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, n ? n : 1)) throw std::bad_alloc();
        data = static_cast<uint8_t*>(p);
        memset(data, 0, n);
        size = n;
    }
    ~AlignedBuffer() { free(data); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    uint8_t* data;
    uint64_t size;
};

void fill_random(uint8_t* p, uint64_t n, std::mt19937_64& rng) {
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t v = rng();
        memcpy(p + i, &v, std::min<uint64_t>(8, n - i));
    }
}

// ---------------------------------------------------------------- read path

const std::vector<uint64_t> kLegacyOrder = {0, 1 * kMiB, 1536 * kKiB, 512 * kKiB};
const std::vector<uint64_t> kFixedOrder = {0, 512 * kKiB, 1 * kMiB, 1536 * kKiB};

struct TwoMibRead {
    std::vector<uint64_t> order;
    size_t md_splits = 0, md_queues = 0, md_completes = 0;
    uint64_t md_read_ios = 0;
    Done done;
    size_t bios_outstanding = 0;
};

TwoMibRead two_mib_read(SplitInsert insert) {
    Raid5Options o;
    o.members = 4;
    o.chunk = 512 * kKiB;
    o.member_bytes = 8 * kMiB;
    o.insert = insert;
    Raid5Harness h(o);
    AlignedBuffer buf(2 * kMiB);
    TwoMibRead r;
    h.submit(Op::Read, 0, 2 * kMiB, buf.data, &r.done);  // no plug, as submit_order_test
    h.run();
    r.order = h.remap_order();
    r.md_splits = h.count(TraceAction::Split, kMdDevt);
    r.md_queues = h.count(TraceAction::Queue, kMdDevt);
    r.md_completes = h.count(TraceAction::Complete, kMdDevt);
    r.md_read_ios = h.md().stats().ios[0];
    r.bios_outstanding = h.layer().bios().outstanding();
    return r;
}

// Seed 000/002: max_sectors 1 MiB, chunk 512 KiB, a 2 MiB read at 0. The
// two-list loop gives 0, 1M, 1536K, 512K before the fix (the thread's prose
// says 0, 1M, 512K, 1536K; ARCHITECTURE.md explains the difference).
TEST(Raid5ReadTest, LegacySplitOrderReachesMembersOutOfOrder) {
    TwoMibRead r = two_mib_read(SplitInsert::Tail);
    EXPECT_EQ(r.order, kLegacyOrder);
}

TEST(Raid5ReadTest, FixedSplitOrderReachesMembersInOrder) {
    TwoMibRead r = two_mib_read(SplitInsert::Head);
    EXPECT_EQ(r.order, kFixedOrder);
}

// Q and C once on md for the bio, X for the max_sectors split and the two
// chunk splits, md's iostat counts one io per chunk-sized bio.
TEST(Raid5ReadTest, TracesAndAccountingOfTheSplitRead) {
    for (SplitInsert insert : {SplitInsert::Tail, SplitInsert::Head}) {
        TwoMibRead r = two_mib_read(insert);
        EXPECT_EQ(r.done.times, 1);
        EXPECT_EQ(r.done.error, 0);
        // The top bio is queued once; whether the max_sectors front is queued
        // again when its chunk-split remainder is resubmitted depends on the
        // core's bio_split (the kernel copies BIO_TRACE_COMPLETION to the
        // front, so it is not); every queued bio completes with a C.
        EXPECT_GE(r.md_queues, 1u);
        EXPECT_LE(r.md_queues, 2u);
        EXPECT_GE(r.md_completes, r.md_queues);
        EXPECT_EQ(r.md_splits, 3u);
        EXPECT_EQ(r.md_read_ios, 4u);
        EXPECT_EQ(r.bios_outstanding, 0u);
    }
}

// Reads of a consistent array return its data for every layout.
TEST(Raid5ReadTest, AlignedReadsReturnTheArrayData) {
    for (Raid5Layout layout : kLayouts) {
        Raid5Options o;
        o.members = 5;
        o.chunk = 16 * kKiB;
        o.layout = layout;
        o.member_bytes = 1 * kMiB;
        Raid5Harness h(o);
        std::mt19937_64 rng(1);
        std::vector<uint8_t> data(h.size());
        fill_random(data.data(), data.size(), rng);
        h.populate(data);
        AlignedBuffer buf(h.size());
        ASSERT_EQ(h.io(Op::Read, 0, h.size(), buf.data), 0);
        EXPECT_EQ(memcmp(buf.data, data.data(), h.size()), 0) << int(layout);
        EXPECT_EQ(h.md().counters().degraded_reads, 0u);
    }
}

// ---------------------------------------------------------------- writes

// Random writes (sizes, offsets, several per plug, overlapping ones
// included) then reads return what a sequential model holds, and every
// row's parity is right.
void random_writes_then_read(Raid5Harness& h, std::mt19937_64& rng, int rounds,
                             std::vector<uint8_t>& model) {
    const uint64_t size = h.size();
    for (int round = 0; round < rounds; round++) {
        int batch = 1 + int(rng() % 6);
        std::vector<std::unique_ptr<AlignedBuffer>> bufs;
        std::vector<Done> done(static_cast<size_t>(batch));
        h.begin();
        for (int k = 0; k < batch; k++) {
            uint64_t len = (1 + rng() % 768) * kSectorSize;  // 512 B .. 384 KiB
            if (rng() % 8 == 0) len = (1 + rng() % 3) * kMiB / 2;
            len = std::min(len, size);
            uint64_t offset = (rng() % ((size - len) / kSectorSize + 1)) * kSectorSize;
            bufs.push_back(std::make_unique<AlignedBuffer>(len));
            fill_random(bufs.back()->data, len, rng);
            memcpy(model.data() + offset, bufs.back()->data, len);
            h.submit(Op::Write, offset, len, bufs.back()->data, &done[size_t(k)]);
        }
        h.commit();
        h.run();
        for (const Done& d : done) {
            ASSERT_EQ(d.times, 1);
            ASSERT_EQ(d.error, 0);
        }
        // A random read back.
        uint64_t len = (1 + rng() % 1024) * kSectorSize;
        len = std::min(len, size);
        uint64_t offset = (rng() % ((size - len) / kSectorSize + 1)) * kSectorSize;
        AlignedBuffer rb(len);
        ASSERT_EQ(h.io(Op::Read, offset, len, rb.data), 0);
        ASSERT_EQ(memcmp(rb.data, model.data() + offset, len), 0) << "round " << round;
    }
    AlignedBuffer all(size);
    ASSERT_EQ(h.io(Op::Read, 0, size, all.data), 0);
    EXPECT_EQ(memcmp(all.data, model.data(), size), 0);
    EXPECT_EQ(h.md().active_stripes(), 0u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
}

TEST(Raid5WriteTest, RandomWritesThenReadsReturnTheData) {
    for (Raid5Layout layout : kLayouts) {
        Raid5Options o;
        o.members = 5;
        o.chunk = 16 * kKiB;
        o.layout = layout;
        o.member_bytes = 1 * kMiB;
        Raid5Harness h(o);
        std::mt19937_64 rng(7 + int(layout));
        std::vector<uint8_t> model(h.size(), 0);
        random_writes_then_read(h, rng, 60, model);
        EXPECT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{}) << int(layout);
        EXPECT_GT(h.md().counters().rmw + h.md().counters().rcw, 0u);
    }
}

TEST(Raid5WriteTest, ParityIsRightAfterRandomWritesOnThreeAndEightMembers) {
    for (uint32_t n : {3u, 8u}) {
        Raid5Options o;
        o.members = n;
        o.chunk = 64 * kKiB;
        o.member_bytes = 1 * kMiB;
        Raid5Harness h(o);
        std::mt19937_64 rng{n};
        std::vector<uint8_t> model(h.size(), 0);
        random_writes_then_read(h, rng, 40, model);
        EXPECT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{}) << n;
    }
}

// A write of whole stripes computes parity from the new data: no reads.
TEST(Raid5WriteTest, FullStripeWriteReadsNothing) {
    Raid5Options o;
    o.members = 4;
    o.chunk = 64 * kKiB;
    Raid5Harness h(o);
    AlignedBuffer buf(3 * 64 * kKiB * 2);  // two full chunk-stripes
    std::mt19937_64 rng(3);
    fill_random(buf.data, buf.size, rng);
    ASSERT_EQ(h.io(Op::Write, 3 * 64 * kKiB, buf.size, buf.data), 0);
    const auto& c = h.md().counters();
    EXPECT_EQ(c.full_stripe_writes, 2u * 16u);  // 16 rows of 4 KiB per chunk-stripe
    EXPECT_EQ(c.rmw + c.rcw, 0u);
    for (uint32_t i = 0; i < 4; i++) {
        EXPECT_EQ(h.member(i).stats().ios[0], 0u) << i;
        EXPECT_GT(h.member(i).stats().ios[1], 0u) << i;
        // The 4 KiB stripe bios of one member merge in raid5d's plug.
        EXPECT_GT(h.member(i).stats().merges[1], 0u) << i;
    }
    EXPECT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{});
    EXPECT_EQ(h.md().stats().ios[1], 1u);
}

// handle_stripe_dirtying(): a 4 KiB write on 6 members reads old data and
// parity (2) rather than the 4 other data units; on 3 members reading the
// one other unit (1) beats reading 2.
TEST(Raid5WriteTest, SmallWriteChoosesTheCheaperParityUpdate) {
    {
        Raid5Options o;
        o.members = 6;
        Raid5Harness h(o);
        AlignedBuffer buf(4 * kKiB);
        memset(buf.data, 0x5a, buf.size);
        ASSERT_EQ(h.io(Op::Write, 8 * kKiB, buf.size, buf.data), 0);
        EXPECT_EQ(h.md().counters().rmw, 1u);
        EXPECT_EQ(h.md().counters().rcw, 0u);
        uint64_t reads = 0;
        for (uint32_t i = 0; i < 6; i++) reads += h.member(i).stats().ios[0];
        EXPECT_EQ(reads, 2u);
        EXPECT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{});
    }
    {
        Raid5Options o;
        o.members = 3;
        Raid5Harness h(o);
        AlignedBuffer buf(4 * kKiB);
        memset(buf.data, 0xa5, buf.size);
        ASSERT_EQ(h.io(Op::Write, 8 * kKiB, buf.size, buf.data), 0);
        EXPECT_EQ(h.md().counters().rcw, 1u);
        EXPECT_EQ(h.md().counters().rmw, 0u);
        EXPECT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{});
    }
}

// Many writes to one stripe in flight at once are serialized by the stripe
// head: parity is never torn and the last write wins.
TEST(Raid5WriteTest, ConcurrentWritesToOneStripeAreSerialized) {
    Raid5Options o;
    o.members = 4;
    o.chunk = 64 * kKiB;
    Raid5Harness h(o);
    std::mt19937_64 rng(11);
    std::vector<uint8_t> model(h.size(), 0);
    for (int round = 0; round < 20; round++) {
        std::vector<std::unique_ptr<AlignedBuffer>> bufs;
        std::vector<Done> done(16);
        h.begin();
        for (size_t k = 0; k < done.size(); k++) {
            // All inside the first chunk-stripe's first rows.
            uint64_t chunk = rng() % 3, off = (rng() % 16) * kSectorSize;
            uint64_t len = (1 + rng() % 24) * kSectorSize;
            uint64_t offset = chunk * 64 * kKiB + off;
            bufs.push_back(std::make_unique<AlignedBuffer>(len));
            fill_random(bufs.back()->data, len, rng);
            memcpy(model.data() + offset, bufs.back()->data, len);
            h.submit(Op::Write, offset, len, bufs.back()->data, &done[k]);
        }
        h.commit();
        h.run();
        for (const Done& d : done) ASSERT_EQ(d.times, 1);
        ASSERT_EQ(h.bad_parity_rows(), std::vector<uint64_t>{}) << round;
    }
    AlignedBuffer all(h.size());
    ASSERT_EQ(h.io(Op::Read, 0, h.size(), all.data), 0);
    EXPECT_EQ(memcmp(all.data, model.data(), h.size()), 0);
}

// ---------------------------------------------------------------- degraded

// With any member failed, reads of its chunks are rebuilt from the others;
// the failed member is never touched.
TEST(Raid5DegradedTest, ReadsReconstructTheFailedMember) {
    for (Raid5Layout layout : {Raid5Layout::LeftSymmetric, Raid5Layout::RightAsymmetric}) {
        for (int failed = 0; failed < 4; failed++) {
            Raid5Options o;
            o.members = 4;
            o.chunk = 16 * kKiB;
            o.layout = layout;
            o.member_bytes = 1 * kMiB;
            o.failed = failed;
            Raid5Harness h(o);
            std::mt19937_64 rng{uint64_t(failed)};
            std::vector<uint8_t> data(h.size());
            fill_random(data.data(), data.size(), rng);
            h.populate(data);
            // Garbage on the failed member: reading it would show.
            std::vector<uint8_t> junk(o.member_bytes, 0xee);
            h.ram(size_t(failed)).write_bytes(0, junk.data(), junk.size());
            AlignedBuffer all(h.size());
            ASSERT_EQ(h.io(Op::Read, 0, h.size(), all.data), 0);
            EXPECT_EQ(memcmp(all.data, data.data(), h.size()), 0) << failed;
            // Unaligned small reads too.
            for (int k = 0; k < 50; k++) {
                uint64_t len = (1 + rng() % 100) * kSectorSize;
                uint64_t offset = (rng() % ((h.size() - len) / kSectorSize)) * kSectorSize;
                AlignedBuffer b(len);
                ASSERT_EQ(h.io(Op::Read, offset, len, b.data), 0);
                ASSERT_EQ(memcmp(b.data, data.data() + offset, len), 0);
            }
            EXPECT_GT(h.md().counters().degraded_reads, 0u);
            EXPECT_EQ(h.member(size_t(failed)).stats().ios[0], 0u);
            EXPECT_EQ(h.member(size_t(failed)).stats().ios[1], 0u);
        }
    }
}

// Writes with a failed member (data or parity role, depending on the
// stripe) keep the array right: everything reads back.
TEST(Raid5DegradedTest, WritesWithAFailedMemberReadBack) {
    for (int failed = 0; failed < 5; failed++) {
        Raid5Options o;
        o.members = 5;
        o.chunk = 16 * kKiB;
        o.member_bytes = 1 * kMiB;
        o.failed = failed;
        Raid5Harness h(o);
        std::mt19937_64 rng(100 + uint64_t(failed));
        std::vector<uint8_t> model(h.size(), 0);
        random_writes_then_read(h, rng, 40, model);
        EXPECT_GT(h.md().counters().degraded_writes, 0u);
        EXPECT_EQ(h.member(size_t(failed)).stats().ios[0], 0u);
        EXPECT_EQ(h.member(size_t(failed)).stats().ios[1], 0u);
        EXPECT_EQ(h.ram(size_t(failed)).resident_bytes(), 0u);
    }
}

// Data written while healthy is still readable once a member fails.
TEST(Raid5DegradedTest, HealthyWritesReadBackAfterAFailure) {
    Raid5Options o;
    o.members = 4;
    o.chunk = 32 * kKiB;
    o.member_bytes = 1 * kMiB;
    Raid5Harness healthy(o);
    std::mt19937_64 rng(9);
    std::vector<uint8_t> model(healthy.size(), 0);
    random_writes_then_read(healthy, rng, 30, model);
    for (int failed = 0; failed < 4; failed++) {
        Raid5Options d = o;
        d.failed = failed;
        Raid5Harness h(d);
        std::vector<uint8_t> page(o.member_bytes);
        for (uint32_t i = 0; i < 4; i++) {
            healthy.ram(i).read_bytes(0, page.data(), page.size());
            if (int(i) != failed) h.ram(i).write_bytes(0, page.data(), page.size());
        }
        AlignedBuffer all(h.size());
        ASSERT_EQ(h.io(Op::Read, 0, h.size(), all.data), 0);
        EXPECT_EQ(memcmp(all.data, model.data(), h.size()), 0) << failed;
    }
}

// ---------------------------------------------------------------- errors

// A member write error makes the member Faulty (md_error) and the writes
// complete: the array is degraded, the data survives in parity. Every bio
// completes once and nothing is left behind.
TEST(Raid5ErrorTest, MemberWriteErrorFailsTheMember) {
    Raid5Options o;
    o.members = 4;
    Raid5Harness h(o);
    h.backend(1).fail_writes = true;
    AlignedBuffer buf(1 * kMiB);
    std::mt19937_64 rng(5);
    fill_random(buf.data, buf.size, rng);
    std::vector<Done> done(3);
    h.begin();
    h.submit(Op::Write, 0, 1 * kMiB, buf.data, &done[0]);
    h.submit(Op::Write, 2 * kMiB + 68 * kKiB, 8 * kKiB, buf.data, &done[1]);  // data on member 1
    h.submit(Op::Write, 3 * kMiB, 4 * kKiB, buf.data, &done[2]);              // parity on member 1
    h.commit();
    h.run();
    for (const Done& d : done) {
        EXPECT_EQ(d.times, 1);
        EXPECT_EQ(d.error, 0);
    }
    EXPECT_GT(h.md().counters().member_errors, 0u);
    EXPECT_EQ(h.md().counters().members_failed, 1u);
    EXPECT_EQ(h.md().failed_member(), 1);
    EXPECT_FALSE(h.md().array_failed());
    EXPECT_EQ(h.md().stats().errors[1], 0u);
    EXPECT_EQ(h.md().stats().in_flight, 0u);
    EXPECT_EQ(h.md().active_stripes(), 0u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
    EXPECT_EQ(h.layer().requests().outstanding(), 0u);
    // Member 1 gets nothing more; what was written reads back, rebuilt.
    uint64_t m1_ios = h.member(1).stats().ios[0] + h.member(1).stats().ios[1];
    AlignedBuffer r(1 * kMiB);
    ASSERT_EQ(h.io(Op::Read, 0, 1 * kMiB, r.data), 0);
    EXPECT_EQ(memcmp(r.data, buf.data, 1 * kMiB), 0);
    ASSERT_EQ(h.io(Op::Read, 2 * kMiB + 68 * kKiB, 8 * kKiB, r.data), 0);
    EXPECT_EQ(memcmp(r.data, buf.data, 8 * kKiB), 0);
    EXPECT_EQ(h.member(1).stats().ios[0] + h.member(1).stats().ios[1], m1_ios);
}

// Read errors on every member: the first makes its member Faulty and the
// read is retried degraded, the second fails the array: EIO from then on,
// even once the members are healthy again.
TEST(Raid5ErrorTest, MemberReadErrorsOnTwoMembersFailTheArray) {
    Raid5Options o;
    o.members = 6;
    Raid5Harness h(o);
    for (uint32_t i = 0; i < 6; i++) h.backend(i).fail_reads = true;
    AlignedBuffer buf(256 * kKiB);
    EXPECT_EQ(h.io(Op::Read, 0, buf.size, buf.data), -EIO);
    EXPECT_TRUE(h.md().array_failed());
    EXPECT_EQ(h.io(Op::Write, 4 * kKiB, 4 * kKiB, buf.data), -EIO);
    EXPECT_EQ(h.md().stats().errors[0], 4u);  // one per chunk-sized bio
    EXPECT_EQ(h.md().stats().errors[1], 0u);  // failed before accounting (MD_BROKEN)
    EXPECT_EQ(h.md().stats().in_flight, 0u);
    EXPECT_EQ(h.md().active_stripes(), 0u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
    for (uint32_t i = 0; i < 6; i++) h.backend(i).fail_reads = false;
    EXPECT_EQ(h.io(Op::Write, 4 * kKiB, 4 * kKiB, buf.data), -EIO);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
}

// One member's read errors: it becomes Faulty, the reads are rebuilt from
// the others and fio sees no error.
TEST(Raid5ErrorTest, MemberReadErrorIsRebuilt) {
    Raid5Options o;
    o.members = 5;
    o.chunk = 16 * kKiB;
    o.member_bytes = 1 * kMiB;
    Raid5Harness h(o);
    std::mt19937_64 rng(11);
    std::vector<uint8_t> model(h.size());
    fill_random(model.data(), model.size(), rng);
    h.populate(model);
    h.backend(3).fail_reads = true;
    AlignedBuffer all(h.size());
    ASSERT_EQ(h.io(Op::Read, 0, h.size(), all.data), 0);
    EXPECT_EQ(memcmp(all.data, model.data(), h.size()), 0);
    EXPECT_EQ(h.md().failed_member(), 3);
    EXPECT_GT(h.md().counters().read_retries, 0u);
    EXPECT_EQ(h.md().stats().errors[0], 0u);
    EXPECT_EQ(h.md().stats().in_flight, 0u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
}

// A degraded read whose rebuild reads fail completes with the error.
TEST(Raid5ErrorTest, DegradedReadErrorFailsTheBio) {
    Raid5Options o;
    o.members = 4;
    o.failed = 0;
    Raid5Harness h(o);
    h.backend(2).fail_reads = true;
    AlignedBuffer buf(1 * kMiB);
    EXPECT_EQ(h.io(Op::Read, 0, buf.size, buf.data), -EIO);
    EXPECT_EQ(h.md().active_stripes(), 0u);
    EXPECT_EQ(h.layer().bios().outstanding(), 0u);
}

// ---------------------------------------------------------------- stack

// Stack builds a raid5 from its config: md's size, every member opened, the
// whole direct-I/O path (bio builder, plug) carries data.
TEST(Raid5StackTest, StackBuildsRaid5FromConfig) {
    StackConfig config;
    config.device.kind = DeviceKind::Raid5;
    config.device.chunk_bytes = 64 * kKiB;
    for (int i = 0; i < 4; i++) {
        MemberConfig m;
        m.path = "ram" + std::to_string(i);
        m.backend = BackendKind::Ram;
        m.size = 2 * kMiB + 100 * kKiB;
        m.failed = i == 2;
        config.members.push_back(m);
    }
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    EXPECT_EQ(stack.size_bytes(), 3 * (2 * kMiB + 64 * kKiB));
    ASSERT_EQ(stack.members().size(), 4u);
    auto* md = dynamic_cast<Raid5Device*>(&stack.top());
    ASSERT_NE(md, nullptr);
    EXPECT_EQ(md->failed_member(), 2);

    TaskContext task;
    task.pid = 7;
    AlignedBuffer w(1536 * kKiB), r(1536 * kKiB);
    std::mt19937_64 rng(2);
    fill_random(w.data, w.size, rng);
    for (auto [op, buf] : {std::pair{Op::Write, w.data}, std::pair{Op::Read, r.data}}) {
        stack.begin_batch(task);
        stack.queue(task, op, 12 * kKiB, w.size, buf, 1);
        stack.commit(task);
        stack.reap(task, 1, ~uint64_t(0) / 2);
        stack.drain();
        ASSERT_EQ(task.completions.size(), 1u);
        EXPECT_EQ(task.completions[0].error, 0);
        task.completions.clear();
    }
    EXPECT_EQ(memcmp(w.data, r.data, w.size), 0);
    EXPECT_EQ(stack.members()[2]->stats().ios[0] + stack.members()[2]->stats().ios[1], 0u);
}

// A RAID5 of four 2 MiB RAM members, 64 KiB chunks.
StackConfig four_ram_members_raid5() {
    StackConfig config;
    config.device.kind = DeviceKind::Raid5;
    config.device.chunk_bytes = 64 * kKiB;
    for (int i = 0; i < 4; i++) {
        MemberConfig m;
        m.path = "ram" + std::to_string(i);
        m.backend = BackendKind::Ram;
        m.size = 2 * kMiB;
        config.members.push_back(m);
    }
    return config;
}

// [cpu] submit_bio: modelled on both clocks, in device time (slow motion
// stretches it); a real-clock stack pays the real CPU on top (host lag).
// Writes (the stripe cache) and reads carry their data through the paused
// submissions.
TEST(Raid5StackTest, SubmitCostIsModelledOnBothClocks) {
    StackConfig config = four_ram_members_raid5();
    config.device.time_scale = 2;
    config.cpu.submit_bio_ns = 5000;
    RealClock real;
    EXPECT_EQ(Stack(config, real, StackOptions{}).layer().submit_cost(), 10'000u);
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    EXPECT_EQ(stack.layer().submit_cost(), 10'000u);

    TaskContext task;
    AlignedBuffer w(1536 * kKiB), r(1536 * kKiB);
    std::mt19937_64 rng(3);
    fill_random(w.data, w.size, rng);
    for (auto [op, buf] : {std::pair{Op::Write, w.data}, std::pair{Op::Read, r.data}}) {
        uint64_t t0 = clock.now_ns();
        stack.begin_batch(task);
        stack.queue(task, op, 12 * kKiB, w.size, buf, 1);
        stack.commit(task);
        EXPECT_TRUE(stack.submitting(task));
        stack.reap(task, 1, ~uint64_t(0) / 2);
        stack.drain();
        EXPECT_FALSE(stack.submitting(task));
        ASSERT_EQ(task.completions.size(), 1u);
        EXPECT_EQ(task.completions[0].error, 0);
        task.completions.clear();
        EXPECT_GT(clock.now_ns() - t0, 10'000u);  // at least the first call's time
    }
    EXPECT_EQ(memcmp(w.data, r.data, w.size), 0);
}

// [cpu] dispatch: a flush keeps the task busy for the cost of every request
// it hands to a driver, and a queue's batch arrives when the task has done
// the batches before it and the batch's first request. Two 64 KiB chunks on
// two members flushed by blk_finish_plug: member 0's request at d, member
// 1's at 2d, and the read (RAM members answer at once) completes at 2d.
TEST(Raid5StackTest, DispatchCostDelaysEachQueuesBatchInFlushOrder) {
    StackConfig config = four_ram_members_raid5();
    config.cpu.dispatch_ns = 7000;
    RealClock real;
    EXPECT_EQ(Stack(config, real, StackOptions{}).layer().dispatch_cost(), 7000u);
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    EXPECT_EQ(stack.layer().dispatch_cost(), 7000u);

    TaskContext task;
    AlignedBuffer r(128 * kKiB);
    uint64_t t0 = clock.now_ns();
    stack.begin_batch(task);
    stack.queue(task, Op::Read, 0, r.size, r.data, 1);
    stack.commit(task);
    stack.reap(task, 1, ~uint64_t(0) / 2);
    ASSERT_EQ(task.completions.size(), 1u);
    EXPECT_EQ(task.completions[0].error, 0);
    EXPECT_EQ(clock.now_ns() - t0, 2 * 7000u);
    EXPECT_EQ(stack.members()[0]->stats().ios[0], 1u);
    EXPECT_EQ(stack.members()[1]->stats().ios[0], 1u);
    stack.drain();
    EXPECT_FALSE(stack.submitting(task));
}

}  // namespace
}  // namespace mdsplit
