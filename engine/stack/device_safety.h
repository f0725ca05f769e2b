// Block-device safety: before a stack that any job of the fio run may write
// to is opened, each member that is a block device must be unused and
// blank. A member is refused for writes when
//   - it or one of its partitions is mounted (/proc/self/mountinfo), used
//     as swap (/proc/swaps), held by another device (sysfs holders/:
//     device-mapper, LVM, md), backs a loop device (sysfs
//     loop/backing_file), or it is held open exclusively by another program
//     (open with O_EXCL fails with EBUSY) -- unless fio's
//     allow_mounted_write=1 (without it, the Stack then claims the device
//     for the run: member_claim.h);
//   - (a regular file too) it is the backing file of a loop device (sysfs
//     loop/backing_file) or a swap file (/proc/swaps) -- unless
//     allow_mounted_write=1: the file is a block device's contents then;
//   - it carries a partition table or a signature: the magic numbers below
//     (GPT, MBR / boot sector, LVM2 in any of the first four sectors, LUKS,
//     XFS, btrfs, ext2/3/4, swap, md superblocks of versions 1.2, 1.1 at the
//     start and 1.0, 0.90 near the end: found even when the rest of the
//     superblock is damaged),
//     then libblkid's full probe (every file system, RAID and volume
//     manager type it knows) -- unless the member sets force = true in the
//     stack file.
//   - (a regular file) it is a member of a RAID5 array (its md superblock,
//     the xattr user.mdsplit.md) and the stack is not a raid5 (the array's
//     own stack assembles it as md does) -- unless force = true, and then
//     the Stack marks the array dirty so that its next run resyncs it.
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

#include "config/config_error.h"
#include "config/stack_config.h"

namespace mdsplit {

struct DeviceSafetyOptions {
    bool writes = true;                // the job writes (fio: td_write(td) || verify)
    bool allow_mounted_write = false;  // fio's allow_mounted_write=1 (a device in use)
    // Where the facts come from (tests point these at fake files).
    std::string mountinfo = "/proc/self/mountinfo";
    std::string swaps = "/proc/swaps";
    std::string sysfs_dev_block = "/sys/dev/block";
};

// Throws ConfigError for the first unsafe member.
void check_device_safety(const StackConfig& config, const DeviceSafetyOptions& options = {});

// The error for members[index] being `use` ("mounted at /mnt", "held open
// exclusively by another program (...)"), as check_device_safety() words it.
ConfigError device_in_use_error(const StackConfig& config, size_t index, const std::string& use);

// Throws the ConfigError above when members[index] of a non-RAID stack is a
// RAID5 member file (md_member_signature()).
void check_no_md_member(const StackConfig& config, size_t index);

// The pieces, for tests.
// "" or what the first 68 KiB of fd/path (and md's places near its end) show, e.g.
// "an ext2/3/4 file system signature (0xEF53 at byte 1080)".
std::string find_signature(int fd);
std::string find_signature(const std::string& path);
// "" or what libblkid's probe of path finds, e.g. "a vfat signature
// (libblkid: TYPE=\"vfat\")".
std::string probe_signature(const std::string& path);
// "" or how device `rdev` is in use: "mounted at /mnt", "mounted at /mnt
// (partition 7:1 of it)", "used as swap", "held by dm-0", "held by md0
// (partition 7:1 of it)".
std::string find_use(dev_t rdev, const DeviceSafetyOptions& options);
// "" or how the regular file with st_dev `dev` and inode `ino` is in use
// below a block device: "the backing file of loop 7:0", "used as swap".
std::string find_file_use(dev_t dev, ino_t ino, const DeviceSafetyOptions& options);
// The same for the file at `path` (links followed), "" when it is no
// regular file: what an output (a trace, a sidecar) about to replace or
// truncate it would destroy.
std::string find_file_use(const std::string& path, const DeviceSafetyOptions& options = {});
// The whole disk of a partition (sysfs), 0 when rdev is not a partition.
dev_t partition_parent(dev_t rdev, const std::string& sysfs_dev_block);

}  // namespace mdsplit
