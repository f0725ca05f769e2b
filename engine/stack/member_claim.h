// Claims on the members a run writes: one owner per member at a time.
//
// check_device_safety() looks at a device once, before the run; a claim
// keeps the member ours afterwards, until the stack is gone:
//   - a block device is opened with O_EXCL, which the kernel turns into a
//     holder claim (blkdev_open -> bdev_open -> bd_prepare_to_claim /
//     bd_finish_claiming, block/bdev.c): every other exclusive opener fails
//     with EBUSY -- mount, mkfs, mdadm, LVM, cryptsetup, swapon, another
//     mdsplit run -- so nothing can start using the device meanwhile;
//   - a regular file gets flock(LOCK_EX): another mdsplit run writing the
//     same file is refused. Two owners would each keep their own page cache,
//     stripe cache and parity arithmetic over the same bytes, and lose or
//     corrupt data (md refuses an array whose members are in use the same
//     way, with its exclusive claim).
// Ordinary opens (our members' own descriptors, readers) still work.
//
// Both locks belong to an open file, so two claims from one process would
// conflict too. Stacks of one process share one claim per member (a count
// of users); forked fio jobs inherit the descriptor, and the claim lasts
// until the last process of the run has let it go.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace mdsplit {

class MemberClaim {
public:
    // Claims the member at `path` (a block device or a regular file), or
    // joins this process's claim on it. Throws MemberClaimError when another
    // owner has it. Any other failure to open or lock leaves the member
    // unclaimed: the member's own open reports what is wrong.
    explicit MemberClaim(const std::string& path);
    ~MemberClaim();
    MemberClaim(MemberClaim&& other) noexcept;
    MemberClaim& operator=(MemberClaim&&) = delete;
    MemberClaim(const MemberClaim&) = delete;
    MemberClaim& operator=(const MemberClaim&) = delete;

    // True while a claim of this process holds block device `rdev`.
    static bool holds_device(dev_t rdev);

private:
    friend std::string file_claim_holder(const std::string& path);
    struct Key {
        bool device;  // a block device (rdev), else a file (dev, ino)
        dev_t dev;
        ino_t ino;
        auto operator<=>(const Key&) const = default;
    };
    Key key_{};
    bool owns_ = false;  // false when unclaimed or moved from
};

// Why a claim failed, as the in-use phrase of device_safety.h: "held open
// exclusively by another program (open with O_EXCL: Device or resource
// busy)", "being written by another mdsplit run (flock: ...)".
struct MemberClaimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// "" when the block device at `path` could be opened exclusively now (or
// this process holds a claim on `rdev`), else the phrase above. Opens and
// closes at once.
std::string exclusive_holder_of(const std::string& path, dev_t rdev);

// "" unless the regular file at `path` is a member another mdsplit run has
// claimed (an output about to replace it would destroy that run's data),
// else the phrase above. Opens, locks and closes at once.
std::string file_claim_holder(const std::string& path);

}  // namespace mdsplit
