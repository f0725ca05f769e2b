// Write-behind (the virtual clock over a timed real member without
// faults, when the run asks for it: StackOptions::write_behind): a write
// ends at its modelled time while the host writes a copy of its data in
// the background; reads and overlapping writes wait for the copies in
// flight, so every read sees what was written before it. Completions are
// ordered as IssueOrderDelivery orders them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/block/completion_orderer.h"
#include "core/drivers/timed_backend.h"

namespace mdsplit {

class WriteBehindDelivery final : public IssueOrderDelivery {
public:
    // `timed` is the queue's backend (outermost: no fault injector).
    WriteBehindDelivery(EventLoop& loop, TimedBackend& timed)
        : IssueOrderDelivery(loop), timed_(timed) {}
    void submit(Request* rq) override;
    // The copies in flight land first.
    int sync_data() override;
    uint64_t write_behind_errors() const override { return errors_; }

protected:
    void completed(Request* rq, int64_t res) override;

private:
    void issue_write_behind(Request* rq);
    void wait_for_copies(const Request* rq);
    static void on_model_time(void* arg, uint64_t tag);
    void end_copy(Request* copy, int64_t res);

    TimedBackend& timed_;
    std::vector<Request*> behind_;  // copies in flight
    uint64_t errors_ = 0;
};

}  // namespace mdsplit
