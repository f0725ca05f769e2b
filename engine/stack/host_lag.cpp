#include "stack/host_lag.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace mdsplit {

// ---- LagHistogram -----------------------------------------------------------

size_t LagHistogram::bucket_of(uint64_t ns) {
    if (ns < uint64_t(kSub)) return size_t(ns);
    int shift = 63 - std::countl_zero(ns) - kSubBits;
    return std::min(kBuckets - 1, size_t(shift + 1) * kSub + size_t((ns >> shift) - kSub));
}

uint64_t LagHistogram::value_of(size_t bucket) {
    if (bucket < size_t(kSub)) return bucket;
    int shift = int(bucket / kSub) - 1;
    uint64_t sub = bucket % kSub + kSub;
    return ((sub + 1) << shift) - 1;  // the bucket's largest value
}

void LagHistogram::record(uint64_t ns) {
    buckets_[bucket_of(ns)]++;
    count_++;
    sum_ += ns;
    max_ = std::max(max_, ns);
}

uint64_t LagHistogram::percentile(double p) const {
    if (!count_) return 0;
    uint64_t want = uint64_t(std::ceil(p * double(count_)));
    if (want == 0) want = 1;
    uint64_t seen = 0;
    for (size_t b = 0; b < buckets_.size(); b++) {
        seen += buckets_[b];
        if (seen >= want) return std::min(value_of(b), max_);
    }
    return max_;
}

void LagHistogram::write_json(JsonWriter& j) const {
    j.begin_object().field("p50_ns", percentile(0.50)).field("p99_ns", percentile(0.99));
    j.field("max_ns", max_).field("mean_ns", count_ ? sum_ / count_ : 0).end_object();
}

// ---- LagFigures -------------------------------------------------------------

double LagFigures::host_share() const {
    return span_ns ? std::min(1.0, double(lag_ns) / double(span_ns)) : 0.0;
}

void LagFigures::record(uint64_t submission_ns, uint64_t completion_ns, uint64_t backend_ns,
                        uint64_t service_ns, double late_fraction) {
    uint64_t total = submission_ns + completion_ns + backend_ns;
    submission.record(submission_ns);
    completion.record(completion_ns);
    backend.record(backend_ns);
    this->total.record(total);
    requests++;
    lag_ns += total;
    if (double(total) > late_fraction * double(service_ns)) late++;
}

void LagFigures::write_json(JsonWriter& j) const {
    j.begin_object().field("requests", requests).field("late", late);
    j.field("late_fraction", late_fraction()).field("lag_ns", lag_ns).field("span_ns", span_ns);
    j.field("host_share", host_share());
    j.key("submission");
    submission.write_json(j);
    j.key("completion");
    completion.write_json(j);
    j.key("backend");
    backend.write_json(j);
    j.key("total");
    total.write_json(j);
    j.end_object();
}

// ---- HostLagJob -------------------------------------------------------------

HostLagJob::InFlight* HostLagJob::find(uint64_t cookie) {
    for (InFlight& f : in_flight_)
        if (f.cookie == cookie) return &f;
    return nullptr;
}

// Its submission lag: how much later than the completion that freed its
// slot (plus the job's think time) it came. The first iodepth I/Os have no
// such completion: 0.
void HostLagJob::queued(uint64_t cookie, uint64_t now) {
    if (!started_) {
        started_ = true;
        first_queued_ns_ = now;
    }
    uint64_t submission = 0;
    if (!free_slots_.empty()) {
        uint64_t due = free_slots_.front() + think_ns_;
        free_slots_.pop_front();
        submission = now > due ? now - due : 0;
    }
    in_flight_.push_back(InFlight{cookie, now, submission});
}

// Done in the engine now; the model had it done when the member delivery
// that completed it was due.
void HostLagJob::completed(uint64_t cookie) {
    uint64_t now = owner_.now();
    InFlight* f = find(cookie);
    if (!f) return;
    uint64_t backend = 0;
    uint64_t late = owner_.current_late_ns(now, backend);
    late += f->engine_ns;  // its submission's lateness delayed it too
    f->model_done_ns = now - std::min(late, now - std::min(now, f->queued_ns));
    f->backend_ns = std::min(backend, late);
    f->done = true;
    owner_.owe(this);
}

