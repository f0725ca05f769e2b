// io_uring buffered reads through the page cache (buffered_io.h), on a
// virtual clock: for each variant (pre-c8d317aa, c8d317aa, forced-ra) with
// rasync on and off, with readahead off and on, where the read is issued
// (submitter or worker), how many inline attempts it takes, whether a
// page-wait callback is armed or the read is punted, and that no request is
// lost or completed twice. Then data: reads return what the members hold,
// buffered writes reach the members after fsync/sync, eviction, and a run
// with real worker threads on the real clock.
#include "core/io_uring/buffered_io.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "config/config_loader.h"
#include "core/trace/trace_event.h"
#include "fio_jobs_on_stack.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

std::string stack_toml(const std::string& variant, bool rasync, uint32_t ra_kb,
                       const std::string& cache = "16m", const std::string& member_size = "64m",
                       const std::string& model = "nvme") {
    std::string t = "[device]\nkind = \"passthrough\"\n\n[[members]]\npath = \"m0\"\nsize = \"" +
                    member_size + "\"\nbackend = \"ram\"\n";
    if (!model.empty()) t += "model = \"" + model + "\"\n";
    t += "\n[page_cache]\nsize = \"" + cache + "\"\nra_kb = " + std::to_string(ra_kb) +
         "\nrasync = " + (rasync ? "true" : "false") + "\nvariant = \"" + variant + "\"\n";
    return t;
}

struct AlignedFree {
    void operator()(uint8_t* p) const { free(p); }
};
using Buffer = std::unique_ptr<uint8_t, AlignedFree>;
Buffer aligned(size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n ? n : 1)) throw std::bad_alloc();
    memset(p, 0, n);
    return Buffer(static_cast<uint8_t*>(p));
}

// A stack on a clock with one task, recording buffered paths.
struct Rig {
    explicit Rig(const std::string& toml, Clock* clock = nullptr) {
        config = load_stack_text(toml, ".", "<test>");
        stack = std::make_unique<Stack>(config, clock ? *clock : vclock, StackOptions{});
        stack->buffered().set_record_paths(true);
        task.pid = 7;
    }
    BufferedIo& io() { return stack->buffered(); }

    // Direct write of `data` at `offset` (sector aligned).
    void direct_write(uint64_t offset, const std::vector<uint8_t>& data) {
        Buffer b = aligned(data.size());
        memcpy(b.get(), data.data(), data.size());
        TaskContext t;
        stack->begin_batch(t);
        stack->queue(t, Op::Write, offset, data.size(), b.get(), 1);
        stack->commit(t);
        stack->drain();
        ASSERT_EQ(t.completions.size(), 1u);
        ASSERT_EQ(t.completions[0].error, 0);
    }
    std::vector<uint8_t> direct_read(uint64_t offset, uint64_t length) {
        Buffer b = aligned(length);
        TaskContext t;
        stack->begin_batch(t);
        stack->queue(t, Op::Read, offset, length, b.get(), 1);
        stack->commit(t);
        stack->drain();
        EXPECT_EQ(t.completions.size(), 1u);
        return std::vector<uint8_t>(b.get(), b.get() + length);
    }
    // One buffered I/O, run to completion; returns its path.
    BufferedPath buffered(Op op, uint64_t offset, uint64_t length, uint8_t* buf,
                          uint64_t cookie = 1) {
        stack->begin_batch(task);
        stack->queue_buffered(task, op, offset, length, buf, cookie);
        stack->commit(task);
        stack->drain();
        EXPECT_EQ(task.completions.size(), 1u);
        EXPECT_EQ(task.in_flight, 0u);
        if (!task.completions.empty()) {
            EXPECT_EQ(task.completions[0].cookie, cookie);
            last_error = task.completions[0].error;
            last_resid = task.completions[0].resid;
        }
        task.completions.clear();
        auto paths = io().take_paths();
        EXPECT_EQ(paths.size(), 1u);
        return paths.empty() ? BufferedPath{} : paths[0];
    }
    // A sync call (fsync, sync_file_range) run to completion: it completes
    // once, as `cookie`, without error.
    template <class Call>
    void run_sync(Call call, uint64_t cookie) {
        stack->begin_batch(task);
        call();
        stack->commit(task);
        stack->drain();
        ASSERT_EQ(task.completions.size(), 1u);
        EXPECT_EQ(task.completions[0].cookie, cookie);
        EXPECT_EQ(task.completions[0].error, 0);
        task.completions.clear();
    }
    BufferedPath read(uint64_t offset, uint64_t length) {
        Buffer b = aligned(length);
        BufferedPath p = buffered(Op::Read, offset, length, b.get());
        last_data.assign(b.get(), b.get() + length);
        return p;
    }

