#include "core/drivers/timed_backend.h"

namespace mdsplit {

TimedBackend::TimedBackend(EventLoop& loop, std::unique_ptr<Backend> inner,
                           const TimingModelConfig& model)
    : loop_(loop), inner_(std::move(inner)), model_(model) {
    inner_->set_completion(&TimedBackend::on_inner_complete, this);
}

void TimedBackend::submit(Request* rq) {
    rq->model_done_ns = model_.schedule(loop_.now(), rq->op, rq->sector, rq->nr_sectors);
    inner_->submit(rq);
}

void TimedBackend::on_inner_complete(void* ctx, Request* rq, int64_t res) {
    auto* self = static_cast<TimedBackend*>(ctx);
    if (self->loop_.now() >= rq->model_done_ns) {
        self->deliver(rq, res, self->loop_.now());
        return;
    }
    rq->result = res;
    rq->ring_owner = self;
    self->loop_.schedule_at(rq->model_done_ns, &TimedBackend::on_model_time, rq);
}

void TimedBackend::on_model_time(void* arg, uint64_t) {
    auto* rq = static_cast<Request*>(arg);
    // The backend had finished before the model time (or this timer would
    // not have been armed).
    static_cast<TimedBackend*>(rq->ring_owner)->deliver(rq, rq->result, rq->model_done_ns);
}

// Completes rq upwards, telling the probe how late that is against the model.
void TimedBackend::deliver(Request* rq, int64_t res, uint64_t inner_done_ns) {
    if (probe_)
        probe_->delivered(
            member_, ModelDelivery{rq->issue_ns, rq->model_done_ns, inner_done_ns, loop_.now()});
    complete(rq, res);
}

}  // namespace mdsplit
