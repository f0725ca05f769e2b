// What the stack-file loader asks the machine about a member's path. The
// loader reads text and decides; the answers come from the StorageProbe its
// caller passes: the machine's (stack/storage_probe.h: stat(2), BLKSSZGET
// and BLKGETSIZE64, access(2) and statvfs(3), /proc/self/mountinfo), or a
// test's own.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mdsplit {

// An existing block device, as opening it read-only tells.
struct BlockDeviceFacts {
    bool opened = false;
    uint32_t logical_block_size = 0;  // BLKSSZGET; 0 when it did not answer
    std::optional<uint64_t> bytes;    // BLKGETSIZE64
};

class StorageProbe {
public:
    virtual ~StorageProbe() = default;
    // stat(2): 0, or the errno.
    virtual int stat(const std::string& path, struct stat& st) const = 0;
    virtual BlockDeviceFacts block_device(const std::string& path) const = 0;
    // Whether a new file may be made in the existing directory `dir`:
    // writable by this process, on a file system not mounted read-only.
    virtual bool writable_directory(const std::string& dir) const = 0;
    // The type of the file system mounted at or above `dir` ("" unknown).
    virtual std::string fs_type(const std::string& dir) const = 0;
    // The path with its symbolic links resolved (as far as they exist).
    virtual std::string resolved(const std::string& path) const = 0;
};

}  // namespace mdsplit
