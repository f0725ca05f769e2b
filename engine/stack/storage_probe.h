// The machine's answers to the stack-file loader (config/storage_probe.h):
// stat(2), a block device's BLKSSZGET and BLKGETSIZE64, access(2) and
// statvfs(3) for a directory a member file is to be made in, and
// /proc/self/mountinfo. load_stack_file() and load_stack_text() read a
// stack file with them, as every run does.
#pragma once

#include <string>
#include <string_view>

#include "config/config_loader.h"

namespace mdsplit {

class MachineProbe final : public StorageProbe {
public:
    int stat(const std::string& path, struct stat& st) const override;
    BlockDeviceFacts block_device(const std::string& path) const override;
    bool writable_directory(const std::string& dir) const override;
    std::string fs_type(const std::string& dir) const override;
    std::string resolved(const std::string& path) const override;
};

// read_stack_file() / read_stack_text() (config_loader.h) with the
// machine's probe.
StackConfig load_stack_file(const std::string& path);
StackConfig load_stack_text(std::string_view toml_text, const std::string& base_dir,
                            const std::string& label);

}  // namespace mdsplit
