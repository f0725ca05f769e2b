// Block-device safety: before a job that writes opens a stack, each member
// that is a block device must be unused and blank. A member is refused for
// writes (unless fio's allow_mounted_write=1) when
//   - it or one of its partitions is mounted (/proc/self/mountinfo), used
//     as swap (/proc/swaps), or held by another device (sysfs holders/:
//     device-mapper, LVM, md);
//   - it carries a partition table or a file system signature: GPT, MBR /
//     boot sector, LVM2, LUKS, XFS, btrfs, ext2/3/4, swap, md superblock.
// Whatever the job does, two members on one device, or a whole disk and one
// of its partitions, are refused (the loader already refuses two members
// with the same file, or two device nodes with the same st_rdev).
//
// Errors are ConfigError with the loader's one-line shape
//     <stack file>: members[i].path: <problem>; allowed: <what is allowed>
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "config/stack_config.h"

namespace mdsplit {

struct DeviceSafetyOptions {
    bool writes = true;                // the job writes (fio: td_write(td) || verify)
    bool allow_mounted_write = false;  // fio's allow_mounted_write=1
    // Where the facts come from (tests point these at fake files).
    std::string mountinfo = "/proc/self/mountinfo";
    std::string swaps = "/proc/swaps";
    std::string sysfs_dev_block = "/sys/dev/block";
};

// Throws ConfigError for the first unsafe member.
void check_device_safety(const StackConfig& config, const DeviceSafetyOptions& options = {});

// The pieces, for tests.
// "" or what the first 68 KiB of fd/path show, e.g.
// "an ext2/3/4 file system signature (0xEF53 at byte 1080)".
std::string find_signature(int fd);
std::string find_signature(const std::string& path);
// "" or how device `rdev` is in use: "mounted at /mnt", "mounted at /mnt
// (partition 7:1 of it)", "used as swap", "held by dm-0".
std::string find_use(dev_t rdev, const DeviceSafetyOptions& options);
// The whole disk of a partition (sysfs), 0 when rdev is not a partition.
dev_t partition_parent(dev_t rdev, const std::string& sysfs_dev_block);

}  // namespace mdsplit
