// A member that stores nothing (like null_blk): every request succeeds on
// the next turn of the event loop, reads leave the buffer as it was.
#pragma once

#include "base/event_loop.h"
#include "core/drivers/backend.h"

namespace mdsplit {

class NullBackend final : public Backend {
public:
    NullBackend(EventLoop& loop, uint64_t size) : loop_(loop), size_(size) {}
    void submit(Request* rq) override {
        rq->ring_owner = this;
        loop_.defer(&NullBackend::finish, rq);
    }
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "null"; }

private:
    static void finish(void* arg, uint64_t) {
        auto* rq = static_cast<Request*>(arg);
        static_cast<NullBackend*>(rq->ring_owner)->complete(rq, int64_t(rq->bytes()));
    }
    EventLoop& loop_;
    uint64_t size_;
};

}  // namespace mdsplit