void HostLagJob::handed(uint64_t cookie, uint64_t now) {
    InFlight* f = find(cookie);
    if (!f) return;
    // Completed without passing through the block layer (an error found at
    // queue time, a read past the end): done when queued.
    if (!f->done) f->model_done_ns = f->queued_ns;
    uint64_t model_done = std::max(f->model_done_ns, f->queued_ns);
    uint64_t after = now > model_done ? now - model_done : 0;
    uint64_t engine = std::min(f->engine_ns, after);
    uint64_t backend = std::min(f->backend_ns, after - engine);
    uint64_t completion = after - engine - backend;
    uint64_t submission = f->submission_ns + engine;
    uint64_t service = model_done - f->queued_ns;
    figures_.record(submission, completion, backend, service, owner_.options().late_fraction);
    owner_.record_io(submission, completion, backend, service);
    last_handed_ns_ = now;
    free_slots_.push_back(now);
    if (free_slots_.size() > depth_) free_slots_.pop_front();
    *f = in_flight_.back();
    in_flight_.pop_back();
}

// Every I/O of the job still being submitted waited.
void HostLagJob::submitting_late(uint64_t late_ns) {
    for (InFlight& f : in_flight_)
        if (!f.done) f.engine_ns += late_ns;
}

uint64_t HostLagJob::span_ns() const {
    return last_handed_ns_ > first_queued_ns_ ? (last_handed_ns_ - first_queued_ns_) * depth_ : 0;
}

// ---- HostLag ----------------------------------------------------------------

HostLagJob* HostLag::attach_job(const std::string& name, uint32_t depth, uint64_t think_ns) {
    jobs_.push_back(std::make_unique<HostLagJob>(*this, name, depth, think_ns));
    return jobs_.back().get();
}

void HostLag::handed(TaskContext& task) {
    if (!task.lag) return;
    uint64_t now = loop_.now();
    auto* job = static_cast<HostLagJob*>(task.lag);
    for (const IoCompletion& c : task.completions) job->handed(c.cookie, now);
}

void HostLag::delivered(uint32_t member, const ModelDelivery& d) {
    uint64_t late = d.delivered_ns > d.model_done_ns ? d.delivered_ns - d.model_done_ns : 0;
    uint64_t backend = d.inner_done_ns > d.model_done_ns ? d.inner_done_ns - d.model_done_ns : 0;
    backend = std::min(backend, late);
    uint64_t service = d.model_done_ns > d.issue_ns ? d.model_done_ns - d.issue_ns : 0;
    if (member < members_.size())
        members_[member].record(0, late - backend, backend, service, options_.late_fraction);
    last_delivered_ns_ = d.delivered_ns;
    last_late_ns_ = late;
    last_backend_ns_ = backend;
}

uint64_t HostLag::current_late_ns(uint64_t now, uint64_t& backend_ns) const {
    if (now != last_delivered_ns_) {
        backend_ns = 0;
        return 0;
    }
    backend_ns = last_backend_ns_;
    return last_late_ns_;
}

void HostLag::record_io(uint64_t submission, uint64_t completion, uint64_t backend,
                        uint64_t service) {
    device_.record(submission, completion, backend, service, options_.late_fraction);
}

double HostLag::host_share() const {
    uint64_t span = 0;
    for (const auto& job : jobs_) span += job->span_ns();
    return span ? std::min(1.0, double(device_.lag_ns) / double(span)) : 0.0;
}

double time_scale_for_share(double k, double share, double target_share) {
    if (share <= target_share) return k;
    share = std::min(share, 0.999);
    // share = h / (k s + h) for a lag h per request and a modelled time s
    // per request at k = 1: the factor k' with share target t is
    // k' = k * share (1 - t) / ((1 - share) t).
    double raw = k * share * (1 - target_share) / ((1 - share) * target_share);
    double pow2 = std::exp2(std::ceil(std::log2(raw)));  // a round factor
    return std::min(1000.0, std::max(pow2, k));
}