    VirtualClock vclock;
    StackConfig config;
    std::unique_ptr<Stack> stack;
    TaskContext task;
    std::vector<uint8_t> last_data;
    int32_t last_error = 0;
    uint64_t last_resid = 0;
};

std::vector<uint8_t> pattern(uint64_t offset, uint64_t length, uint32_t seed = 0) {
    std::vector<uint8_t> v(length);
    for (uint64_t i = 0; i < length; i++) {
        uint64_t x = offset + i;
        v[i] = uint8_t((x * 2654435761u >> 7) ^ (x >> 12) ^ seed);
    }
    return v;
}

// What one 4k read of an uncached page does, by variant.
struct Expect {
    const char* variant;
    bool rasync;
    uint32_t ra_kb;
    uint32_t inline_attempts;
    uint32_t callbacks_armed;
    bool punted;
    BufferedWhere issued_by;
    BufferedWhere completed_in;
    uint32_t worker_sleeps;
};

void PrintTo(const Expect& e, std::ostream* os) {
    *os << e.variant << (e.rasync ? " rasync" : " norasync") << " ra_kb=" << e.ra_kb;
}

class BufferedMissPath : public ::testing::TestWithParam<Expect> {};

TEST_P(BufferedMissPath, OneUncachedRead) {
    const Expect& e = GetParam();
    Rig rig(stack_toml(e.variant, e.rasync, e.ra_kb));
    rig.direct_write(1 << 20, pattern(1 << 20, 4096));
    BufferedPath p = rig.read(1 << 20, 4096);
    EXPECT_EQ(rig.last_error, 0);
    EXPECT_EQ(rig.last_data, pattern(1 << 20, 4096));
    EXPECT_EQ(p.completions, 1u);
    EXPECT_EQ(p.inline_attempts, e.inline_attempts);
    EXPECT_EQ(p.callbacks_armed, e.callbacks_armed);
    EXPECT_EQ(p.punted, e.punted);
    EXPECT_EQ(p.issued_by, e.issued_by);
    EXPECT_EQ(p.completed_in, e.completed_in);
    EXPECT_EQ(p.worker_sleeps, e.worker_sleeps);
    EXPECT_EQ(p.task_work_runs, e.callbacks_armed);
    EXPECT_EQ(p.submitter_reads + p.worker_reads, 1u);  // one page read, by one side
    EXPECT_EQ(p.pages_missed, 1u);
    if (e.punted) {
        EXPECT_EQ(p.worker, 1u);
        EXPECT_GE(p.worker_attempts, 1u);
    } else {
        EXPECT_EQ(p.worker_attempts, 0u);
    }

    // The same page again: a hit, completed inline in one attempt.
    BufferedPath hit = rig.read(1 << 20, 4096);
    EXPECT_EQ(rig.last_data, pattern(1 << 20, 4096));
    EXPECT_EQ(hit.inline_attempts, 1u);
    EXPECT_EQ(hit.completed_in, BufferedWhere::Submitter);
    EXPECT_EQ(hit.issued_by, BufferedWhere::None);
    EXPECT_EQ(hit.pages_hit, 1u);
    EXPECT_FALSE(hit.punted);
    BufferedStats s = rig.io().stats();
    EXPECT_EQ(s.inline_completions, 1u);
    EXPECT_EQ(s.double_completions, 0u);
    EXPECT_EQ(s.submitter_blocks, 0u);
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 1u);
}

using W = BufferedWhere;
INSTANTIATE_TEST_SUITE_P(
    Variants, BufferedMissPath,
    ::testing::Values(
        // Readahead off. pre-c8d317aa: the retry keeps NOWAIT, so it fails
        // too and the worker issues the read.
        Expect{"pre-c8d317aa", true, 0, 2, 0, true, W::Worker, W::Worker, 1},
        Expect{"pre-c8d317aa", false, 0, 1, 0, true, W::Worker, W::Worker, 1},
        // c8d317aa: the retry clears NOWAIT: the submitter issues the read
        // and waits by callback; task_work copies.
        Expect{"c8d317aa", true, 0, 3, 1, false, W::Submitter, W::TaskWork, 0},
        Expect{"c8d317aa", false, 0, 1, 0, true, W::Worker, W::Worker, 1},
        // forced-ra: attempt #1 issues a one-page forced readahead; rasync
        // waits on the locked page, the worker sleeps on it.
        Expect{"forced-ra", true, 0, 3, 1, false, W::Submitter, W::TaskWork, 0},
        Expect{"forced-ra", false, 0, 1, 0, true, W::Submitter, W::Worker, 1},
        // Readahead on: a lone random read reads its page from attempt #1
        // in every variant.
        Expect{"pre-c8d317aa", true, 128, 3, 1, false, W::Submitter, W::TaskWork, 0},
        Expect{"pre-c8d317aa", false, 128, 1, 0, true, W::Submitter, W::Worker, 1},
        Expect{"c8d317aa", true, 128, 3, 1, false, W::Submitter, W::TaskWork, 0},
        Expect{"c8d317aa", false, 128, 1, 0, true, W::Submitter, W::Worker, 1},
        Expect{"forced-ra", true, 128, 3, 1, false, W::Submitter, W::TaskWork, 0},
        Expect{"forced-ra", false, 128, 1, 0, true, W::Submitter, W::Worker, 1}));

