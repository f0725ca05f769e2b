// Ending a closed-loop virtual-time run early (engine/sim/run_interrupt.h).
#include "sim/run_interrupt.h"

#include <gtest/gtest.h>

#include "config/config_loader.h"
#include "fio_jobs_on_stack.h"
#include "ram_nvme_stack.h"
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

// An interrupted fio job completes what it queued, the run throws, and the
// stack runs the next job.
TEST(InterruptPollTest, InterruptedJobDrainsAndThrows) {
    RamStack s;
    FioJobSpec spec = closed_loop_job(Op::Read, true, 4096, 16, uint64_t(1) << 40);
    EXPECT_THROW(run_jobs_on(s.stack, s.clock, {spec}, InterruptPoll([] { return true; })),
                 RunInterrupted);
    spec.io_size = 64 * 4096;
    FioJobResult r = run_jobs_on(s.stack, s.clock, {spec})[0];
    EXPECT_EQ(r.dir[kFioRead].ios, 64u);
    EXPECT_EQ(r.dir[kFioRead].errors, 0u);
    EXPECT_EQ(r.error, 0);
}

}  // namespace
}  // namespace mdsplit
