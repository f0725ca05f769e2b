// fio jobs on the virtual clock (`harness simulate JOB.fio`): what fio's
// backend.c do_io() loop does for one job (pick a direction, block size and
// offset, queue a batch, commit it, reap, think, limit the rate), for a set
// of jobs on one VirtualClock, each job on a Stack (jobs sharing a device
// share one Stack, as thread=1 jobs share one in the engine). No fio
// headers: the harness parses the job file and fills FioJobSpec.
//
// Time: the clock only moves to the next timer of a stack or the next
// moment a job can act (its start, the end of its CPU work, a think time,
// the rate limit), so a run costs per event, not per simulated second.
// fio's own CPU work is a stated constant per I/O (fio_submit_ns when an
// I/O is prepared, fio_complete_ns when it is reaped; the seed-003 fit,
// BufferedCosts). slat = commit - prepare, clat = completion - commit,
// lat = slat + clat, as fio's io_u start_time / issue_time.
//
// Trims (rw=trim, randtrim, trimwrite, randtrimwrite) are Op::Discard
// through Stack::queue, as the engine queues DDIR_TRIM; buffered jobs never
// trim (the engine refuses them at setup, and so does the harness).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "sim/run_interrupt.h"
#include "stack/stack.h"

namespace mdsplit {

// fio's data directions (DDIR_READ, DDIR_WRITE, DDIR_TRIM): the index of a
// direction's block sizes and of its results.
enum FioDirection : size_t { kFioRead = 0, kFioWrite = 1, kFioTrim = 2, kFioDirections = 3 };

// What a job does besides reads and writes (fio's td_ddir TRIM bits).
enum class FioTrim : uint8_t {
    None,
    Only,       // rw=trim, randtrim: trims alone (rwmixread does not apply)
    ThenWrite,  // rw=trimwrite, randtrimwrite: each block trimmed, then written
};

// One block size of a bssplit list (or the only one) and its weight.
struct FioBlockSize {
    uint64_t bytes = 4096;
    uint32_t weight = 100;
};

// fio's ERROR_TYPE_*_BIT (fio.h), for continue_on_error.
enum FioErrorType : uint32_t {
    kFioErrorRead = 1u << 0,
    kFioErrorWrite = 1u << 1,
    kFioErrorVerify = 1u << 2
};

struct FioJobSpec {
    std::string name;
    // What messages about the job name it by: its caller's name for it
    // (run_fio_jobs: "run_fio_jobs: jobs[2]"), "" = "simulate: job <name>".
    std::string where;
    size_t stack = 0;  // index into the stacks given to run_fio_jobs()
    size_t phase = 0;  // stonewall phase: starts when every job of earlier phases is done
    uint32_t pid = 0;
    SchedIdentity sched;

    // What to do (fio's rw, rwmixread, bs/bsrange/bssplit, blockalign).
    bool random = false;
    uint32_t read_pct = 100;  // 100 = reads only, 0 = writes only (FioTrim::None only)
    FioTrim trim = FioTrim::None;
    // Per direction (FioDirection): a bssplit list, or one entry; with
    // bs_max > the single entry's size, a bsrange drawn as fio's get_next_buflen().
    std::array<std::vector<FioBlockSize>, kFioDirections> bs;
    std::array<uint64_t, kFioDirections> bs_max = {0, 0, 0};
    std::array<uint64_t, kFioDirections> align = {0, 0, 0};  // blockalign (0 = smallest bs)
    // Where the region starts, as fio's get_start_offset() (filesetup.c):
    // offset (bytes) or offset_pct (offset=N%, of the device), plus subjob x
    // offset_increment (bytes) or x offset_increment_pct (of the device); with
    // a percentage the sum is rounded up to the smallest block size (td_min_bs).
    uint64_t offset = 0;
    uint32_t offset_pct = 0;  // 0 = offset is in bytes
    uint64_t offset_increment = 0;
    uint32_t offset_increment_pct = 0;  // 0 = offset_increment is in bytes
    uint32_t subjob = 0;                // numjobs: this job's subjob number
    uint64_t size = 0;                  // region (0 = device size - offset)
    uint64_t io_size = 0;               // bytes per loop (0 = size)
    // size=N% / io_size=N% (filesetup.c setup_files()): the region is N% of
    // the device (at most its rest past the offset, rounded down to
    // td_min_bs); the bytes per loop N% of the region. 0 (or 100) = none.
    uint32_t size_pct = 0;
    uint32_t io_size_pct = 0;
    uint32_t loops = 1;
    bool norandommap = false;
    uint64_t seed = 0;  // randseed (randrepeat: a fixed one)