TEST(BufferedIoTest, WorkerAttemptsByVariantWithReadaheadOff) {
    // pre-c8d317aa / c8d317aa without rasync: the worker finds the page the
    // NOWAIT attempt left (not up to date, unlocked), reads it, sleeps, copies.
    Rig rig(stack_toml("c8d317aa", false, 0));
    BufferedPath p = rig.read(8192, 4096);
    EXPECT_EQ(p.worker_attempts, 2u);  // read + sleep, then copy
    EXPECT_EQ(p.worker_reads, 1u);
    EXPECT_EQ(p.submitter_reads, 0u);
    BufferedStats s = rig.io().stats();
    EXPECT_EQ(s.punts, 1u);
    EXPECT_EQ(s.worker_page_reads, 1u);
    EXPECT_EQ(s.submitter_page_reads, 0u);
    EXPECT_EQ(s.workers_created, 1u);
    EXPECT_EQ(s.ra_windows[size_t(RaKind::Forced)], 0u);
}

// 5.9's io_submit_sqes() holds a plug over the submission: the page read a
// forced-ra attempt starts on the submitter reaches the member when the
// submission ends, after the punt (rasync off) or the armed retry (rasync
// on), so a costlier punt or arm delays it by as much.
uint64_t member_queue_ns(bool rasync, uint64_t BufferedCosts::*step, uint64_t ns) {
    Rig rig(stack_toml("forced-ra", rasync, 0));
    rig.io().costs().*step = ns;
    TraceRecorder recorder;
    rig.stack->tracer().add_global_sink(&recorder);
    BufferedPath p = rig.read(1 << 20, 4096);
    EXPECT_EQ(p.issued_by, BufferedWhere::Submitter);
    for (const TraceEvent& e : recorder.events)
        if (e.action == TraceAction::Queue && e.op == Op::Read) return e.time_ns - p.submit_ns;
    ADD_FAILURE() << "no read reached the member";
    return 0;
}

TEST(BufferedIoTest, SubmitterReadsGoDownWhenTheSubmissionEnds) {
    const auto punt = &BufferedCosts::punt_ns;
    const auto arm = &BufferedCosts::arm_ns;
    EXPECT_EQ(member_queue_ns(false, punt, 5000) - member_queue_ns(false, punt, 1000), 4000u);
    EXPECT_EQ(member_queue_ns(true, arm, 5000) - member_queue_ns(true, arm, 1000), 4000u);
}

TEST(BufferedIoTest, ForcedRaIssuesOnePageWindows) {
    Rig rig(stack_toml("forced-ra", true, 0));
    rig.read(0, 4096);
    rig.read(4096 * 10, 4096);
    BufferedStats s = rig.io().stats();
    EXPECT_EQ(s.ra_windows[size_t(RaKind::Forced)], 2u);
    EXPECT_EQ(s.ra_pages[size_t(RaKind::Forced)], 2u);
    EXPECT_EQ(s.ra_window_sizes.at(1), 2u);
    EXPECT_EQ(s.pages_read, 2u);
    EXPECT_EQ(s.punts, 0u);
    EXPECT_EQ(s.callbacks_armed, 2u);
}

TEST(BufferedIoTest, SequentialReadsRampUpTheWindow) {
    Rig rig(stack_toml("c8d317aa", true, 128));
    std::vector<uint8_t> data = pattern(0, 512 * 1024);
    rig.direct_write(0, data);
    for (uint64_t off = 0; off < data.size(); off += 4096) {
        rig.read(off, 4096);
        ASSERT_EQ(0, memcmp(rig.last_data.data(), data.data() + off, 4096)) << off;
    }
    BufferedStats s = rig.io().stats();
    // mm/readahead.c from index 0 with 1-page reads and ra_pages 32: the
    // initial window of 4 (marker on page 1), then 8, 16, 32, 32, ...
    EXPECT_EQ(s.ra_windows[size_t(RaKind::Sync)], 1u);
    EXPECT_EQ(s.ra_window_sizes.at(4), 1u);
    EXPECT_EQ(s.ra_window_sizes.at(8), 1u);
    EXPECT_EQ(s.ra_window_sizes.at(16), 1u);
    EXPECT_GE(s.ra_window_sizes.at(32), 2u);
    EXPECT_GE(s.ra_windows[size_t(RaKind::Async)], 4u);
    EXPECT_EQ(s.misses, 1u);  // only the very first page missed
    EXPECT_EQ(s.hits, 127u);
    EXPECT_GT(s.inline_completions, 100u);
}

