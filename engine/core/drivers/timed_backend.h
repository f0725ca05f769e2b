// Wraps any backend with a timing model: a request completes at its modelled
// time, and never before the wrapped backend has really finished it.
#pragma once

#include <memory>

#include "base/event_loop.h"
#include "core/drivers/backend.h"
#include "core/drivers/lateness_probe.h"
#include "core/drivers/timing_model.h"

namespace mdsplit {

class TimedBackend final : public Backend {
public:
    TimedBackend(EventLoop& loop, std::unique_ptr<Backend> inner, const TimingModelConfig& model);
    void submit(Request* rq) override;
    void kick() override { inner_->kick(); }
    int sync_data() override { return inner_->sync_data(); }
    uint64_t size_bytes() const override { return inner_->size_bytes(); }
    const char* kind() const override { return inner_->kind(); }
    const TimingModel& model() const { return model_; }
    Backend& inner() { return *inner_; }
    // Tells `probe` of every delivered request, as member `member`.
    void set_lateness_probe(LatenessProbe* probe, uint32_t member) {
        probe_ = probe;
        member_ = member;
    }

private:
    static void on_inner_complete(void* ctx, Request* rq, int64_t res);
    static void on_model_time(void* arg, uint64_t tag);
    EventLoop& loop_;
    std::unique_ptr<Backend> inner_;
    void deliver(Request* rq, int64_t res, uint64_t inner_done_ns);
    TimingModel model_;
    LatenessProbe* probe_ = nullptr;
    uint32_t member_ = 0;
};

}  // namespace mdsplit
