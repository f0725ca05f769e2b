// The timing model that stands in for a device's service time (the role of
// null_blk's completion_nsec / a real drive behind blk_mq_complete_request):
//   service = command + bytes / bandwidth + (non-sequential ? random_penalty : 0)
// where commands overlap on `parallelism` channels and the media phase
// (penalty + transfer) is device-wide, one request at a time
// (engine/backends/timing_model.h):
//   done = max(channel_start + command, media_free) + penalty + bytes / bandwidth
// TimedBackend completes a request at its modelled time and never before the
// wrapped backend has finished it; whole virtual-clock runs (a Stack and
// one fio job through run_fio_jobs, without fio's own CPU time) reach the
// throughput the formula predicts, identically every time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "config/config_loader.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/ram_backend.h"
#include "core/drivers/timed_backend.h"
#include "core/drivers/timing_model.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"
#include "fio_jobs_on_stack.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// The sata-ssd preset's numbers (jobs/models.toml).
TimingModelConfig sata_like(uint32_t parallelism = 1) {
    TimingModelConfig c;
    c.name = "sata-like";
    c.command_ns = 25'000;
    c.bandwidth_bps = 600'000'000;
    c.random_penalty_ns = 65'000;
    c.parallelism = parallelism;
    c.write_command_ns = 20'000;
    c.write_bandwidth_bps = 560'000'000;
    return c;
}