TEST(BufferedIoTest, ReadPastTheEndIsShort) {
    Rig rig(stack_toml("forced-ra", true, 0, "16m", "1m"));
    rig.read((1 << 20) - 1024, 4096);
    EXPECT_EQ(rig.last_error, 0);
    EXPECT_EQ(rig.last_resid, 3072u);
    rig.read(1 << 20, 4096);
    EXPECT_EQ(rig.last_resid, 4096u);
}

TEST(BufferedIoTest, UnalignedReadsReturnTheMembersData) {
    Rig rig(stack_toml("forced-ra", true, 0));
    std::vector<uint8_t> data = pattern(0, 1 << 20, 3);
    rig.direct_write(0, data);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 200; i++) {
        uint64_t off = rng() % (data.size() - 20000);
        uint64_t len = 1 + rng() % 20000;
        rig.read(off, len);
        ASSERT_EQ(rig.last_error, 0);
        ASSERT_EQ(0, memcmp(rig.last_data.data(), data.data() + off, len)) << off << " " << len;
    }
}

// An interrupted buffered run stops issuing, completes what it queued, and
// throws; nothing is left in flight and the stack runs the next job.
TEST(BufferedIoTest, InterruptedJobDrainsAndThrows) {
    Rig rig(stack_toml("c8d317aa", false, 0, "4m", "64m"));
    // 1 TiB: far more than the test runs
    FioJobSpec spec = closed_loop_job(Op::Read, true, 4096, 32, uint64_t(1) << 40, 0, 0, false);
    spec.end_fsync = true;
    int polls = 0;
    EXPECT_THROW(
        run_jobs_on(*rig.stack, rig.vclock, {spec}, InterruptPoll([&] { return ++polls == 3; })),
        RunInterrupted);
    EXPECT_EQ(polls, 3);
    EXPECT_EQ(rig.io().requests_in_flight(), 0u);
    EXPECT_EQ(rig.io().stats().double_completions, 0u);
    spec.io_size = 100 * 4096;
    FioJobResult r = run_jobs_on(*rig.stack, rig.vclock, {spec})[0];
    EXPECT_EQ(r.dir[kFioRead].ios, 100u);
    EXPECT_EQ(r.error, 0);
    EXPECT_EQ(rig.io().stats().double_completions, 0u);
}

// Every variant, readahead off and on, rasync on and off: a deep random
// read load completes every I/O exactly once, nothing left in flight.
class BufferedLoad : public ::testing::TestWithParam<std::tuple<const char*, bool, uint32_t>> {};

TEST_P(BufferedLoad, RandomReadsAtDepthCompleteOnce) {
    auto [variant, rasync, ra_kb] = GetParam();
    Rig rig(stack_toml(variant, rasync, ra_kb, "4m", "64m"));
    // 8 MiB: twice the cache (hits, misses and evictions)
    FioJobSpec spec = closed_loop_job(Op::Read, true, 4096, 64, 3000 * 4096, 8 << 20, 11, false);
    FioJobResult r = run_jobs_on(*rig.stack, rig.vclock, {spec})[0];
    EXPECT_EQ(r.dir[kFioRead].ios, 3000u);
    EXPECT_EQ(r.dir[kFioRead].errors, 0u);
    EXPECT_EQ(r.error, 0);
    EXPECT_EQ(rig.io().requests_in_flight(), 0u);
    BufferedStats s = rig.io().stats();
    EXPECT_EQ(s.double_completions, 0u);
    EXPECT_EQ(s.submitter_blocks, 0u);
    // 3000 reads and the job's cleanup flush (fio_job_model: the engine's sync at close)
    EXPECT_EQ(s.inline_completions + s.task_work_completions + s.worker_completions, 3001u);
    EXPECT_LE(s.worker_high_water, 64u);
    auto paths = rig.io().take_paths();
    ASSERT_EQ(paths.size(), 3001u);
    for (const BufferedPath& p : paths) {
        ASSERT_EQ(p.completions, 1u);
        if (rasync && std::string(variant) != "pre-c8d317aa") {
            ASSERT_FALSE(p.punted);
        }
        if (!rasync) {
            ASSERT_EQ(p.callbacks_armed, 0u);
        }
    }
    EXPECT_GT(rig.io().cache().stats().evictions, 0u);
}

