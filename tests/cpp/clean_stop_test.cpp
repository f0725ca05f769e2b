// stack/clean_stop.h: the last job that starts stops the device.
#include "stack/clean_stop.h"

#include <gtest/gtest.h>

#include "stack/reaped_completions.h"

namespace mdsplit {
namespace {

const int device = 0, other_device = 0;

JobProgress on(const void* stack) {
    JobProgress p;
    p.stack = stack;
    return p;
}

TEST(CleanStop, AJobReapedBeforeItRanNeverStarts) {
    JobProgress p = on(&device);
    p.reaped = true;
    EXPECT_TRUE(never_starts(p));
}

TEST(CleanStop, AJobToldToEndBeforeItWasMadeNeverStarts) {
    JobProgress p = on(&device);
    p.created = false;
    p.terminating = true;
    EXPECT_TRUE(never_starts(p));
    p.terminating = false;  // still to be made: it will start
    EXPECT_FALSE(never_starts(p));
}

TEST(CleanStop, AnotherJobThatStartsKeepsTheDevice) {
    EXPECT_TRUE(stack_user_still_to_end({on(&device), on(&device)}, 0, &device));
}

TEST(CleanStop, JobsThatNeverStartOrUseAnotherDeviceDoNot) {
    JobProgress reaped = on(&device);
    reaped.reaped = true;
    EXPECT_FALSE(
        stack_user_still_to_end({on(&device), reaped, on(&other_device), on(nullptr)}, 0, &device));
}

TEST(ReapedCompletions, MoreThanFioTakesWaitForTheNextCall) {
    ReapedCompletions r;
    for (uint64_t i = 0; i < 5; i++) r.storage().push_back(IoCompletion{i, 0, 0});
    std::vector<uint64_t> taken;
    auto take = [&](const IoCompletion& c) { taken.push_back(c.cookie); };
    EXPECT_EQ(r.take(2, take), 2u);
    EXPECT_EQ(r.waiting(), 3u);
    EXPECT_EQ(r.take(8, take), 3u);
    EXPECT_EQ(taken, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(r.waiting(), 0u);
    EXPECT_TRUE(r.storage().empty());
}

}  // namespace
}  // namespace mdsplit