    // How (iodepth, iodepth_batch_submit, direct, fsync, end_fsync, ...).
    uint32_t iodepth = 1;
    uint32_t batch = 1;
    bool direct = true;
    bool invalidate = false;          // buffered: drop the page cache at start
    bool dsync = false;               // fio's sync=: the device opened O_SYNC / O_DSYNC
    Fadvise fadvise = Fadvise::None;  // fio's fadvise_hint, given on the file at open
    uint32_t fsync_blocks = 0;        // fsync=N: an fsync after every N writes
    bool end_fsync = false;           // one fsync at the end of the job
    uint64_t rate_iops = 0;           // 0 = unlimited
    uint64_t think_ns = 0;            // thinktime
    uint32_t think_blocks = 1;        // thinktime_blocks
    bool verify = false;              // verify=<any> + do_verify: read back and compare
    // false: the verify reads are issued and timed but not compared (simulate
    // --no-data: members that keep no data have nothing to compare with).
    bool verify_compare = true;
    // continue_on_error: the error types (FioErrorType bits) that do not end
    // the job (0 = none, fio's default: the first I/O error ends it).
    uint32_t continue_on_error = 0;
    // fio's own CPU work per I/O prepared / reaped; unset = the stack's
    // [cpu.buffered] fio_submit / fio_complete (BufferedCosts).
    std::optional<uint64_t> fio_submit_ns;
    std::optional<uint64_t> fio_complete_ns;

    // When (startdelay from the start of the run, as fio counts it from its
    // genesis; runtime, time_based, ramp_time).
    uint64_t start_delay_ns = 0;
    uint64_t runtime_ns = 0;
    uint64_t ramp_ns = 0;
    bool time_based = false;
};

// A latency statistic as fio keeps one: min/max/sum/sum of squares, and
// fio's log-linear histogram (stat.h FIO_IO_U_PLAT_*: 29 groups x 64).
struct FioLatency {
    static constexpr unsigned kBits = 6;
    static constexpr unsigned kVal = 1u << kBits;
    static constexpr unsigned kGroups = 29;
    static constexpr unsigned kBuckets = kGroups * kVal;
    uint64_t n = 0, min = ~uint64_t(0), max = 0;
    double sum = 0, sum_sq = 0;
    std::vector<uint64_t> hist;  // kBuckets, allocated at first sample
    void add(uint64_t ns);
    static unsigned bucket_of(uint64_t ns);  // stat.c plat_val_to_idx()
};

struct FioDirectionResult {
    uint64_t ios = 0, bytes = 0, errors = 0;
    // fio's ts.runtime[ddir] (backend.c update_runtime()), in ns: the time of
    // the phases that moved this direction's bytes (a verify phase: reads).
    uint64_t runtime_ns = 0;
    FioLatency slat, clat, lat;
    // io_u_mark_latency(): clat counts in fio's ns/us/ms buckets
    // (2,4,10,20,50,100,250,500,750,1000 [, 2000, >=2000 ms]).
    std::array<uint64_t, 10> lat_ns{}, lat_us{};
    std::array<uint64_t, 12> lat_ms{};
};

struct FioJobResult {
    std::array<FioDirectionResult, kFioDirections> dir;  // read, write, trim
    uint64_t start_ns = 0;                               // the job's first I/O could be prepared
    uint64_t end_ns = 0;                                 // the job ended
    uint64_t runtime_ns = 0;                             // end - start - ramp (fio's job runtime)
    uint64_t syncs = 0;
    uint64_t verify_errors = 0;  // bytes that did not read back as written
    int32_t error = 0;           // the error that ended the job (negative errno), 0 = none
    // Verify reads not compared (FioJobSpec::verify_compare false), in bytes.
    uint64_t verify_unchecked = 0;
    // Pages whose write-back failed that no sync reported, counted by the
    // engine's cleanup (its stderr line; the job's error stays as it was).
    uint64_t silent_writeback_pages = 0;
    // Errors continue_on_error let pass (fio's total_err_count, first_error).
    uint64_t total_err = 0;
    int32_t first_error = 0;
};

// Runs the jobs on `clock`, which every stack's loop must use. The stacks
// are opened when their first job starts (open_stack(i), the engine's
// setup) and closed once their last job has ended (stack_done(i): the
// sidecars are written then, as the engine writes them when the device's
// last job leaves). Results are in job order. Throws std::invalid_argument,
// once every job has ended, for a run that cannot end as asked: a
// time_based job on a stack where no virtual time passes, or a clock past
// kTimeHorizonNs (virtual_time.h); RunInterrupted, once every job has
// drained, when `interrupt` asked the run to end (fio's Ctrl-C: no job
// starts any more, the running ones stop issuing and skip their verify
// phase, sidecars are still written).
struct FioRunHooks {
    Stack* (*open_stack)(void* ctx, size_t stack) = nullptr;
    void (*stack_done)(void* ctx, size_t stack) = nullptr;
    void* ctx = nullptr;
};
std::vector<FioJobResult> run_fio_jobs(size_t nr_stacks, VirtualClock& clock,
                                       const std::vector<FioJobSpec>& jobs,
                                       const FioRunHooks& hooks, InterruptPoll interrupt = {});

}  // namespace mdsplit
