#include "core/drivers/ram_backend.h"

#include <cerrno>
#include <cstring>

namespace mdsplit {

void RamBackend::read_bytes(uint64_t offset, uint8_t* out, uint64_t len) const {
    while (len) {
        uint64_t ext = offset / kExtent, in = offset % kExtent;
        uint64_t n = std::min(len, kExtent - in);
        auto it = extents_.find(ext);
        if (it == extents_.end())
            memset(out, 0, n);
        else
            memcpy(out, it->second.get() + in, n);
        out += n;
        offset += n;
        len -= n;
    }
}

void RamBackend::write_bytes(uint64_t offset, const uint8_t* src, uint64_t len) {
    while (len) {
        uint64_t ext = offset / kExtent, in = offset % kExtent;
        uint64_t n = std::min(len, kExtent - in);
        auto& slot = extents_[ext];
        if (!slot) {
            slot = std::make_unique<uint8_t[]>(kExtent);
            memset(slot.get(), 0, kExtent);
        }
        memcpy(slot.get() + in, src, n);
        src += n;
        offset += n;
        len -= n;
    }
}

// A discarded range reads back as zeroes; whole extents are freed.
void RamBackend::discard_bytes(uint64_t offset, uint64_t len) {
    while (len) {
        uint64_t ext = offset / kExtent, in = offset % kExtent;
        uint64_t n = std::min(len, kExtent - in);
        auto it = extents_.find(ext);
        if (it != extents_.end()) {
            if (n == kExtent)
                extents_.erase(it);
            else
                memset(it->second.get() + in, 0, n);
        }
        offset += n;
        len -= n;
    }
}

void RamBackend::submit(Request* rq) {
    uint64_t offset = rq->sector << kSectorShift;
    int64_t res = int64_t(rq->bytes());
    if (offset + rq->bytes() > size_) {
        res = -EIO;
    } else if (rq->op == Op::Discard) {
        discard_bytes(offset, rq->bytes());
    } else {
        for (const iovec& v : rq->iov) {
            if (v.iov_base) {
                if (rq->op == Op::Write)
                    write_bytes(offset, static_cast<uint8_t*>(v.iov_base), v.iov_len);
                else
                    read_bytes(offset, static_cast<uint8_t*>(v.iov_base), v.iov_len);
            }
            offset += v.iov_len;
        }
    }
    rq->result = res;
    rq->ring_owner = this;
    loop_.defer(&RamBackend::finish, rq);
}

void RamBackend::finish(void* arg, uint64_t) {
    auto* rq = static_cast<Request*>(arg);
    static_cast<RamBackend*>(rq->ring_owner)->complete(rq, rq->result);
}

}  // namespace mdsplit