INSTANTIATE_TEST_SUITE_P(Variants, BufferedLoad,
                         ::testing::Combine(::testing::Values("pre-c8d317aa", "c8d317aa",
                                                              "forced-ra"),
                                            ::testing::Bool(), ::testing::Values(0u, 128u)));

// The thread's shape on the virtual clock with the nvme model: where the
// submitter's time goes decides the IOPS at depth.
double sweep_iops(const char* variant, bool rasync, uint32_t depth) {
    Rig rig(stack_toml(variant, rasync, 0, "1g", "1g"));
    uint64_t total = uint64_t(std::max<uint32_t>(400, depth * 40)) * 4096;
    FioJobSpec spec = closed_loop_job(Op::Read, true, 4096, depth, total, 0, 3, false);
    return iops_of(run_jobs_on(*rig.stack, rig.vclock, {spec})[0], kFioRead);
}

// Prints the sweep: --gtest_also_run_disabled_tests --gtest_filter='*PrintVirtualSweep'
TEST(BufferedIoTest, DISABLED_PrintVirtualSweep) {
    for (uint32_t qd : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
        printf("QD %3u", qd);
        for (const char* v : {"pre-c8d317aa", "c8d317aa", "forced-ra"})
            for (bool rasync : {true, false}) printf("  %8.0f", sweep_iops(v, rasync, qd));
        printf("\n");
    }
}

TEST(BufferedIoTest, VirtualSweepHasTheThreadsShape) {
    // c8d317aa: at depth, the worker path (3.3 us of submitter per I/O)
    // beats rasync (5.3 us); forced-ra: rasync (5.3) beats the worker path
    // (6.3: the submitter also issues the read).
    for (uint32_t qd : {32u, 128u}) {
        EXPECT_GT(sweep_iops("c8d317aa", false, qd), 1.2 * sweep_iops("c8d317aa", true, qd)) << qd;
        EXPECT_GT(sweep_iops("forced-ra", true, qd), 1.1 * sweep_iops("forced-ra", false, qd))
            << qd;
    }
    double a = sweep_iops("c8d317aa", true, 1), b = sweep_iops("c8d317aa", false, 1);
    EXPECT_NEAR(b / a, 0.95, 0.05);
}

// ---------------------------------------------------------------- writes

TEST(BufferedIoTest, WritesReachTheMembersAfterFsync) {
    Rig rig(stack_toml("forced-ra", true, 128));
    std::vector<uint8_t> model = pattern(0, 2 << 20, 1);
    rig.direct_write(0, model);
    std::mt19937_64 rng(9);
    for (int i = 0; i < 300; i++) {
        uint64_t off = rng() % (model.size() - 10000);
        uint64_t len = 1 + rng() % 10000;  // partial pages: read-modify-write
        std::vector<uint8_t> d = pattern(off, len, uint32_t(i + 7));
        rig.buffered(Op::Write, off, len, d.data());
        ASSERT_EQ(rig.last_error, 0);
        memcpy(model.data() + off, d.data(), len);
    }
    BufferedStats s = rig.io().stats();
    EXPECT_GT(s.read_for_write, 0u);
    EXPECT_GT(rig.io().cache().nr_dirty(), 0u);
    // The cache already has the new data.
    rig.read(12345, 100000);
    EXPECT_EQ(0, memcmp(rig.last_data.data(), model.data() + 12345, 100000));
    // fsync: everything on the member.
    rig.run_sync([&] { rig.stack->fsync(rig.task, 99); }, 99);
    EXPECT_EQ(rig.io().cache().nr_dirty(), 0u);
    EXPECT_EQ(rig.io().cache().nr_writeback(), 0u);
    EXPECT_EQ(rig.direct_read(0, model.size()), model);
}

// A write-back that fails with nobody syncing: the job end's sync counts its
// pages once (the engine's stderr line), and a later fsync still reports it.
TEST(BufferedIoTest, SilentWritebackFailureIsCountedOnceAndStillReported) {
    Rig rig(stack_toml("forced-ra", true, 128) + "\n[members.faults]\nfail_nth = [1]\n");
    std::vector<uint8_t> d = pattern(0, 8 * 4096, 3);
    rig.buffered(Op::Write, 0, d.size(), d.data());
    ASSERT_EQ(rig.last_error, 0);
    EXPECT_EQ(rig.stack->sync_buffered(), 8u);  // one bio of 8 pages failed
    EXPECT_EQ(rig.stack->sync_buffered(), 0u);  // counted once
    rig.stack->begin_batch(rig.task);
    rig.stack->fsync(rig.task, 5);
    rig.stack->commit(rig.task);
    rig.stack->drain();
    ASSERT_EQ(rig.task.completions.size(), 1u);
    EXPECT_EQ(rig.task.completions[0].error, -EIO);  // the errseq was not consumed
}

