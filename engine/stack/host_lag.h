// Host lag: how late the real clock ran against the model, per fio I/O,
// per job and per device, split by cause (docs/sidecar-lag.md defines every
// figure). On the real clock a modelled device completes each request at
// its modelled time unless the host is late: the fio thread submits later
// than a host that kept up would (submission lag), the event loop runs a
// model's completion or hands it to fio late (completion lag), or the real
// backend finishes after the modelled time (backend lag). When the host's
// share of the run passes a threshold the device is host-bound: fio's
// figures are this machine's, not the model's, and slow motion
// (time_scale) by the factor suggested_time_scale() computes from the
// measured lag lets the host keep up. On the virtual clock every lag is 0.
//
// Hooks: TimedBackend reports each modelled member request (LatenessProbe);
// Stack calls queued() / completed() for each fio I/O and handed() when fio
// takes its completions; the fio glue attaches a job per submitter.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/event_loop.h"
#include "base/json_writer.h"
#include "core/block/task_context.h"
#include "core/drivers/lateness_probe.h"
#include "stack/response_order.h"

namespace mdsplit {

// Nanosecond samples in log-linear buckets (32 per power of two: within
// 3 %), for percentiles in constant memory.
class LagHistogram {
public:
    void record(uint64_t ns);
    uint64_t count() const { return count_; }
    uint64_t max() const { return max_; }
    uint64_t sum() const { return sum_; }
    // The smallest bucket value at or above fraction p of the samples
    // (never above max()); 0 without samples.
    uint64_t percentile(double p) const;
    // {"p50_ns", "p99_ns", "max_ns", "mean_ns"}
    void write_json(JsonWriter& j) const;

private:
    static constexpr int kSubBits = 5;
    static constexpr int kSub = 1 << kSubBits;
    static size_t bucket_of(uint64_t ns);
    static uint64_t value_of(size_t bucket);
    // Up to 2^40 ns (18 minutes); longer lags count in the last bucket.
    static constexpr size_t kBuckets = 40 * kSub;
    std::array<uint32_t, kBuckets> buckets_{};
    uint64_t count_ = 0, max_ = 0, sum_ = 0;
};

// The thresholds of the verdict (docs/sidecar-lag.md).
struct HostLagOptions {
    double late_fraction = 0.05;     // late: lag above this fraction of the modelled service time
    double host_bound_share = 0.05;  // host-bound: the host's share of the run's time above this
    double target_share = 0.025;     // a suggested time_scale aims at this share
};

// What time_scale = "auto" measured (time_scale_auto.h): each factor tried
// with the host's share of its calibration run, and the one chosen.
struct TimeScaleCalibration {
    struct Try {
        double time_scale;
        double host_share;
        uint64_t requests;
    };
    std::vector<Try> tried;
    double time_scale = 1.0;
    double kept_up_twice = 0;  // the factor that kept up twice (0: none)
    // Nothing in the stack is modelled (no member timing model, no [cpu]):
    // no factor slows anything down, so 1 without a probe.
    bool unmodelled = false;
    uint64_t took_ns = 0;
    // One stderr line: "mdsplit: md0: time_scale = "auto": 16 (...)".
    std::string line(const std::string& device) const;
    void write_json(JsonWriter& j) const;
};

// Lag figures of one scope: a job, the virtual device, a member.
struct LagFigures {
    LagHistogram submission, completion, backend, total;
    uint64_t requests = 0;
    uint64_t late = 0;
    uint64_t lag_ns = 0;   // sum of the total lags
    uint64_t span_ns = 0;  // time available: sum over jobs of active time x iodepth
    double host_share() const;
    double late_fraction() const { return requests ? double(late) / double(requests) : 0.0; }
    void record(uint64_t submission_ns, uint64_t completion_ns, uint64_t backend_ns,
                uint64_t service_ns, double late_fraction);
    void write_json(JsonWriter& j) const;
};

class HostLag;

// One submitter (an fio job) of the stack.
class HostLagJob final : public TaskLagHook {
public:
    HostLagJob(HostLag& owner, std::string name, uint32_t depth, uint64_t think_ns)
        : owner_(owner), name_(std::move(name)), depth_(depth ? depth : 1), think_ns_(think_ns) {}
    void queued(uint64_t cookie, uint64_t now);
    void completed(uint64_t cookie) override;
    void handed(uint64_t cookie, uint64_t now);
    void submitting_late(uint64_t late_ns);
    const std::string& name() const { return name_; }
    const LagFigures& figures() const { return figures_; }
    uint32_t depth() const { return depth_; }
    uint64_t think_ns() const { return think_ns_; }
    // Active time x iodepth: from the first I/O queued to the last handed.
    uint64_t span_ns() const;

private:
    struct InFlight {
        uint64_t cookie, queued_ns, submission_ns;
        uint64_t model_done_ns = 0, backend_ns = 0;
        uint64_t engine_ns = 0;  // the engine's submission ran late by this
        bool done = false;
    };
    InFlight* find(uint64_t cookie);
    HostLag& owner_;
    std::string name_;
    uint32_t depth_;
    uint64_t think_ns_;
    std::vector<InFlight> in_flight_;
    std::deque<uint64_t> free_slots_;  // handed times of the completions that freed a slot
    LagFigures figures_;
    uint64_t first_queued_ns_ = 0, last_handed_ns_ = 0;
    bool started_ = false;
};

class HostLag final : public LatenessProbe {
public:
    HostLag(EventLoop& loop, size_t members, HostLagOptions options = {})
        : loop_(loop), options_(options), members_(members) {}

