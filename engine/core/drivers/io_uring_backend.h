// A member on a regular file or block device, driven through io_uring.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/drivers/backend.h"
#include "core/drivers/io_uring_ring.h"

namespace mdsplit {

// Why a member could not be opened: the member's TOML key it concerns
// ("path" or "size"), the problem and what is allowed, for the stack to turn
// into the loader's one-line "<file>: members[i].<key>: ...; allowed: ..." form.
struct MemberOpenError : std::runtime_error {
    MemberOpenError(std::string key_, const std::string& problem, std::string allowed_)
        : std::runtime_error(problem), key(std::move(key_)), allowed(std::move(allowed_)) {}
    std::string key;
    std::string allowed;
};

class IoUringBackend final : public Backend {
public:
    // Opens path read-write when `writable`, read-only otherwise; O_DIRECT if
    // direct. A missing file is created sparse at `size` (with its missing
    // directories) when `may_create`, else refused; an existing file shorter
    // than `size` is extended (the loader allows that only with grow =
    // true). A failed create removes what it made. A block device that is
    // read-only is refused when `writable`. Throws MemberOpenError.
    IoUringBackend(IoUringRing& ring, const std::string& path, uint64_t size, bool direct,
                   bool writable, bool may_create = true);
    ~IoUringBackend() override;

    // Issues rq, or holds it behind a discard (see the discard barrier).
    void submit(Request* rq) override;
    void kick() override { ring_.submit_pending(); }
    int sync_data() override;
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "io_uring"; }

    // Called by the ring for each CQE of this backend.
    void on_cqe(Request* rq, int res);

    // What opening changed on the host, undone when the stack it belongs to
    // cannot be made after all (a later member or trace fails): a file this
    // open created is removed with the directories made for it, a file it
    // grew is cut back to its old size. Never throws.
    void undo_open() noexcept;

private:
    void create(const std::string& path, uint64_t size, int flags);
    void issue(Request* rq);
    void release_held();
    std::string path_;
    bool created_ = false;  // O_EXCL created the file (not another process of the run)
    std::vector<std::filesystem::path> made_directories_;
    std::optional<uint64_t> grown_from_;  // the file's size before we grew it
    uint64_t file_end_ = UINT64_MAX;      // a file shorter than size_ (not grown): its end
    void prep_discard(io_uring_sqe* sqe, Request* rq);

    // include/uapi/linux/blkdev.h (6.12): _IO(0x12, 0)
    static constexpr uint32_t kBlockUringCmdDiscard = (0x12 << 8) | 0;

    // The discard barrier. A discard runs apart from the member's other I/O
    // (io-wq punches a file's hole, a BLKDISCARD runs after its CQE): it
    // waits for the I/O in flight, and I/O submitted after it waits for it,
    // so a write after a discard of its range keeps its data, and a discard
    // after a write removes it, as a device that applies its commands in
    // order would. Without discards nothing is held.
    uint32_t in_flight_ = 0;  // issued to the ring, not completed
    bool discard_in_flight_ = false;
    std::deque<Request*> held_;  // in submission order

    IoUringRing& ring_;
    int fd_ = -1;
    uint64_t size_ = 0;
    bool block_device_ = false;
    bool writable_ = false;
};

}  // namespace mdsplit
