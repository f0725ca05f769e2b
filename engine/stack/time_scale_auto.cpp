#include "stack/time_scale_auto.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "stack/shared_stack.h"
#include "stack/stack.h"

namespace mdsplit {

namespace {

constexpr uint64_t kMinRunNs = 150'000'000;    // each factor runs at least this long
constexpr uint64_t kMaxRunNs = 1'000'000'000;  // ... and at most this
constexpr uint64_t kMinRequestsPerJob = 20;    // ... until each job did this many I/Os
constexpr int kMaxTries = 10;
constexpr double kHeadroom = 4;  // the factor taken: this times the one that kept up
constexpr uint64_t kMaxStaggerNs = 250'000'000;  // start delays further apart are compressed

// When a job starts in the probe, after the device's first (fio's
// startdelay relative to the earliest): as far apart as in the job file,
// or in proportion within kMaxStaggerNs, so that a probe stays short.
uint64_t start_offset(const AutoScaleJob& job, uint64_t first, uint64_t last) {
    uint64_t offset = job.start_ns - first, span = last - first;
    if (span <= kMaxStaggerNs) return offset;
    return uint64_t(double(offset) / double(span) * double(kMaxStaggerNs));
}

// The stack with members that store nothing, at factor k.
StackConfig calibration_copy(const StackConfig& config, double k) {
    StackConfig c = config;
    for (MemberConfig& m : c.members) {
        m.backend = BackendKind::Null;
        m.path.clear();
        m.faults.reset();
    }
    c.device.time_scale = k;
    c.device.time_scale_auto = false;
    return c;
}

// One job's submitter: keeps iodepth I/Os in flight until `until`,
// sleeping its think time after each completion.
void run_submitter(SharedStack& stack, const AutoScaleJob& job, uint32_t pid, uint64_t start,
                   uint64_t until, Clock& clock, uint64_t device_bytes, uint64_t& done) {
    for (uint64_t now = clock.now_ns(); now < start; now = clock.now_ns()) {
        timespec ts{time_t((start - now) / 1'000'000'000), long((start - now) % 1'000'000'000)};
        nanosleep(&ts, nullptr);
    }
    TaskContext task;
    task.pid = pid;  // one task per job: bfq gives each its own queue, as fio's threads
    task.sched = job.sched;
    task.lag = stack.attach_lag_job(job.name, job.iodepth, job.think_ns);
    uint64_t bs = std::max<uint64_t>(4096, job.block_bytes / 4096 * 4096);
    uint64_t blocks = std::max<uint64_t>(1, device_bytes / bs);
    size_t depth = std::max<uint32_t>(1, job.iodepth);
    auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(4096, bs * depth));
    std::vector<uint64_t> free_slots;
    for (size_t i = 0; i < depth; i++) free_slots.push_back(i);
    std::vector<IoCompletion> out;
    uint64_t next = 0, rng = 0x9E3779B97F4A7C15ull;
    std::map<uint64_t, uint64_t> slot_of;  // cookie -> buffer slot
    uint64_t cookie = 1;
    while (clock.now_ns() < until || done < kMinRequestsPerJob) {
        if (clock.now_ns() >= until + kMaxRunNs) break;
        while (!free_slots.empty()) {
            uint64_t block = next++ % blocks;
            if (job.random) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                block = rng % blocks;
            }
            uint64_t slot = free_slots.back();
            free_slots.pop_back();
            slot_of[cookie] = slot;
            stack.queue(task, job.op, block * bs, bs, buffer + slot * bs, cookie++);
        }
        stack.commit(task);
        out.clear();
        stack.reap(task, 1, 10'000'000, out);
        for (const IoCompletion& c : out) {
            free_slots.push_back(slot_of[c.cookie]);
            slot_of.erase(c.cookie);
            done++;
            if (job.think_ns) {
                timespec ts{time_t(job.think_ns / 1'000'000'000),
                            long(job.think_ns % 1'000'000'000)};
                nanosleep(&ts, nullptr);
            }
        }
    }
    stack.drain(task);
    stack.task_exited(task);
    std::free(buffer);
}

// The host's share of a calibration run at factor k.
TimeScaleCalibration::Try measure(const StackConfig& config, const std::vector<AutoScaleJob>& jobs,
                                  Clock& clock, double k, const HostLagOptions&) {
    StackOptions so;
    so.writable = true;
    so.create_members = false;
    auto stack = std::make_unique<SharedStack>(
        std::make_unique<Stack>(calibration_copy(config, k), clock, so), jobs.size() == 1);
    for (size_t i = 0; i < jobs.size(); i++) stack->attach();
    uint64_t first = jobs[0].start_ns, last = jobs[0].start_ns;
    for (const AutoScaleJob& j : jobs) {
        first = std::min(first, j.start_ns);
        last = std::max(last, j.start_ns);
    }
    uint64_t t0 = clock.now_ns();
    // every job runs kMinRunNs at least
    uint64_t until = t0 + std::min(last - first, kMaxStaggerNs) + kMinRunNs;
    std::vector<uint64_t> done(jobs.size(), 0);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jobs.size(); i++)
        threads.emplace_back([&, i] {
            run_submitter(*stack, jobs[i], uint32_t(i + 1), t0 + start_offset(jobs[i], first, last),
                          until, clock, stack->size_bytes(), done[i]);
        });
    for (std::thread& t : threads) t.join();
    uint64_t requests = 0;
    for (uint64_t d : done) requests += d;
    return {k, stack->stack().host_lag().host_share(), requests};
}

}  // namespace

TimeScaleCalibration calibrate_time_scale(const StackConfig& config,
                                          const std::vector<AutoScaleJob>& jobs, Clock& clock,
                                          const HostLagOptions& options) {
    TimeScaleCalibration c;
    c.unmodelled = !config.models_time();
    if (c.unmodelled) return c;
    uint64_t start = clock.now_ns();
    // Upwards only: each next factor from the share measured at the last
    // (time_scale_for_share), at least twice it, until one keeps up in two
    // probes in a row. A factor below one that kept up is never taken on a
    // lucky measurement: on a shared host the share of a short probe varies
    // by several points, and a wake-up delayed by milliseconds (another
    // process on the CPU) may fall in one probe and not the next.
    // The factor taken (with headroom) is probed too: the share is not
    // monotonic in the factor (measured, the RAID5 dd of seed 000: 2-3 % at
    // 2-8, 14-25 % at 16, 2-3 % at 256), so a factor that kept up says
    // nothing of four times it.
    double k = 1;
    bool kept_up_once = false;
    for (int i = 0; i < kMaxTries; i++) {
        TimeScaleCalibration::Try t = measure(config, jobs, clock, k, options);
        c.tried.push_back(t);
        c.time_scale = k;
        bool keeps_up = t.host_share <= options.target_share;
        if (k >= 1000) break;
        if (keeps_up && c.kept_up_twice > 0) break;  // the headroom factor kept up
        if (keeps_up && kept_up_once) {
            // Headroom: the probe leaves out fio's own per-I/O work, and a
            // scheduler's later regime (bfq's injection once every writer
            // runs) costs the host more than its first fraction of a second.
            c.kept_up_twice = k;
            k = c.time_scale = std::min(1000.0, k * kHeadroom);
            continue;
        }
        if (!keeps_up) c.kept_up_twice = 0;
        kept_up_once = keeps_up;
        if (!keeps_up)
            k = std::min(1000.0, std::max(k * 2, time_scale_for_share(k, t.host_share,
                                                                      options.target_share)));
        c.time_scale = k;
    }
    c.took_ns = clock.now_ns() - start;
    return c;
}

}  // namespace mdsplit
