// The stack the virtual-time drivers' tests run on (fio_job_model_test.cpp,
// run_interrupt_test.cpp): one 8 MiB ram member under the nvme timing
// model, so virtual time passes as I/O completes.
#pragma once

namespace mdsplit {

inline constexpr const char* kRamNvmeStack = R"(
[device]
kind = "passthrough"
[[members]]
path = "m0"
size = "8m"
backend = "ram"
model = "nvme"
)";

}  // namespace mdsplit