double HostLag::suggested_time_scale(double k) const {
    if (!modelled_) return k;
    return time_scale_for_share(k, host_share(), options_.target_share);
}

std::string HostLag::verdict(const std::string& device, double k) const {
    if (!host_bound()) return "";
    char line[512];
    double suggested = suggested_time_scale(k);
    std::snprintf(line, sizeof line,
                  "mdsplit: %s: host-bound: %.0f %% of requests late (p99 lag %.0f us), the host's "
                  "share of the run %.0f %%; the figures are this machine's, not the model's; "
                  "time_scale = %g keeps up here (from the measured lag)%s",
                  device.c_str(), 100.0 * device_.late_fraction(),
                  double(device_.total.percentile(0.99)) / 1e3, 100.0 * host_share(), suggested,
                  suggested >= 1000.0 ? ", or more: 1000 is the largest time_scale" : "");
    return line;
}

void HostLag::write_device_json(JsonWriter& j) const {
    LagFigures d = device_;
    for (const auto& job : jobs_) d.span_ns += job->span_ns();
    d.write_json(j);
}

void HostLag::write_member_json(JsonWriter& j, size_t member) const {
    if (member < members_.size())
        members_[member].write_json(j);
    else
        LagFigures{}.write_json(j);
}

void HostLag::write_json(JsonWriter& j, double k) const {
    j.begin_object().field("late_fraction_of_service", options_.late_fraction);
    j.field("host_bound_share", options_.host_bound_share);
    j.field("target_share", options_.target_share);
    j.field("host_share", host_share()).field("host_bound", host_bound());
    j.field("suggested_time_scale", suggested_time_scale(k));
    j.key("time_scale_auto");
    if (calibrated_)
        calibration_.write_json(j);
    else
        j.null();
    j.key("jobs").begin_array();
    for (const auto& job : jobs_) {
        LagFigures f = job->figures();
        f.span_ns = job->span_ns();
        j.begin_object().field("name", job->name()).field("iodepth", job->depth());
        j.field("think_ns", job->think_ns()).key("lag");
        f.write_json(j);
        j.end_object();
    }
    j.end_array().end_object();
}

std::string TimeScaleCalibration::line(const std::string& device) const {
    std::string text = "mdsplit: " + device + ": time_scale = \"auto\": ";
    if (unmodelled)
        return text +
               "1 (nothing in the stack is modelled: no member has a timing model and "
               "there is no [cpu]; fio's figures are the backend's and the host's)";
    char buf[96];
    std::snprintf(buf, sizeof buf, "%g (calibrated in %.2f s; the host's share", time_scale,
                  double(took_ns) / 1e9);
    text += buf;
    const char* sep = " ";
    for (const Try& t : tried) {
        std::snprintf(buf, sizeof buf, "%s%.1f %% at %g", sep, 100.0 * t.host_share, t.time_scale);
        text += buf;
        sep = ", ";
    }
    if (kept_up_twice > 0 && kept_up_twice != time_scale) {
        bool probed = tried.back().time_scale == time_scale;
        std::snprintf(buf, sizeof buf, "; %g kept up twice, %g leaves headroom%s", kept_up_twice,
                      time_scale, probed ? " and kept up" : " (not probed: no tries left)");
        text += buf;
    }
    return text + "); fio's figures are in loop time: multiply its rates by the factor";
}

void TimeScaleCalibration::write_json(JsonWriter& j) const {
    j.begin_object().field("time_scale", time_scale).field("took_ns", took_ns);
    j.field("unmodelled", unmodelled);
    j.key("tried").begin_array();
    for (const Try& t : tried)
        j.begin_object()
            .field("time_scale", t.time_scale)
            .field("host_share", t.host_share)
            .field("requests", t.requests)
            .end_object();
    j.end_array().end_object();
}

}  // namespace mdsplit
