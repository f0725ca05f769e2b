// fio jobs on the virtual clock (engine/core/fio_job_model.h).
#include "sim/fio_job_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "config/config_loader.h"
#include "core/trace/trace_event.h"
#include "ram_nvme_stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

// Opens each stack of a run on the test's clock, recording every trace event.
struct JobRunner {
    VirtualClock clock;
    StackConfig config = load_stack_text(kRamNvmeStack, ".", "<test>");
    std::vector<std::unique_ptr<Stack>> stacks;
    TraceRecorder recorder;
    static Stack* open(void* ctx, size_t) {
        auto* r = static_cast<JobRunner*>(ctx);
        r->stacks.push_back(std::make_unique<Stack>(r->config, r->clock, StackOptions{}));
        r->stacks.back()->tracer().add_global_sink(&r->recorder);
        return r->stacks.back().get();
    }
    std::vector<FioJobResult> go(const std::vector<FioJobSpec>& jobs, size_t nr_stacks = 1) {
        FioRunHooks hooks;
        hooks.open_stack = &JobRunner::open;
        hooks.ctx = this;
        return run_fio_jobs(nr_stacks, clock, jobs, hooks);
    }
};

FioJobSpec job(bool random, uint64_t bs, uint64_t size) {
    FioJobSpec s;
    s.name = "j";
    s.random = random;
    s.bs[0] = {FioBlockSize{bs, 100}};
    s.bs[1] = s.bs[0];
    s.bs[2] = s.bs[0];
    s.size = size;
    s.seed = 7;
    s.pid = 1000;
    return s;
}

// fio's histogram index (stat.c plat_val_to_idx) at the first buckets and beyond.
TEST(FioJobModelTest, LatencyBucketsFollowFio) {
    EXPECT_EQ(FioLatency::bucket_of(0), 0u);
    EXPECT_EQ(FioLatency::bucket_of(127), 127u);
    EXPECT_EQ(FioLatency::bucket_of(128), 128u);
    EXPECT_EQ(FioLatency::bucket_of(1000), 317u);
    EXPECT_EQ(FioLatency::bucket_of(~uint64_t(0)), FioLatency::kBuckets - 1);
}

// A sequential read of size S in blocks of B issues S/B I/Os and reads S bytes.
TEST(FioJobModelTest, SequentialJobReadsItsSizeOnce) {
    JobRunner run;
    auto r = run.go({job(false, 64 << 10, 4 << 20)});
    EXPECT_EQ(r[0].dir[0].ios, 64u);
    EXPECT_EQ(r[0].dir[0].bytes, 4u << 20);
    EXPECT_EQ(r[0].dir[0].clat.n, 64u);
    EXPECT_GT(r[0].runtime_ns, 0u);
}

// With the random map, one pass of a random job reads every block exactly once.
TEST(FioJobModelTest, RandomMapVisitsEveryBlockOnce) {
    JobRunner run;
    run.go({job(true, 4096, 1 << 20)});
    std::multiset<uint64_t> sectors;
    for (const TraceEvent& e : run.recorder.events)
        if (e.action == TraceAction::Queue && e.device == run.stacks[0]->top().devt())
            sectors.insert(e.sector);
    EXPECT_EQ(sectors.size(), 256u);
    EXPECT_EQ(std::set<uint64_t>(sectors.begin(), sectors.end()).size(), 256u);
}

// Two runs of the same jobs give the same latencies to the nanosecond.
TEST(FioJobModelTest, RunsAreDeterministic) {
    auto spec = job(true, 4096, 4 << 20);
    spec.iodepth = 8;
    JobRunner a, b;
    auto ra = a.go({spec}), rb = b.go({spec});
    EXPECT_EQ(ra[0].dir[0].clat.sum, rb[0].dir[0].clat.sum);
    EXPECT_EQ(ra[0].end_ns, rb[0].end_ns);
}

// A job of a later stonewall phase starts when the earlier phase has ended.
TEST(FioJobModelTest, StonewallPhaseStartsAfterThePreviousOne) {
    auto first = job(false, 64 << 10, 1 << 20), second = first;
    second.phase = 1;
    second.stack = 1;
    JobRunner run;
    auto r = run.go({first, second}, 2);
    EXPECT_EQ(r[1].start_ns, r[0].end_ns);
}

// An interrupted run (fio's Ctrl-C): the running job stops issuing and skips
// its verify, every I/O it queued completes, a later phase never starts,
// and the run throws once drained.
TEST(FioJobModelTest, InterruptedRunDrainsAndStartsNothingMore) {
    auto first = job(true, 4096, 4 << 20), second = first;
    first.iodepth = 8;
    first.time_based = true;
    first.runtime_ns = 3600'000'000'000;  // an hour of virtual time: far more than the test runs
    first.read_pct = 0;
    first.verify = true;
    second.phase = 1;
    second.stack = 1;
    JobRunner run;
    FioRunHooks hooks;
    hooks.open_stack = &JobRunner::open;
    hooks.ctx = &run;
    int polls = 0;
    EXPECT_THROW(run_fio_jobs(2, run.clock, {first, second}, hooks,
                              InterruptPoll([&] { return ++polls == 3; })),
                 RunInterrupted);
    ASSERT_EQ(run.stacks.size(), 1u);  // the second phase's stack was never opened
    size_t queued = 0, completed = 0, reads = 0;
    for (const TraceEvent& e : run.recorder.events) {
        if (e.device != run.stacks[0]->top().devt()) continue;
        queued += e.action == TraceAction::Queue;
        completed += e.action == TraceAction::Complete;
        reads += e.action == TraceAction::Queue && e.op == Op::Read;
    }
    EXPECT_GT(queued, 0u);
    EXPECT_EQ(completed, queued);
    EXPECT_EQ(reads, 0u);  // no verify phase
}

