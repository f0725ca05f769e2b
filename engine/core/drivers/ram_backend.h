// A member kept in memory, sparse in 64 KiB extents: unwritten ranges read
// as zeroes. Completes on the next turn of the event loop.
#pragma once

#include <memory>
#include <unordered_map>

#include "base/event_loop.h"
#include "core/drivers/backend.h"

namespace mdsplit {

class RamBackend final : public Backend {
public:
    RamBackend(EventLoop& loop, uint64_t size) : loop_(loop), size_(size) {}
    void submit(Request* rq) override;
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "ram"; }
    size_t resident_bytes() const { return extents_.size() * kExtent; }
    // Direct access for tests and the parity checker.
    void read_bytes(uint64_t offset, uint8_t* out, uint64_t len) const;
    void write_bytes(uint64_t offset, const uint8_t* in, uint64_t len);
    void discard_bytes(uint64_t offset, uint64_t len);

private:
    static constexpr uint64_t kExtent = 64 * 1024;
    static void finish(void* arg, uint64_t tag);
    EventLoop& loop_;
    uint64_t size_;
    std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> extents_;
};

}  // namespace mdsplit