// errseq: a failed write-back is reported once to each job (file) that had
// the device open, and not to one that opens after an fsync has seen it.
TEST(BufferedIoTest, WritebackErrorIsReportedOncePerOpenFile) {
    Rig rig(stack_toml("forced-ra", true, 128) + "\n[members.faults]\nfail_nth = [1]\n");
    auto fsync_of = [&](TaskContext& t) {
        rig.stack->begin_batch(t);
        rig.stack->fsync(t, 5);
        rig.stack->commit(t);
        rig.stack->drain();
        EXPECT_EQ(t.completions.size(), 1u);
        int32_t error = t.completions.empty() ? 1 : t.completions[0].error;
        t.completions.clear();
        return error;
    };
    auto write_of = [&](TaskContext& t, uint64_t offset) {
        std::vector<uint8_t> d = pattern(offset, 4096, 3);
        rig.stack->begin_batch(t);
        rig.stack->queue_buffered(t, Op::Write, offset, d.size(), d.data(), 1);
        rig.stack->commit(t);
        rig.stack->drain();
        ASSERT_EQ(t.completions.size(), 1u);
        EXPECT_EQ(t.completions[0].error, 0);
        t.completions.clear();
    };
    TaskContext a, b, c;
    a.pid = 7;
    b.pid = 8;
    c.pid = 9;
    write_of(a, 0);
    write_of(b, 4096);
    EXPECT_EQ(fsync_of(a), -EIO);  // the write-back of both pages failed
    EXPECT_EQ(fsync_of(b), -EIO);  // b had the file open too: it hears of it as well
    EXPECT_EQ(fsync_of(a), 0);     // once per file
    write_of(c, 8192);             // opened after the error was seen
    EXPECT_EQ(fsync_of(c), 0);
}

// sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER) writes back the dirty
// pages of its range only, and completes once they are on the member.
TEST(BufferedIoTest, SyncFileRangeWritesBackItsRangeOnly) {
    Rig rig(stack_toml("forced-ra", true, 0));
    std::vector<uint8_t> a = pattern(0, 16 << 10, 3), b = pattern(32 << 10, 16 << 10, 4);
    rig.buffered(Op::Write, 0, a.size(), a.data());
    rig.buffered(Op::Write, 32 << 10, b.size(), b.data());
    ASSERT_EQ(rig.io().cache().nr_dirty(), 8u);
    rig.run_sync([&] { rig.stack->sync_file_range(rig.task, 32 << 10, 16 << 10, 1 | 2 | 4, 5); },
                 5);
    EXPECT_EQ(rig.io().cache().nr_dirty(), 4u);  // [0, 16k) is still dirty
    EXPECT_EQ(rig.io().cache().nr_writeback(), 0u);
    EXPECT_EQ(rig.io().stats().writeback_pages, 4u);
    EXPECT_EQ(rig.io().stats().sync_ranges, 1u);
    EXPECT_EQ(rig.direct_read(32 << 10, b.size()), b);
}

