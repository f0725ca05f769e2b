// Members that failed earlier in the run, for the run's later arrays.
//
// md writes a member's failure into the other members' superblocks
// (md_error -> md_update_sb), so the array is assembled degraded from then
// on and never reads that member's stale chunks again. Our member files
// carry no superblock, and fio may give each job its own array (forked jobs
// each own a copy; create_serialize=0 sets one up per job): a later job's
// array would trust the failed member and read what it missed. Within one
// run, a MemberFailures table remembers instead: a stack records its failed
// members as a job leaves it, and a stack that has not yet done I/O takes
// the recorded ones as failed from the start, as md's assembly would.
// Between runs `failed = true` in the stack file says it
// (Stack::member_failure_notice()).
//
// The engine's table lives in a MAP_SHARED page made when the engine is
// loaded, before fio forks its jobs, so forked jobs share it (run_wide());
// `harness simulate` keeps one per run.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mdsplit {

class MemberFailures {
public:
    static constexpr size_t kCapacity = 1024;

    // A block device by its rdev, a file by (st_dev, st_ino).
    struct Identity {
        bool device = false;
        uint64_t dev = 0;
        uint64_t ino = 0;
        bool operator==(const Identity&) const = default;
    };
    // The identity of the member at `path`; false when it cannot be stat'ed
    // or is neither a regular file nor a block device.
    static bool identity_of(const std::string& path, Identity& out);

    // Notes `member` as failed. False when the table is full (kCapacity
    // failed members in one run).
    bool record(const Identity& member);
    bool failed(const Identity& member) const;

    // This process tree's table (the engine's: fio and its forked jobs).
    static MemberFailures& run_wide();

private:
    struct Slot {
        std::atomic<bool> ready{false};
        Identity id;
    };
    std::atomic<size_t> used_{0};
    Slot slots_[kCapacity];
};

}  // namespace mdsplit
