// Exclusive claims on the block devices a run writes.
//
// check_device_safety() looks at a device once, before the run; this keeps
// it ours afterwards. A claim is an open with O_EXCL, which the kernel turns
// into a holder claim on the block device (blkdev_open -> bdev_open ->
// bd_prepare_to_claim / bd_finish_claiming, block/bdev.c): while it is held,
// every other exclusive opener fails with EBUSY -- mount, mkfs, mdadm,
// LVM, cryptsetup, swapon, another mdsplit run -- so nothing can start
// using the device between the check and the end of the run. Ordinary
// opens (our members' own descriptors, a reader) still work.
//
// The kernel's holder is the open file, so two exclusive opens from one
// process conflict too. Stacks of one process share one claim per device
// (a count of users); forked fio jobs inherit the descriptor, and the claim
// lasts until the last process of the run has let it go.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace mdsplit {

class BlockDeviceClaim {
public:
    // Claims the block device at `path` (its st_rdev is `rdev`), or joins
    // this process's claim on it. Throws DeviceClaimError when another
    // holder has it (EBUSY). Any other failure to open leaves the device
    // unclaimed: the member's own open then fails with the same errno.
    BlockDeviceClaim(const std::string& path, dev_t rdev);
    ~BlockDeviceClaim();
    BlockDeviceClaim(BlockDeviceClaim&& other) noexcept;
    BlockDeviceClaim& operator=(BlockDeviceClaim&&) = delete;
    BlockDeviceClaim(const BlockDeviceClaim&) = delete;
    BlockDeviceClaim& operator=(const BlockDeviceClaim&) = delete;

    // True while a claim of this process holds device `rdev`.
    static bool held(dev_t rdev);

private:
    dev_t rdev_;
    bool owns_ = false;  // false once moved from
};

// Why a claim failed: "held open exclusively by another program (open with
// O_EXCL: Device or resource busy)" and the like; what() is that phrase.
struct DeviceClaimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// "" when `path` could be opened exclusively now (or this process holds a
// claim on `rdev`), else the phrase above. Opens and closes at once.
std::string exclusive_holder_of(const std::string& path, dev_t rdev);

}  // namespace mdsplit
