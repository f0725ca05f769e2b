// Where a member queue's requests go: a real file or block device through
// io_uring, memory, or nowhere. A timing model may wrap any of them.
#pragma once

#include <cstdint>
#include <string>

#include "core/block/request.h"

namespace mdsplit {

class Backend {
public:
    // res: bytes transferred or a negative errno.
    using CompletionFn = void (*)(void* ctx, Request* rq, int64_t res);

    virtual ~Backend() = default;
    // Starts rq (rq->iov describes its data, rq->sector its position).
    virtual void submit(Request* rq) = 0;
    // Sends batched submissions to the kernel (io_uring_submit).
    virtual void kick() {}
    // Makes the writes that completed durable on the real storage (fdatasync
    // of the file or device: its metadata and the device's volatile cache).
    // 0 or a negative errno. Nothing to do for memory or nowhere.
    virtual int sync_data() { return 0; }
    virtual uint64_t size_bytes() const = 0;
    virtual const char* kind() const = 0;

    void set_completion(CompletionFn fn, void* ctx) {
        complete_ = fn;
        complete_ctx_ = ctx;
    }

protected:
    void complete(Request* rq, int64_t res) { complete_(complete_ctx_, rq, res); }

private:
    CompletionFn complete_ = nullptr;
    void* complete_ctx_ = nullptr;
};

}  // namespace mdsplit
