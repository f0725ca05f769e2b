#include "stack/member_failures.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <new>

namespace mdsplit {

bool MemberFailures::identity_of(const std::string& path, Identity& out) {
    struct stat st;
    if (path.empty() || stat(path.c_str(), &st) != 0) return false;
    if (S_ISBLK(st.st_mode)) {
        out = Identity{true, uint64_t(st.st_rdev), 0};
        return true;
    }
    if (!S_ISREG(st.st_mode)) return false;
    out = Identity{false, uint64_t(st.st_dev), uint64_t(st.st_ino)};
    return true;
}

bool MemberFailures::record(const Identity& member) {
    if (failed(member)) return true;
    size_t i = used_.fetch_add(1);
    if (i >= kCapacity) {
        used_.store(kCapacity);
        return false;
    }
    slots_[i].id = member;
    slots_[i].ready.store(true, std::memory_order_release);
    return true;
}

bool MemberFailures::failed(const Identity& member) const {
    size_t n = std::min(used_.load(), kCapacity);
    for (size_t i = 0; i < n; i++)
        if (slots_[i].ready.load(std::memory_order_acquire) && slots_[i].id == member) return true;
    return false;
}

namespace {

// Made when the library is loaded (fio loads the engine while it parses the
// job file, before it forks a job), shared with every process forked after.
MemberFailures* map_run_wide() {
    void* page = mmap(nullptr, sizeof(MemberFailures), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return new MemberFailures;  // this process only
    return new (page) MemberFailures;
}

MemberFailures* const run_wide_table = map_run_wide();

}  // namespace

MemberFailures& MemberFailures::run_wide() { return *run_wide_table; }

}  // namespace mdsplit