    // A submitter of the stack (fio's job); the stack owns it.
    HostLagJob* attach_job(const std::string& name, uint32_t depth, uint64_t think_ns);
    // TaskContext::lag's hooks, at the loop's time.
    void queued(TaskContext& task, uint64_t cookie) {
        if (task.lag) static_cast<HostLagJob*>(task.lag)->queued(cookie, loop_.now());
    }
    // The order of a job's answers (response_order.h): a completion
    // delivered to `job` makes it owe one; the task handing its batch to
    // the block layer (commit: the plug's flush), waiting again in reap,
    // or leaving answers.
    void set_response_order(ResponseOrder* order) { order_ = order; }
    void owe(const HostLagJob* job) {
        if (order_) order_->owe(static_cast<const TaskLagHook*>(job), job->think_ns());
    }
    void answered(const TaskContext& task) {
        if (order_ && task.lag) order_->answered(task.lag);
    }
    void handed(TaskContext& task);
    // The task's modelled submitting CPU ([cpu]) resumed `late_ns` after its
    // time: every I/O it is submitting arrives that much later at the model.
    void submitting_late(TaskContext& task, uint64_t late_ns) {
        if (task.lag && late_ns) static_cast<HostLagJob*>(task.lag)->submitting_late(late_ns);
    }
    uint64_t now() const { return loop_.now(); }

    void delivered(uint32_t member, const ModelDelivery& d) override;

    const HostLagOptions& options() const { return options_; }
    const LagFigures& device() const { return device_; }
    // The device's share, with the span of every job.
    double host_share() const;
    // Never without a model (set_unmodelled): nothing to be late against.
    bool host_bound() const { return modelled_ && host_share() > options_.host_bound_share; }
    void set_unmodelled() { modelled_ = false; }
    // The factor that brings the host's share to target_share, from the
    // measured share at time_scale k: the lag per request stays, the
    // modelled time grows with the factor (docs/sidecar-lag.md).
    double suggested_time_scale(double k) const;
    // One stderr line for a host-bound device, "" otherwise.
    std::string verdict(const std::string& device, double k) const;
    // The device's lag figures ("lag" of the virtual device's entry).
    void write_device_json(JsonWriter& j) const;
    // A member's ("lag" of member i's entry).
    void write_member_json(JsonWriter& j, size_t member) const;
    // The "host_lag" object: thresholds, the calibration, the jobs.
    void write_json(JsonWriter& j, double k) const;
    void set_calibration(const TimeScaleCalibration& c) {
        calibration_ = c;
        calibrated_ = true;
    }

    // The last member delivery in the current pass: the one that completed
    // the I/O now completing (HostLagJob::completed).
    uint64_t current_late_ns(uint64_t now, uint64_t& backend_ns) const;
    void record_io(uint64_t submission, uint64_t completion, uint64_t backend, uint64_t service);

private:
    EventLoop& loop_;
    HostLagOptions options_;
    LagFigures device_;
    std::vector<LagFigures> members_;
    std::vector<std::unique_ptr<HostLagJob>> jobs_;
    TimeScaleCalibration calibration_;
    bool calibrated_ = false;
    bool modelled_ = true;
    ResponseOrder* order_ = nullptr;
    uint64_t last_delivered_ns_ = ~uint64_t(0), last_late_ns_ = 0, last_backend_ns_ = 0;
};

// The factor from k and a measured share (HostLag::suggested_time_scale).
double time_scale_for_share(double k, double share, double target_share);

}  // namespace mdsplit
