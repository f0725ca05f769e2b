// The clean stop: which job is the last user of a device, so that it (and
// no other) writes the sidecars and stops the array clean (md's
// do_md_stop(): the superblock written with the array clean). Only jobs that
// start count: a job fio never starts (its setup_files() failed, or a
// signal or exitall_on_error came before its turn) never reaches the
// engine's cleanup, and waiting for it would leave the array unstopped. No
// fio types: the glue describes fio's jobs as JobProgress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mdsplit {

// One job of the run, as far as the device's end is concerned.
struct JobProgress {
    const void* stack = nullptr;  // the device it set up on; nullptr none, or it has ended
    bool reaped = false;          // reaped before it ran (fio's TD_REAPED)
    bool created = true;          // its thread or process exists (past TD_NOT_CREATED)
    bool terminating = false;     // told to end (a signal, exitall_on_error)
};

// The job will never start: reaped before it ran, or told to end before
// its thread or process was made ("never got a chance to start").
bool never_starts(const JobProgress& job);

// Another job than `self` on `stack` that may still start or is still
// running: while there is one, `self` is not the device's last user.
bool stack_user_still_to_end(const std::vector<JobProgress>& jobs, size_t self, const void* stack);

// The line a buffered job's end reports when write-back failed after the
// writes completed and no sync asked (the kernel says nothing then).
std::string lost_writeback_line(const std::string& label, uint64_t pages);

// The line a virtual-clock run reports when writes its model completed
// failed on the host's member files behind it (write_behind).
std::string write_behind_line(uint64_t errors);

}  // namespace mdsplit
