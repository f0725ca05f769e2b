// DeviceRegistry (device_registry.h): one SharedStack per stack key.
#include "stack/device_registry.h"

#include <exception>

#include "stack/clean_stop.h"
#include "stack/member_failures.h"
#include "stack/sidecar_file.h"
#include "stack/stack.h"

namespace mdsplit {

std::shared_ptr<SharedStack> DeviceRegistry::open(const RunPlan& plan, size_t self,
                                                  const StackConfig& config, const StackOptions& so,
                                                  std::string& notice) {
    const bool exclusive = plan.exclusive(self);
    std::lock_guard<std::mutex> l(mutex_);
    auto& slot = devices_[plan.stack_key(self)];
    std::shared_ptr<SharedStack> stack = slot.lock();
    if (!stack) {
        // time_scale = "auto": measured now, once per device (time_scale_auto.h).
        StackConfig scaled = config;
        std::optional<TimeScaleCalibration> calibration;
        if (config.device.time_scale_auto) {
            calibration = calibrate_time_scale(config, plan.auto_scale_jobs(self), clock_);
            scaled.device.time_scale = calibration->time_scale;
            notice = calibration->line(so.label);
        }
        stack =
            std::make_shared<SharedStack>(std::make_unique<Stack>(scaled, clock_, so), exclusive);
        if (calibration) stack->stack().host_lag().set_calibration(*calibration);
        slot = stack;
    }
    stack->attach();
    return stack;
}

// A forked job's process leaves by _exit() and runs none of this; the main
// process's copies of forked jobs' stacks were never assembled (nothing to
// stop, no sidecar).
std::vector<std::string> DeviceRegistry::stop_left() {
    std::lock_guard<std::mutex> l(mutex_);
    std::vector<std::string> errors;
    for (auto& [key, slot] : devices_) {
        std::shared_ptr<SharedStack> stack = slot.lock();
        if (!stack) continue;
        for (std::string& line : stop_device(*stack)) errors.push_back(std::move(line));
    }
    return errors;
}

void end_job(SharedStack& stack, TaskContext& task, bool buffered, const std::string& label,
             const std::string& stats_path, std::vector<std::string>& notices) {
    // Nothing written is lost at job end, unless its write-back fails: the
    // kernel then says nothing unless a sync asks; we say it here.
    if (uint64_t lost = buffered ? stack.sync_buffered() : 0)
        notices.push_back(lost_writeback_line(label, lost));
    stack.drain(task);
    stack.task_exited(task);  // the job's thread ends (bfq_exit_icq)
    if (!stack.record_member_failures(MemberFailures::run_wide()))
        notices.push_back("mdsplit: " + label + ": more members failed in this run than the " +
                          "engine keeps (" + std::to_string(MemberFailures::kCapacity) +
                          "): a later job's array may read a failed member's stale data");
    // The statistics are written even when a trace cannot be.
    if (!stats_path.empty()) stack.add_sidecar(stats_path);
    stack.flush_traces();
}

std::vector<std::string> stop_device(SharedStack& stack) {
    std::vector<std::string> errors = write_sidecars(stack);
    stack.stop_md();
    return errors;
}

std::vector<std::string> write_sidecars(SharedStack& stack) {
    std::vector<std::string> paths = stack.take_sidecars();
    std::vector<std::string> errors;
    if (paths.empty()) return errors;
    try {
        std::string json = stack.stats_json() + "\n";
        for (const std::string& path : paths)
            if (std::string why = write_sidecar(path, path, json); !why.empty())
                errors.push_back(why);
    } catch (const std::exception& e) {
        errors.push_back(std::string("mdsplit: ") + e.what());
    }
    return errors;
}

}  // namespace mdsplit
