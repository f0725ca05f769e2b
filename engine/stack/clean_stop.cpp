// The clean stop (clean_stop.h): the last job that started stops the device.
#include "stack/clean_stop.h"

namespace mdsplit {

bool never_starts(const JobProgress& job) {
    return job.reaped || (!job.created && job.terminating);
}

bool stack_user_still_to_end(const std::vector<JobProgress>& jobs, size_t self, const void* stack) {
    for (size_t i = 0; i < jobs.size(); i++)
        if (i != self && jobs[i].stack == stack && !never_starts(jobs[i])) return true;
    return false;
}

std::string lost_writeback_line(const std::string& label, uint64_t pages) {
    return "mdsplit: " + label + ": the write-back of " + std::to_string(pages) +
           " pages failed after their writes completed, and no sync reported it: that data is "
           "not on the members (as in the kernel, fio sees such errors only through fsync=, "
           "fdatasync=, end_fsync=1 or sync=)";
}

std::string write_behind_line(uint64_t errors) {
    return "mdsplit: " + std::to_string(errors) +
           " writes to member files failed on the host (the virtual run completed them)";
}

}  // namespace mdsplit
