#include "core/drivers/fault_injector.h"

#include <algorithm>
#include <cerrno>

namespace mdsplit {

FaultInjector::FaultInjector(EventLoop& loop, std::unique_ptr<Backend> inner,
                             const FaultConfig& faults, uint64_t start_ns)
    : loop_(loop), inner_(std::move(inner)), faults_(faults), rng_state_(faults.seed) {
    std::sort(faults_.fail_nth.begin(), faults_.fail_nth.end());
    if (faults_.fail_at_ns) fail_at_abs_ns_ = start_ns + *faults_.fail_at_ns;
    inner_->set_completion(&FaultInjector::on_inner_complete, this);
}

FaultInjector::~FaultInjector() = default;

uint64_t FaultInjector::splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool FaultInjector::dead() const { return faults_.fail_at_ns && loop_.now() >= fail_at_abs_ns_; }

bool FaultInjector::in_failed_sectors(const Request* rq) const {
    for (const auto& [start, end] : faults_.fail_sectors)
        if (rq->sector < end && rq->end_sector() > start) return true;
    return false;
}

void FaultInjector::submit(Request* rq) {
    uint64_t n = ++counters_.requests;
    // One draw per request, always: which requests fail at random depends on
    // the seed and the request number only.
    bool random_hit = false;
    if (faults_.fail_probability > 0)
        random_hit = unit_interval(splitmix64(rng_state_)) < faults_.fail_probability;

    bool fail = true;
    if (dead()) {
        counters_.failed_dead++;
    } else if (std::binary_search(faults_.fail_nth.begin(), faults_.fail_nth.end(), n)) {
        counters_.failed_nth++;
    } else if (in_failed_sectors(rq)) {
        counters_.failed_sectors++;
    } else if (random_hit) {
        counters_.failed_random++;
    } else {
        fail = false;
    }
    if (fail) {
        // Never complete inside submit(): the caller may still hold state.
        loop_.defer(&FaultInjector::on_fail, this, reinterpret_cast<uint64_t>(rq));
        return;
    }
    if (faults_.spike_every && n % faults_.spike_every == 0) {
        counters_.spikes++;
        spiked_.insert(rq);
    }
    inner_->submit(rq);
}

void FaultInjector::on_fail(void* arg, uint64_t tag) {
    auto* self = static_cast<FaultInjector*>(arg);
    self->complete(reinterpret_cast<Request*>(tag), -EIO);
}

void FaultInjector::on_inner_complete(void* ctx, Request* rq, int64_t res) {
    auto* self = static_cast<FaultInjector*>(ctx);
    auto it = self->spiked_.find(rq);
    if (it == self->spiked_.end()) {
        self->complete(rq, res);
        return;
    }
    self->spiked_.erase(it);
    rq->result = res;  // free again: an inner timing model has completed it
    self->loop_.schedule_at(self->loop_.now() + self->faults_.spike_extra_ns,
                            &FaultInjector::on_spike_done, self, reinterpret_cast<uint64_t>(rq));
}

void FaultInjector::on_spike_done(void* arg, uint64_t tag) {
    auto* rq = reinterpret_cast<Request*>(tag);
    static_cast<FaultInjector*>(arg)->complete(rq, rq->result);
}

}  // namespace mdsplit