// SYNC_FILE_RANGE_WRITE alone starts the write-back and completes without
// waiting for it; with WAIT_AFTER the same call waits for the member.
TEST(BufferedIoTest, SyncFileRangeWriteOnlyDoesNotWait) {
    auto sync_time = [](unsigned flags) {
        Rig rig(stack_toml("forced-ra", true, 0));
        std::vector<uint8_t> a = pattern(0, 16 << 10, 5);
        rig.buffered(Op::Write, 0, a.size(), a.data());
        // length 0: to the end
        rig.run_sync([&] { rig.stack->sync_file_range(rig.task, 0, 0, flags, 6); }, 6);
        EXPECT_EQ(rig.io().cache().nr_dirty(), 0u);
        EXPECT_EQ(rig.io().stats().writeback_pages, 4u);
        EXPECT_EQ(rig.direct_read(0, a.size()), a);
        auto paths = rig.io().take_paths();
        return paths.empty() ? 0 : paths.back().complete_ns - paths.back().submit_ns;
    };
    uint64_t write_only = sync_time(2), write_and_wait = sync_time(2 | 4);
    EXPECT_LT(write_only, 10'000u);                   // CPU steps only
    EXPECT_GT(write_and_wait, write_only + 18'000u);  // the nvme model's 18 us write command
}

// A task whose device was opened O_SYNC/O_DSYNC (fio's sync=) gets its
// buffered write back once the pages are on the member (generic_write_sync).
TEST(BufferedIoTest, DsyncWriteCompletesWrittenBack) {
    Rig rig(stack_toml("forced-ra", true, 0));
    rig.task.dsync = true;
    std::vector<uint8_t> a = pattern(4096, 3 * 4096, 8);
    BufferedPath p = rig.buffered(Op::Write, 4096, a.size(), a.data());
    EXPECT_EQ(rig.last_error, 0);
    EXPECT_EQ(rig.io().cache().nr_dirty(), 0u);
    EXPECT_EQ(rig.io().cache().nr_writeback(), 0u);
    EXPECT_EQ(rig.io().stats().writeback_pages, 3u);
    EXPECT_GT(p.complete_ns - p.submit_ns, 18'000u);  // the nvme model's write command
    rig.task.dsync = false;
    rig.buffered(Op::Write, 64 << 10, a.size(), a.data());
    EXPECT_EQ(rig.io().cache().nr_dirty(), 3u);  // an ordinary write stays in the cache
}

TEST(BufferedIoTest, DirtyLimitThrottlesAndSyncWritesEverything) {
    // A 1 MiB cache (256 pages, dirty limit 51) and 4 MiB of writes:
    // write-back, throttling and eviction all happen; sync() at the end
    // leaves nothing behind.
    Rig rig(stack_toml("forced-ra", true, 128, "1m", "16m"));
    FioJobSpec spec = closed_loop_job(Op::Write, true, 4096, 16, 4 << 20, 4 << 20, 0, false);
    FioJobResult r = run_jobs_on(*rig.stack, rig.vclock, {spec})[0];
    EXPECT_EQ(r.dir[kFioWrite].errors, 0u);
    EXPECT_EQ(r.error, 0);
    EXPECT_EQ(r.dir[kFioWrite].ios, 1024u);
    BufferedStats s = rig.io().stats();
    EXPECT_GT(s.writeback_pages, 0u);
    EXPECT_GT(s.throttled_writes, 0u);
    EXPECT_LE(rig.io().cache().nr_pages(), rig.io().cache().capacity_pages() + 64);
    rig.stack->sync_buffered();
    EXPECT_EQ(rig.io().cache().nr_dirty(), 0u);
    EXPECT_EQ(rig.io().cache().nr_writeback(), 0u);
    // invalidate: the cache empties, and reads come back from the member.
    rig.stack->invalidate();
    EXPECT_EQ(rig.io().cache().nr_pages(), 0u);
}

TEST(BufferedIoTest, WriteThenInvalidateThenReadBack) {
    Rig rig(stack_toml("c8d317aa", false, 0));
    std::vector<uint8_t> d = pattern(4096 * 3, 4096 * 5, 42);
    rig.buffered(Op::Write, 4096 * 3, d.size(), d.data());
    rig.stack->invalidate();
    EXPECT_EQ(rig.io().cache().nr_pages(), 0u);
    rig.read(4096 * 3, d.size());
    EXPECT_EQ(rig.last_data, d);
    EXPECT_EQ(rig.direct_read(4096 * 3, d.size()), d);
    rig.buffered(Op::Write, 64ull << 20, 4096, d.data());
    EXPECT_EQ(rig.last_error, -ENOSPC);
}

// A direct write drops the range's cached pages (kiocb_invalidate_pages):
// a later buffered read of it returns what the direct write put there, and
// pages outside it stay cached.
TEST(BufferedIoTest, DirectWriteInvalidatesTheCachedRange) {
    Rig rig(stack_toml("c8d317aa", false, 0));
    std::vector<uint8_t> old_data = pattern(0, 4096 * 8, 1);
    rig.buffered(Op::Write, 0, old_data.size(), old_data.data());
    rig.stack->sync_buffered();  // clean, and still cached
    std::vector<uint8_t> fresh = pattern(4096 * 2, 4096 * 3, 2);
    rig.direct_write(4096 * 2, fresh);
    EXPECT_EQ(rig.io().cache().nr_pages(), 5u);
    rig.read(4096 * 2, fresh.size());
    EXPECT_EQ(rig.last_data, fresh);
    rig.read(0, 4096);
    EXPECT_EQ(rig.last_data, std::vector<uint8_t>(old_data.begin(), old_data.begin() + 4096));
}

// A direct read first writes back the dirty pages of its range and waits
// (kiocb_write_and_wait): it returns the buffered write's data.
TEST(BufferedIoTest, DirectReadSeesDirtyPagesOfItsRange) {
    Rig rig(stack_toml("c8d317aa", false, 0));
    std::vector<uint8_t> d = pattern(4096, 4096 * 2, 3);
    rig.buffered(Op::Write, 4096, d.size(), d.data());
    ASSERT_EQ(rig.io().cache().nr_dirty(), 2u);
    EXPECT_EQ(rig.direct_read(4096, d.size()), d);
    EXPECT_EQ(rig.io().cache().nr_dirty(), 0u);
}

// A direct write over part of a dirty page keeps the rest of that page's
// buffered data: the page is written back before it is dropped.
TEST(BufferedIoTest, DirectWriteOverPartOfADirtyPageKeepsTheRest) {
    Rig rig(stack_toml("c8d317aa", false, 0));
    std::vector<uint8_t> d = pattern(0, 4096, 4);
    rig.buffered(Op::Write, 0, d.size(), d.data());
    std::vector<uint8_t> head(512, 0x5a);
    rig.direct_write(0, head);
    std::copy(head.begin(), head.end(), d.begin());
    rig.read(0, 4096);
    EXPECT_EQ(rig.last_data, d);
    EXPECT_EQ(rig.direct_read(0, 4096), d);
}

TEST(BufferedIoTest, StatsJsonHasThePageCacheObject) {
    Rig rig(stack_toml("forced-ra", false, 0));
    rig.read(0, 4096);
    std::string j = rig.stack->stats_json();
    EXPECT_NE(j.find("\"page_cache\": {\"enabled\": true"), std::string::npos);
    for (const char* key : {"\"hits\"", "\"misses\"", "\"readahead\"", "\"window_sizes\"",
                            "\"inline_completions\"", "\"callbacks_armed\"", "\"punts\"",
                            "\"worker_high_water\"", "\"variant\": \"forced-ra\""})
        EXPECT_NE(j.find(key), std::string::npos) << key;
}

// ---------------------------------------------------------------- real threads

TEST(BufferedIoTest, RealWorkerThreadsOnTheRealClock) {
    // RAM member, no timing model: real io-wq threads punt, sleep on page
    // locks and copy; every read returns the member's data.
    for (const char* variant : {"c8d317aa", "pre-c8d317aa", "forced-ra"}) {
        for (bool rasync : {false, true}) {
            RealClock clock;
            Rig rig(stack_toml(variant, rasync, 0, "2m", "16m", ""), &clock);
            std::vector<uint8_t> data = pattern(0, 4 << 20, 17);
            rig.direct_write(0, data);
            rig.io().set_iodepth(16);
            std::vector<Buffer> bufs;
            for (int i = 0; i < 16; i++) bufs.push_back(aligned(4096));
            std::vector<uint64_t> where(16);
            std::vector<int> free_slots;
            for (int i = 0; i < 16; i++) free_slots.push_back(i);
            std::mt19937_64 rng(1);
            int issued = 0, done = 0;
            const int total = 2000;
            while (done < total) {
                rig.stack->begin_batch(rig.task);
                while (issued < total && !free_slots.empty()) {
                    int slot = free_slots.back();
                    free_slots.pop_back();
                    where[size_t(slot)] = (rng() % 1024) * 4096;
                    rig.stack->queue_buffered(rig.task, Op::Read, where[size_t(slot)], 4096,
                                              bufs[size_t(slot)].get(), uint64_t(slot));
                    issued++;
                }
                rig.stack->commit(rig.task);
                rig.stack->reap(rig.task, 1, 5'000'000'000ull);
                ASSERT_FALSE(rig.task.completions.empty()) << variant << " stalled";
                for (const IoCompletion& c : rig.task.completions) {
                    ASSERT_EQ(c.error, 0);
                    size_t slot = size_t(c.cookie);
                    ASSERT_EQ(0, memcmp(bufs[slot].get(), data.data() + where[slot], 4096));
                    free_slots.push_back(int(slot));
                    done++;
                }
                rig.task.completions.clear();
            }
            rig.stack->drain();
            BufferedStats s = rig.io().stats();
            EXPECT_EQ(s.double_completions, 0u);
            EXPECT_EQ(rig.io().requests_in_flight(), 0u);
            if (!rasync || std::string(variant) == "pre-c8d317aa") {
                EXPECT_GT(s.worker_completions, 0u) << variant;
                EXPECT_GE(s.worker_high_water, 1u);
                EXPECT_LE(s.worker_high_water, 16u);
            } else {
                EXPECT_EQ(s.punts, 0u) << variant;
            }
        }
    }
}

}  // namespace
}  // namespace mdsplit