// bytes / bandwidth in ns, rounded down as the model does.
uint64_t transfer_ns(uint64_t bytes, uint64_t bandwidth_bps) {
    return uint64_t(__uint128_t(bytes) * 1'000'000'000ull / bandwidth_bps);
}

TEST(TimingModelTest, ServiceTimeIsCommandPlusTransferPlusPenalty) {
    TimingModel model(sata_like());
    // 128 KiB at 600 MB/s: 218453 ns.
    EXPECT_EQ(model.service_ns(Op::Read, 128 * kKiB, true), 25'000u + 218'453u);
    EXPECT_EQ(model.service_ns(Op::Read, 128 * kKiB, false), 25'000u + 218'453u + 65'000u);
    EXPECT_EQ(model.service_ns(Op::Read, 4 * kKiB, false),
              25'000u + transfer_ns(4 * kKiB, 600'000'000) + 65'000u);
    // Writes use their own command cost and bandwidth.
    EXPECT_EQ(model.service_ns(Op::Write, 128 * kKiB, true),
              20'000u + transfer_ns(128 * kKiB, 560'000'000));
    EXPECT_EQ(model.service_ns(Op::Write, 128 * kKiB, false),
              20'000u + transfer_ns(128 * kKiB, 560'000'000) + 65'000u);
}

// write_random_penalty, when set, is the penalty of a non-sequential write.
TEST(TimingModelTest, WriteRandomPenaltyAppliesToWritesOnly) {
    TimingModelConfig c = sata_like();
    c.write_random_penalty_ns = 90'000;
    TimingModel model(c);
    EXPECT_EQ(model.service_ns(Op::Write, 128 * kKiB, false),
              20'000u + transfer_ns(128 * kKiB, 560'000'000) + 90'000u);
    EXPECT_EQ(model.service_ns(Op::Read, 128 * kKiB, false), 25'000u + 218'453u + 65'000u);
}

TEST(TimingModelTest, WriteValuesDefaultToTheReadValues) {
    TimingModelConfig c = sata_like();
    c.write_command_ns = 0;
    c.write_bandwidth_bps = 0;
    TimingModel model(c);
    EXPECT_EQ(model.service_ns(Op::Write, 64 * kKiB, true),
              model.service_ns(Op::Read, 64 * kKiB, true));
}

TEST(TimingModelTest, ZeroBandwidthMeansNoTransferTime) {
    TimingModelConfig c;
    c.command_ns = 100'000'000;  // slow-qd1: null_blk completion_nsec=100ms
    TimingModel model(c);
    EXPECT_EQ(model.service_ns(Op::Read, 1 * kMiB, false), 100'000'000u);
    EXPECT_EQ(model.service_ns(Op::Write, 4 * kKiB, true), 100'000'000u);
}

// A request is sequential when it starts where the previous one ended; the
// very first request is not.
TEST(TimingModelTest, SequentialMeansStartingWhereThePreviousEnded) {
    TimingModel model(sata_like());
    const uint64_t seq = model.service_ns(Op::Read, 4 * kKiB, true);
    const uint64_t rnd = model.service_ns(Op::Read, 4 * kKiB, false);
    uint64_t t = 0;
    // Each request arrives when the previous one completes (queue depth 1).
    t = model.schedule(t, Op::Read, 1000, 8);
    EXPECT_EQ(t, rnd);
    t = model.schedule(t, Op::Read, 1008, 8);
    EXPECT_EQ(t, rnd + seq);
    t = model.schedule(t, Op::Read, 1016, 8);
    EXPECT_EQ(t, rnd + 2 * seq);
    t = model.schedule(t, Op::Read, 0, 8);  // a seek back
    EXPECT_EQ(t, 2 * rnd + 2 * seq);
    t = model.schedule(t, Op::Read, 16, 8);  // a gap is a seek too
    EXPECT_EQ(t, 3 * rnd + 2 * seq);
}

// prefetch_window: a forward skip no longer than the window, after a
// streaming read, is served as sequential; a longer skip or a seek back is not.
TEST(TimingModelTest, PrefetchWindowServesAShortForwardSkipAsSequential) {
    TimingModelConfig c = sata_like();
    c.prefetch_window_bytes = 64 * kKiB;
    TimingModel model(c);
    const uint64_t seq = model.service_ns(Op::Read, 64 * kKiB, true);
    const uint64_t rnd = model.service_ns(Op::Read, 64 * kKiB, false);
    uint64_t t = model.schedule(0, Op::Read, 0, 128);  // [0, 128): the first read
    EXPECT_EQ(t, rnd);
    t = model.schedule(t, Op::Read, 256, 128);  // skips 64 KiB: inside the window
    EXPECT_EQ(t, rnd + seq);
    t = model.schedule(t, Op::Read, 513, 128);  // skips 64.5 KiB: beyond it
    EXPECT_EQ(t, 2 * rnd + seq);
    t = model.schedule(t, Op::Read, 0, 128);  // a seek back is never prefetched
    EXPECT_EQ(t, 3 * rnd + seq);
}

// prefetch_window = "request": the reach is the previous request's size.
TEST(TimingModelTest, PrefetchWindowRequestReachesThePreviousRequestsSize) {
    TimingModelConfig c = sata_like();
    c.prefetch_window_bytes = TimingModelConfig::kPrefetchWindowRequest;
    TimingModel model(c);
    const uint64_t big_rnd = model.service_ns(Op::Read, 64 * kKiB, false);
    const uint64_t big_seq = model.service_ns(Op::Read, 64 * kKiB, true);
    const uint64_t small_seq = model.service_ns(Op::Read, 4 * kKiB, true);
    const uint64_t small_rnd = model.service_ns(Op::Read, 4 * kKiB, false);
    uint64_t t = model.schedule(0, Op::Read, 0, 128);
    t = model.schedule(t, Op::Read, 256, 128);  // skips 64 KiB after 64 KiB: prefetched
    EXPECT_EQ(t, big_rnd + big_seq);
    t = model.schedule(t, Op::Read, 384, 8);  // a 4 KiB read in sequence
    EXPECT_EQ(t, big_rnd + big_seq + small_seq);
    t = model.schedule(t, Op::Read, 408, 8);  // skips 8 KiB after 4 KiB: beyond it
    EXPECT_EQ(t, big_rnd + big_seq + small_seq + small_rnd);
}

// The window is the drive's read prefetch: a write after a skip is random.
TEST(TimingModelTest, PrefetchWindowIsForReadsOnly) {
    TimingModelConfig c = sata_like();
    c.prefetch_window_bytes = 64 * kKiB;
    TimingModel model(c);
    uint64_t t = model.schedule(0, Op::Write, 0, 128);
    const uint64_t rnd = model.service_ns(Op::Write, 64 * kKiB, false);
    EXPECT_EQ(model.schedule(t, Op::Write, 256, 128), t + rnd);
}

// No stream, no prefetch: after a read below prefetch_threshold a skip pays
// random_command (and, as always then, no random_penalty).
TEST(TimingModelTest, PrefetchWindowNeedsAStreamingRead) {
    TimingModelConfig c = sata_like();
    c.prefetch_threshold_bytes = 64 * kKiB;
    c.random_command_ns = 60'000;
    c.prefetch_window_bytes = 64 * kKiB;
    TimingModel model(c);
    uint64_t t = model.schedule(0, Op::Read, 0, 8);  // 4 KiB: not a stream
    const uint64_t small = transfer_ns(4 * kKiB, c.bandwidth_bps);
    EXPECT_EQ(model.schedule(t, Op::Read, 16, 8), t + 25'000 + 60'000 + small);
}

// One channel serves one request at a time: a request that arrives while
// it is busy starts when it frees; one that arrives later starts on arrival.
TEST(TimingModelTest, OneChannelQueuesRequests) {
    TimingModel model(sata_like(1));
    const uint64_t rnd = model.service_ns(Op::Read, 4 * kKiB, false);
    EXPECT_EQ(model.schedule(0, Op::Read, 0, 8), rnd);
    EXPECT_EQ(model.schedule(0, Op::Read, 800, 8), 2 * rnd);
    EXPECT_EQ(model.schedule(10, Op::Read, 1600, 8), 3 * rnd);
    const uint64_t late = 10 * rnd;
    EXPECT_EQ(model.schedule(late, Op::Read, 2400, 8), late + rnd);
}

// `parallelism` channels overlap the commands; the media phase serves one
// request at a time, so small random reads on a fast-command device are
// media bound: each completes one media time after the previous one.
TEST(TimingModelTest, ChannelsOverlapCommandsButShareTheMedia) {
    TimingModel model(sata_like(4));
    const uint64_t command = model.command_ns(Op::Read);
    const uint64_t media = model.media_ns(Op::Read, 4 * kKiB, false);
    EXPECT_EQ(command + media, model.service_ns(Op::Read, 4 * kKiB, false));
    std::vector<uint64_t> done;
    for (sector_t i = 0; i < 10; i++) done.push_back(model.schedule(0, Op::Read, i * 100, 8));
    for (uint64_t k = 0; k < done.size(); k++) EXPECT_EQ(done[k], command + (k + 1) * media);
}

// With a slow command and a short media phase the channels are the limit:
// `parallelism` requests complete per command + media.
TEST(TimingModelTest, CommandBoundDeviceScalesWithChannels) {
    TimingModelConfig c;
    c.command_ns = 100'000;
    c.random_penalty_ns = 10'000;
    c.parallelism = 2;
    TimingModel model(c);
    std::vector<uint64_t> done;
    for (sector_t i = 0; i < 6; i++) done.push_back(model.schedule(0, Op::Read, i * 100, 8));
    EXPECT_EQ(done, (std::vector<uint64_t>{110'000, 120'000, 220'000, 230'000, 330'000, 340'000}));
}

// A request that arrives at an idle device is served on arrival.
TEST(TimingModelTest, IdleDeviceServesOnArrival) {
    TimingModel model(sata_like(4));
    const uint64_t rnd = model.service_ns(Op::Read, 4 * kKiB, false);
    EXPECT_EQ(model.schedule(0, Op::Read, 0, 8), rnd);
    EXPECT_EQ(model.schedule(1'000'000, Op::Read, 800, 8), 1'000'000 + rnd);
}

// jitter: each command gets an exponential extra with the configured mean;
// never negative, varied, the same sequence in every model.
TEST(TimingModelTest, JitterAddsAnExponentialExtraWithItsMean) {
    TimingModelConfig c = sata_like(64);
    c.jitter_ns = 6'000;
    TimingModel model(c), again(c);
    const uint64_t base = model.service_ns(Op::Read, 4 * kKiB, false);
    constexpr int kN = 20'000;
    double sum = 0;
    uint64_t lo = ~uint64_t(0), hi = 0, above_3_means = 0;
    for (int i = 0; i < kN; i++) {
        uint64_t t0 = uint64_t(i) * 10'000'000;  // an idle device each time
        uint64_t done = model.schedule(t0, Op::Read, uint64_t(i) * 1000, 8);
        ASSERT_EQ(done, again.schedule(t0, Op::Read, uint64_t(i) * 1000, 8));
        ASSERT_GE(done - t0, base);
        uint64_t extra = done - t0 - base;
        sum += double(extra);
        lo = std::min(lo, extra);
        hi = std::max(hi, extra);
        if (extra > 18'000) above_3_means++;
    }
    EXPECT_NEAR(sum / kN, 6'000, 200);  // standard error ~42 ns
    EXPECT_LT(lo, 100u);
    EXPECT_GT(hi, 40'000u);
    // P(X > 3 mean) = e^-3 = 4.98%.
    EXPECT_NEAR(double(above_3_means) / kN, 0.0498, 0.006);
}

// jitter_seed: another seed draws another sequence with the same mean; the
// same seed repeats it exactly.
TEST(TimingModelTest, JitterSeedPicksAnotherRepeatableSequence) {
    TimingModelConfig c = sata_like(64);
    c.jitter_ns = 6'000;
    TimingModelConfig d = c;
    d.jitter_seed = 7;
    TimingModel a(c), b(d), b_again(d);
    int differ = 0;
    double sum = 0;
    constexpr int kN = 20'000;
    const uint64_t base = a.service_ns(Op::Read, 4 * kKiB, false);
    for (int i = 0; i < kN; i++) {
        uint64_t t0 = uint64_t(i) * 10'000'000;
        uint64_t x = a.schedule(t0, Op::Read, uint64_t(i) * 1000, 8);
        uint64_t y = b.schedule(t0, Op::Read, uint64_t(i) * 1000, 8);
        ASSERT_EQ(y, b_again.schedule(t0, Op::Read, uint64_t(i) * 1000, 8));
        differ += x != y;
        sum += double(y - t0 - base);
    }
    EXPECT_GT(differ, kN * 9 / 10);
    EXPECT_NEAR(sum / kN, 6'000, 200);
}

TEST(TimingModelTest, ParallelismZeroActsAsOneChannel) {
    TimingModelConfig c = sata_like();
    c.parallelism = 0;
    TimingModel model(c);
    const uint64_t rnd = model.service_ns(Op::Read, 4 * kKiB, false);
    EXPECT_EQ(model.schedule(0, Op::Read, 0, 8), rnd);
    EXPECT_EQ(model.schedule(0, Op::Read, 800, 8), 2 * rnd);
}

// A backend that really finishes a request `delay_ns` after it is submitted.
class DelayedBackend final : public Backend {
public:
    DelayedBackend(EventLoop& loop, uint64_t size, uint64_t delay_ns)
        : loop_(loop), size_(size), delay_ns_(delay_ns) {}
    void submit(Request* rq) override {
        rq->ring_owner = this;
        loop_.schedule_at(loop_.now() + delay_ns_, &DelayedBackend::finish, rq);
    }
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "delayed"; }

private:
    static void finish(void* arg, uint64_t) {
        auto* rq = static_cast<Request*>(arg);
        static_cast<DelayedBackend*>(rq->ring_owner)->complete(rq, int64_t(rq->bytes()));
    }
    EventLoop& loop_;
    uint64_t size_;
    uint64_t delay_ns_;
};

// One member over a TimedBackend, with every trace event recorded.
class TimedHarness {
public:
    // inner_delay_ns: how long the wrapped backend really takes (0: a RAM
    // backend that finishes on the next turn of the loop).
    TimedHarness(const TimingModelConfig& model, uint32_t queue_depth, uint64_t inner_delay_ns = 0)
        : loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, SplitInsert::Head) {
        tracer_.add_global_sink(&recorder_);
        std::unique_ptr<Backend> inner;
        if (inner_delay_ns)
            inner = std::make_unique<DelayedBackend>(loop_, 64 * kMiB, inner_delay_ns);
        else
            inner = std::make_unique<RamBackend>(loop_, 64 * kMiB);
        MemberQueueLimits limits;
        limits.queue_depth = queue_depth;
        member_ = std::make_unique<MemberQueue>(
            layer_, "m0", make_devt(8, 0),
            std::make_unique<TimedBackend>(loop_, std::move(inner), model), limits);
    }

    void submit(Op op, sector_t sector, uint32_t nr_sectors) {
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->sector = sector;
        bio->nr_sectors = nr_sectors;
        bio->dev = member_.get();
        bio->end_io = [](Bio* b) { b->pool->put(b); };
        layer_.submit_bio_noacct(bio);
    }
    void run_until_idle() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }
    std::vector<TraceEvent> events(TraceAction action) const {
        std::vector<TraceEvent> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.action == action) out.push_back(e);
        return out;
    }
    uint64_t now() const { return clock_.now_ns(); }
    MemberQueue& member() { return *member_; }

private:
    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    TraceRecorder recorder_;
    BlockLayer layer_;
    std::unique_ptr<MemberQueue> member_;
};

// Requests complete exactly at the modelled time (the RAM backend itself
// finishes at once), in the order of their channels, never earlier.
TEST(TimingModelTest, TimedBackendCompletesAtTheModelledTime) {
    TimingModelConfig c = sata_like(2);
    TimedHarness h(c, 64);
    TimingModel reference(c);
    std::vector<uint64_t> expected;
    const sector_t sectors[] = {0, 8, 5000, 5008, 64, 72};
    for (sector_t s : sectors) {
        expected.push_back(reference.schedule(0, Op::Read, s, 8));
        h.submit(Op::Read, s, 8);
    }
    h.run_until_idle();
    std::vector<TraceEvent> issues = h.events(TraceAction::Issue);
    std::vector<TraceEvent> completions = h.events(TraceAction::Complete);
    ASSERT_EQ(completions.size(), 6u);
    std::vector<uint64_t> got;
    for (const TraceEvent& e : completions) got.push_back(e.time_ns);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(got, expected);
    const uint64_t minimum = c.command_ns + transfer_ns(4 * kKiB, c.bandwidth_bps);
    for (const TraceEvent& done : completions)
        for (const TraceEvent& issue : issues)
            if (issue.sector == done.sector) {
                EXPECT_GE(done.time_ns - issue.time_ns, minimum);
            }
}

// A wrapped backend slower than the model holds the completion back: the
// request completes when both the model and the real I/O are done.
TEST(TimingModelTest, TimedBackendWaitsForASlowerInnerBackend) {
    TimingModelConfig model;
    model.command_ns = 100'000;  // the model says 100 us

    TimedHarness slow_inner(model, 64, /*inner_delay_ns=*/1'000'000);
    slow_inner.submit(Op::Read, 0, 8);
    slow_inner.run_until_idle();
    ASSERT_EQ(slow_inner.member().stats().ios[0], 1u);
    EXPECT_EQ(slow_inner.events(TraceAction::Complete).at(0).time_ns, 1'000'000u);
    EXPECT_EQ(slow_inner.member().stats().ticks_ns[0], 1'000'000u);

    TimedHarness fast_inner(model, 64, /*inner_delay_ns=*/40'000);
    fast_inner.submit(Op::Read, 0, 8);
    fast_inner.run_until_idle();
    EXPECT_EQ(fast_inner.events(TraceAction::Complete).at(0).time_ns, 100'000u);
}

// Whole runs on a virtual clock: a passthrough stack over a null member
// with a [models.NAME] model, driven by the closed-loop workload.
struct ModelNumbers {
    uint64_t command_ns = 25'000;
    uint64_t bandwidth_bps = 600'000'000;
    uint64_t penalty_ns = 65'000;
    uint32_t parallelism = 1;

    uint64_t media_ns(uint64_t bytes, bool sequential) const {
        return (bandwidth_bps ? transfer_ns(bytes, bandwidth_bps) : 0) +
               (sequential ? 0 : penalty_ns);
    }
    // Requests per second of a stream kept at a depth >= parallelism:
    // min(parallelism / (command + media), 1 / media).
    double saturated_rate(uint64_t bytes, bool sequential) const {
        double media = double(media_ns(bytes, sequential));
        double by_channels = parallelism * 1e9 / (double(command_ns) + media);
        return media > 0 ? std::min(by_channels, 1e9 / media) : by_channels;
    }
};

std::string stack_toml(const ModelNumbers& m) {
    return R"(
[device]
kind = "passthrough"

[[members]]
backend = "null"
size = "1g"
max_sectors = "1m"
queue_depth = 64
model = "test-ssd"

[models.test-ssd]
command = ")" +
           std::to_string(m.command_ns) + R"(ns"
bandwidth = )" +
           std::to_string(m.bandwidth_bps) + R"(
random_penalty = ")" +
           std::to_string(m.penalty_ns) + R"(ns"
parallelism = )" +
           std::to_string(m.parallelism) + "\n";
}

// A closed loop of reads as the tests describe it: `iodepth` in flight,
// `batch` per commit, `total_bytes` in all.
struct WorkloadSpec {
    bool random = false;
    uint64_t block_size = 4096;
    uint64_t total_bytes = 0;
    uint32_t iodepth = 1;
    uint32_t batch = 1;
    uint64_t seed = 1;
};

// What the loop did: from the fio job's read results.
struct WorkloadResult {
    uint64_t ios = 0, bytes = 0, errors = 0;
    uint64_t elapsed_ns = 0;  // the job's runtime
    uint64_t total_latency_ns = 0, max_latency_ns = 0;
    double iops() const { return elapsed_ns ? ios * 1e9 / double(elapsed_ns) : 0.0; }
    double bandwidth_bps() const { return elapsed_ns ? bytes * 1e9 / double(elapsed_ns) : 0.0; }
};

struct VirtualRun {
    WorkloadResult result;
    std::string stats;
};

// The loop as one fio job on the virtual clock (run_fio_jobs), with no fio
// CPU time between a completion and the next submission: the device alone
// sets the pace.
VirtualRun run_virtual(const ModelNumbers& model, const WorkloadSpec& spec) {
    StackConfig config = load_stack_text(stack_toml(model), "", "timing_model_test");
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    FioJobSpec job = closed_loop_job(Op::Read, spec.random, spec.block_size, spec.iodepth,
                                     spec.total_bytes, 0, spec.seed);
    job.batch = spec.batch;
    job.fio_submit_ns = 0;
    job.fio_complete_ns = 0;
    FioJobResult r = run_jobs_on(stack, clock, {job})[0];
    stack.drain();
    const FioDirectionResult& read = r.dir[kFioRead];
    VirtualRun run;
    run.result.ios = read.ios;
    run.result.bytes = read.bytes;
    run.result.errors = read.errors + (r.error != 0);
    run.result.elapsed_ns = r.runtime_ns;
    run.result.total_latency_ns = uint64_t(read.lat.sum);
    run.result.max_latency_ns = read.lat.max;
    run.stats = stack.stats_json();
    return run;
}

ModelNumbers with_parallelism(uint32_t parallelism) {
    ModelNumbers m;
    m.parallelism = parallelism;
    return m;
}

// Sequential 128 KiB reads at queue depth 1: each request costs command +
// transfer; only the first one (nothing before it) pays the seek.
TEST(TimingModelTest, SequentialStreamRunsAtTheModelledRate) {
    const ModelNumbers model = with_parallelism(1);
    WorkloadSpec spec;
    spec.block_size = 128 * kKiB;
    spec.total_bytes = 64 * kMiB;
    spec.iodepth = 1;
    VirtualRun run = run_virtual(model, spec);
    const uint64_t n = spec.total_bytes / spec.block_size;
    const uint64_t per_request = model.command_ns + model.media_ns(128 * kKiB, true);
    ASSERT_EQ(run.result.ios, n);
    EXPECT_EQ(run.result.errors, 0u);
    EXPECT_EQ(run.result.elapsed_ns, n * per_request + model.penalty_ns);
    EXPECT_NEAR(run.result.bandwidth_bps(), 128.0 * kKiB * 1e9 / double(per_request),
                0.005 * run.result.bandwidth_bps());
    // 25 + 218.5 us per 128 KiB: 539 MB/s.
    EXPECT_NEAR(run.result.bandwidth_bps() / 1e6, 539.0, 1.0);
}

// Deep sequential streams of large requests are bandwidth bound: extra
// channels only hide the command time.
TEST(TimingModelTest, DeepSequentialStreamIsBandwidthBound) {
    const ModelNumbers model = with_parallelism(4);
    WorkloadSpec spec;
    spec.block_size = 128 * kKiB;
    spec.total_bytes = 128 * kMiB;
    spec.iodepth = 4;
    VirtualRun run = run_virtual(model, spec);
    const double expected = 128.0 * kKiB * model.saturated_rate(128 * kKiB, true);
    EXPECT_NEAR(run.result.bandwidth_bps(), expected, 0.01 * expected);
    EXPECT_NEAR(run.result.bandwidth_bps() / 1e6, 600.0, 6.0);  // the link rate
}

// Random 4 KiB reads pay the penalty on every request: at queue depth 1,
// 1 / (command + transfer + penalty); deeper, the shared media phase
// (penalty + transfer) limits them.
TEST(TimingModelTest, RandomStreamPaysThePenaltyPerRequest) {
    const ModelNumbers model = with_parallelism(8);
    WorkloadSpec spec;
    spec.random = true;
    spec.block_size = 4 * kKiB;
    spec.total_bytes = 4 * kMiB;
    spec.iodepth = 1;
    VirtualRun qd1 = run_virtual(model, spec);
    const double per_request = double(model.command_ns + model.media_ns(4 * kKiB, false));
    EXPECT_NEAR(qd1.result.iops(), 1e9 / per_request, 0.005 * qd1.result.iops());
    EXPECT_NEAR(qd1.result.iops(), 10'330, 30);  // 25 + 65 + 6.8 us

    spec.iodepth = 32;
    spec.total_bytes = 32 * kMiB;
    VirtualRun qd32 = run_virtual(model, spec);
    const double expected = model.saturated_rate(4 * kKiB, false);
    EXPECT_NEAR(qd32.result.iops(), expected, 0.01 * expected);
    EXPECT_NEAR(qd32.result.iops(), 1e9 / double(model.media_ns(4 * kKiB, false)), 0.01 * expected);
}

// A device whose cost is all command time scales with queue depth up to its
// channels: depth / command below them, parallelism / command beyond.
TEST(TimingModelTest, CommandBoundStreamScalesWithDepthUpToTheChannels) {
    ModelNumbers model;
    model.command_ns = 100'000;
    model.bandwidth_bps = 0;
    model.penalty_ns = 0;
    model.parallelism = 8;
    WorkloadSpec spec;
    spec.random = true;
    spec.block_size = 4 * kKiB;
    spec.total_bytes = 16 * kMiB;
    spec.iodepth = 4;
    VirtualRun shallow = run_virtual(model, spec);
    EXPECT_NEAR(shallow.result.iops(), 4 * 1e9 / 100'000, 0.01 * shallow.result.iops());
    spec.iodepth = 32;
    VirtualRun deep = run_virtual(model, spec);
    EXPECT_NEAR(deep.result.iops(), model.saturated_rate(4 * kKiB, false),
                0.01 * deep.result.iops());
    EXPECT_NEAR(deep.result.iops(), 80'000, 800);
}

// At queue depth 1 a sequential stream beats a random one by exactly the
// penalty.
TEST(TimingModelTest, SequentialBeatsRandomByThePenalty) {
    const ModelNumbers model = with_parallelism(1);
    WorkloadSpec spec;
    spec.block_size = 4 * kKiB;
    spec.total_bytes = 4 * kMiB;
    VirtualRun sequential = run_virtual(model, spec);
    spec.random = true;
    VirtualRun random = run_virtual(model, spec);
    const double seq_ns = double(model.command_ns + model.media_ns(4 * kKiB, true));
    EXPECT_NEAR(sequential.result.iops() / random.result.iops(),
                (seq_ns + double(model.penalty_ns)) / seq_ns, 0.01);
}

// Virtual time makes runs reproducible: the same stack and workload give the
// same statistics, byte for byte.
TEST(TimingModelTest, SameConfigGivesIdenticalStats) {
    WorkloadSpec spec;
    spec.random = true;
    spec.block_size = 16 * kKiB;
    spec.total_bytes = 16 * kMiB;
    spec.iodepth = 16;
    spec.batch = 4;
    spec.seed = 1234;
    const ModelNumbers model = with_parallelism(4);
    VirtualRun first = run_virtual(model, spec);
    VirtualRun second = run_virtual(model, spec);
    EXPECT_EQ(first.stats, second.stats);
    EXPECT_EQ(first.result.elapsed_ns, second.result.elapsed_ns);
    EXPECT_EQ(first.result.total_latency_ns, second.result.total_latency_ns);
    EXPECT_EQ(first.result.max_latency_ns, second.result.max_latency_ns);
    EXPECT_NE(first.stats.find("\"elapsed_ns\": " + std::to_string(first.result.elapsed_ns)),
              std::string::npos);

    spec.seed = 99;  // and a different workload does change them
    VirtualRun other = run_virtual(model, spec);
    EXPECT_NE(first.stats, other.stats);
}

// die_stripe: a request waits for the die holding its data even when another
// die is idle; requests on different dies overlap.
TEST(TimingModelTest, DieStripeQueuesRequestsOnTheDieHoldingTheirData) {
    TimingModelConfig c = sata_like(4);
    c.die_stripe_bytes = 4 * kKiB;
    c.random_penalty_ns = 0;  // no shared media phase: only the dies
    c.bandwidth_bps = 0;
    TimingModel model(c);
    // 4 KiB units 0 and 4 are both on die 0; unit 1 is on die 1.
    EXPECT_EQ(model.schedule(0, Op::Read, 0, 8), 25'000u);
    EXPECT_EQ(model.schedule(0, Op::Read, 4 * 8, 8), 50'000u);
    EXPECT_EQ(model.schedule(0, Op::Read, 1 * 8, 8), 25'000u);
}

}  // namespace
}  // namespace mdsplit
