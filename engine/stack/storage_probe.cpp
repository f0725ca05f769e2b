// MachineProbe (storage_probe.h): the system calls behind the loader's
// questions about member paths.
#include "stack/storage_probe.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "base/mountinfo.h"
#include "base/resolved_path.h"

namespace mdsplit {

int MachineProbe::stat(const std::string& path, struct stat& st) const {
    return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

BlockDeviceFacts MachineProbe::block_device(const std::string& path) const {
    BlockDeviceFacts facts;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return facts;
    facts.opened = true;
    int lbs = 0;
    if (ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0) facts.logical_block_size = uint32_t(lbs);
    uint64_t bytes = 0;
    if (ioctl(fd, BLKGETSIZE64, &bytes) == 0) facts.bytes = bytes;
    ::close(fd);
    return facts;
}

bool MachineProbe::writable_directory(const std::string& dir) const {
    struct statvfs vfs {};
    return ::access(dir.c_str(), W_OK) == 0 &&
           !(::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY));
}

std::string MachineProbe::fs_type(const std::string& dir) const {
    return fs_type_of(dir, read_mountinfo());
}

std::string MachineProbe::resolved(const std::string& path) const { return resolved_path(path); }

StackConfig load_stack_file(const std::string& path) {
    return read_stack_file(path, MachineProbe());
}

StackConfig load_stack_text(std::string_view toml_text, const std::string& base_dir,
                            const std::string& label) {
    return read_stack_text(toml_text, base_dir, label, MachineProbe());
}

}  // namespace mdsplit
