#include "stack/device_claim.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace mdsplit {

namespace {

// This process's claims: one exclusive descriptor per device, and how many
// BlockDeviceClaim objects use it.
struct Held {
    int fd;
    unsigned users;
};
std::mutex claims_mutex;
std::map<dev_t, Held>& claims() {
    static std::map<dev_t, Held> table;
    return table;
}

std::string busy_phrase(int err) {
    return "held open exclusively by another program (open with O_EXCL: " +
           std::string(strerror(err)) + ")";
}

}  // namespace

BlockDeviceClaim::BlockDeviceClaim(const std::string& path, dev_t rdev) : rdev_(rdev) {
    std::lock_guard<std::mutex> l(claims_mutex);
    auto it = claims().find(rdev);
    if (it != claims().end()) {
        it->second.users++;
        owns_ = true;
        return;
    }
    int fd = open(path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
    if (fd < 0) {
        if (errno == EBUSY) throw DeviceClaimError(busy_phrase(errno));
        return;
    }
    claims()[rdev] = Held{fd, 1};
    owns_ = true;
}

BlockDeviceClaim::BlockDeviceClaim(BlockDeviceClaim&& other) noexcept
    : rdev_(other.rdev_), owns_(other.owns_) {
    other.owns_ = false;
}

BlockDeviceClaim::~BlockDeviceClaim() {
    if (!owns_) return;
    std::lock_guard<std::mutex> l(claims_mutex);
    auto it = claims().find(rdev_);
    if (it == claims().end() || --it->second.users) return;
    close(it->second.fd);
    claims().erase(it);
}

bool BlockDeviceClaim::held(dev_t rdev) {
    std::lock_guard<std::mutex> l(claims_mutex);
    return claims().count(rdev) != 0;
}

std::string exclusive_holder_of(const std::string& path, dev_t rdev) {
    if (BlockDeviceClaim::held(rdev)) return "";
    int fd = open(path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return "";
    }
    return errno == EBUSY ? busy_phrase(errno) : "";
}

}  // namespace mdsplit
