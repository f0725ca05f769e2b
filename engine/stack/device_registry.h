// The process's devices, one per stack key (RunPlan::stack_key()): jobs of
// one process (thread=1) naming the same stack file and device share one
// SharedStack, held here while a job uses it. The registry opens a device
// (measuring time_scale = "auto" first, once per device), and at the
// process's exit stops the devices that jobs fio never started still hold:
// sidecars written, array stopped clean (clean_stop.h). No fio types.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stack/run_plan.h"
#include "stack/shared_stack.h"
#include "stack/time_scale_auto.h"

namespace mdsplit {

class DeviceRegistry {
public:
    explicit DeviceRegistry(Clock& clock) : clock_(clock) {}

    // Job `self`'s device (RunPlan::stack_key()), opened with `config` and
    // the plan's stack_options() `so` when no job holds it (time_scale =
    // "auto" measured first over the plan's auto_scale_jobs(); its line in
    // `notice`), attached for one more job.
    std::shared_ptr<SharedStack> open(const RunPlan& plan, size_t self, const StackConfig& config,
                                      const StackOptions& so, std::string& notice);
    // The devices still held (by jobs that never started): each has its
    // sidecars written and its array stopped. The lines of sidecars that
    // could not be written.
    std::vector<std::string> stop_left();
    // Held while a job attaches to or leaves a device.
    std::mutex& mutex() { return mutex_; }

private:
    Clock& clock_;
    std::mutex mutex_;
    std::map<std::string, std::weak_ptr<SharedStack>> devices_;
};

// A job's end on its device: its written pages written back (a failed
// write-back no sync reported is one line), its I/O drained, its members'
// failures kept for later jobs (a line when more failed than are kept), its
// sidecar (`stats_path`, "" none) handed to the device. The lines to report
// go to `notices`. Throws when a trace cannot be written (the job fails);
// the sidecar is handed over first.
void end_job(SharedStack& stack, TaskContext& task, bool buffered, const std::string& label,
             const std::string& stats_path, std::vector<std::string>& notices);

// The device's end, by its last user (after md's line for failed members
// and the host-lag verdict are out: a sidecar may be the same stream): the
// sidecars written, the array stopped clean. The lines of sidecars that
// could not be written.
std::vector<std::string> stop_device(SharedStack& stack);

// The device's statistics into each sidecar of its jobs
// (SharedStack::take_sidecars(), sidecar_file.h), once the last of them has
// ended: the lines of those that could not be written.
std::vector<std::string> write_sidecars(SharedStack& stack);

}  // namespace mdsplit
