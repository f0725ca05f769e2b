// Ending a closed-loop virtual-time run early (engine/sim/run_interrupt.h).
#include "sim/run_interrupt.h"

#include <gtest/gtest.h>

#include "config/config_loader.h"
#include "ram_nvme_stack.h"
#include "sim/workload.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

struct RamStack {
    VirtualClock clock;
    StackConfig config = load_stack_text(kRamNvmeStack, ".", "<test>");
    Stack stack{config, clock, StackOptions{}};
};

// An InterruptPoll asks once per kPassesPerPoll passes, and stays set.
TEST(InterruptPollTest, AsksEveryFewPassesAndLatches) {
    int asked = 0;
    InterruptPoll poll([&] { return ++asked == 2; });
    for (uint32_t i = 1; i < 2 * InterruptPoll::kPassesPerPoll; i++) ASSERT_FALSE(poll.requested());
    EXPECT_TRUE(poll.requested());
    EXPECT_TRUE(poll.requested());
    EXPECT_EQ(asked, 2);
    EXPECT_THROW(poll.throw_if_requested(), RunInterrupted);
    EXPECT_NO_THROW(InterruptPoll().throw_if_requested());
}

// An interrupted run_workload completes what it queued, throws, and leaves
// the stack able to run the next workload.
TEST(InterruptPollTest, InterruptedWorkloadDrainsAndThrows) {
    RamStack s;
    WorkloadSpec spec;
    spec.random = true;
    spec.iodepth = 16;
    spec.total_bytes = uint64_t(1) << 40;
    EXPECT_THROW(run_workload(s.stack, spec, InterruptPoll([] { return true; })), RunInterrupted);
    spec.total_bytes = 64 * 4096;
    WorkloadResult r = run_workload(s.stack, spec);
    EXPECT_EQ(r.ios, 64u);
    EXPECT_EQ(r.errors, 0u);
}

}  // namespace
}  // namespace mdsplit
