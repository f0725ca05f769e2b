#include "stack/member_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace mdsplit {

namespace {

// This process's claims: one descriptor per member, holding the lock, and
// how many MemberClaim objects use it.
struct Held {
    int fd;
    unsigned users;
};

std::mutex claims_mutex;

template <typename Key>
std::map<Key, Held>& claims() {
    static std::map<Key, Held> table;
    return table;
}

std::string device_busy(int err) {
    return "held open exclusively by another program (open with O_EXCL: " +
           std::string(strerror(err)) + ")";
}

// The descriptor that holds the claim on the member open at `path`, -1 when
// it could not be opened (the member's own open reports why). Throws
// MemberClaimError when another owner has it.
int take(const std::string& path, bool device) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (device ? O_EXCL : 0));
    if (fd < 0) {
        if (device && errno == EBUSY) throw MemberClaimError(device_busy(errno));
        return -1;
    }
    if (!device && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        close(fd);
        if (err == EWOULDBLOCK)
            throw MemberClaimError(
                "being written by another mdsplit run (flock: " + std::string(strerror(err)) + ")");
        return -1;
    }
    return fd;
}

// A claim taken and let go at once: "" when it could be taken, else why not.
std::string probe_claim(const std::string& path, bool device) {
    try {
        int fd = take(path, device);
        if (fd >= 0) close(fd);
    } catch (const MemberClaimError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

MemberClaim::MemberClaim(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !(S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))) return;
    bool device = S_ISBLK(st.st_mode);
    key_ = device ? Key{true, st.st_rdev, 0} : Key{false, st.st_dev, st.st_ino};
    std::lock_guard<std::mutex> l(claims_mutex);
    auto& table = claims<Key>();
    if (auto it = table.find(key_); it != table.end()) {
        it->second.users++;
        owns_ = true;
        return;
    }
    int fd = take(path, device);
    if (fd < 0) return;
    table[key_] = Held{fd, 1};
    owns_ = true;
}

MemberClaim::MemberClaim(MemberClaim&& other) noexcept : key_(other.key_), owns_(other.owns_) {
    other.owns_ = false;
}

MemberClaim::~MemberClaim() {
    if (!owns_) return;
    std::lock_guard<std::mutex> l(claims_mutex);
    auto& table = claims<Key>();
    auto it = table.find(key_);
    if (it == table.end() || --it->second.users) return;
    close(it->second.fd);
    table.erase(it);
}

bool MemberClaim::holds_device(dev_t rdev) {
    std::lock_guard<std::mutex> l(claims_mutex);
    return claims<Key>().count(Key{true, rdev, 0}) != 0;
}

std::string exclusive_holder_of(const std::string& path, dev_t rdev) {
    if (MemberClaim::holds_device(rdev)) return "";
    return probe_claim(path, true);
}

std::string file_claim_holder(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
    {
        std::lock_guard<std::mutex> l(claims_mutex);
        if (claims<MemberClaim::Key>().count(MemberClaim::Key{false, st.st_dev, st.st_ino}))
            return "";
    }
    return probe_claim(path, false);
}

}  // namespace mdsplit
