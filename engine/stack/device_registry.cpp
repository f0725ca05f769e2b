// DeviceRegistry (device_registry.h): one SharedStack per stack key.
#include "stack/device_registry.h"

#include <exception>

#include "stack/sidecar_file.h"
#include "stack/stack.h"

namespace mdsplit {

std::shared_ptr<SharedStack> DeviceRegistry::open(const std::string& key, const StackConfig& config,
                                                  const StackOptions& so, bool exclusive,
                                                  const std::vector<AutoScaleJob>& auto_jobs,
                                                  std::string& notice) {
    std::lock_guard<std::mutex> l(mutex_);
    auto& slot = devices_[key];
    std::shared_ptr<SharedStack> stack = slot.lock();
    if (!stack) {
        // time_scale = "auto": measured now, once per device (time_scale_auto.h).
        StackConfig scaled = config;
        std::optional<TimeScaleCalibration> calibration;
        if (config.device.time_scale_auto) {
            calibration = calibrate_time_scale(config, auto_jobs, clock_);
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
        for (std::string& line : write_sidecars(*stack)) errors.push_back(std::move(line));
        stack->stop_md();
    }
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