// An interrupted run: a job whose startdelay has not come never starts (the
// clock does not wait for it), the running one drains, and the run throws.
TEST(FioJobModelTest, InterruptedRunNeverStartsADelayedJob) {
    auto running = job(true, 4096, 4 << 20), later = running;
    running.iodepth = 16;
    running.time_based = true;
    running.runtime_ns = 3600'000'000'000;  // an hour of virtual time
    later.start_delay_ns = uint64_t(1) << 50;
    later.pid = 1001;
    JobRunner run;
    FioRunHooks hooks;
    hooks.open_stack = &JobRunner::open;
    hooks.ctx = &run;
    EXPECT_THROW(
        run_fio_jobs(1, run.clock, {running, later}, hooks, InterruptPoll([] { return true; })),
        RunInterrupted);
    EXPECT_LT(run.clock.now_ns(), uint64_t(1) << 50);  // nobody waited for `later`
    ASSERT_EQ(run.stacks.size(), 1u);
    std::set<uint32_t> pids;
    size_t queued = 0, completed = 0;
    for (const TraceEvent& e : run.recorder.events) {
        if (e.device != run.stacks[0]->top().devt()) continue;
        queued += e.action == TraceAction::Queue;
        completed += e.action == TraceAction::Complete;
        if (e.action == TraceAction::Queue) pids.insert(e.pid);
    }
    EXPECT_GT(queued, 0u);
    EXPECT_EQ(completed, queued);
    EXPECT_EQ(pids, std::set<uint32_t>{1000});  // only the running job issued
}

// rate_iops: a time-based job at 1000 IOPS for 50 ms issues 50 I/Os.
TEST(FioJobModelTest, RateIopsLimitsIssue) {
    auto spec = job(true, 4096, 4 << 20);
    spec.rate_iops = 1000;
    spec.time_based = true;
    spec.runtime_ns = 50'000'000;
    JobRunner run;
    auto r = run.go({spec});
    EXPECT_EQ(r[0].dir[0].ios, 50u);
}

// A write-then-verify job: each direction's runtime is its own phase's
// (backend.c update_runtime()), the two phases filling the job's runtime.
TEST(FioJobModelTest, VerifyPhaseIsTheReadsRuntimeAlone) {
    auto spec = job(true, 4096, 1 << 20);
    spec.read_pct = 0;
    spec.verify = true;
    spec.rate_iops = 1000;
    JobRunner run;
    auto r = run.go({spec});
    const FioDirectionResult &read = r[0].dir[kFioRead], &write = r[0].dir[kFioWrite];
    EXPECT_EQ(read.ios, 256u);
    EXPECT_GE(write.runtime_ns, 255'000'000u);  // 256 writes at 1000 IOPS
    EXPECT_GT(read.runtime_ns, 0u);
    EXPECT_LT(read.runtime_ns, write.runtime_ns / 10);  // no rate limit on verify
    EXPECT_EQ(read.runtime_ns + write.runtime_ns, r[0].runtime_ns);
}

// The I/Os of `op` a job queued on the virtual device, as (sector, bytes).
std::vector<std::pair<uint64_t, uint32_t>> queued(const JobRunner& run, Op op) {
    std::vector<std::pair<uint64_t, uint32_t>> out;
    for (const TraceEvent& e : run.recorder.events)
        if (e.action == TraceAction::Queue && e.device == run.stacks[0]->top().devt() && e.op == op)
            out.emplace_back(e.sector, e.bytes);
    return out;
}

// rw=trim: only trims, the region's size once, counted in the trim direction.
TEST(FioJobModelTest, TrimJobTrimsItsSizeOnce) {
    auto spec = job(false, 64 << 10, 2 << 20);
    spec.trim = FioTrim::Only;
    JobRunner run;
    auto r = run.go({spec});
    EXPECT_EQ(r[0].dir[kFioTrim].ios, 32u);
    EXPECT_EQ(r[0].dir[kFioTrim].bytes, 2u << 20);
    EXPECT_EQ(r[0].dir[kFioRead].ios + r[0].dir[kFioWrite].ios, 0u);
    EXPECT_EQ(queued(run, Op::Discard).size(), 32u);
}

// randtrimwrite: every write goes to the block its trim just discarded
// (io_u.c get_next_block: f->last_start[DDIR_TRIM]), and size counts writes.
TEST(FioJobModelTest, RandTrimWriteWritesEachTrimmedBlock) {
    auto spec = job(true, 4096, 1 << 20);
    spec.trim = FioTrim::ThenWrite;
    spec.bs[kFioTrim] = {FioBlockSize{4096, 50}, FioBlockSize{16384, 50}};
    JobRunner run;
    auto r = run.go({spec});
    auto trims = queued(run, Op::Discard), writes = queued(run, Op::Write);
    EXPECT_EQ(trims, writes);
    EXPECT_EQ(r[0].dir[kFioWrite].bytes, 1u << 20);
    EXPECT_EQ(r[0].dir[kFioTrim].bytes, r[0].dir[kFioWrite].bytes);
    EXPECT_GT(trims.size(), 64u);  // some 16 KiB, most 4 KiB
}

}  // namespace
}  // namespace mdsplit
