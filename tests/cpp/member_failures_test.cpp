// The run's memory of failed members (engine/stack/member_failures.h).
#include "stack/member_failures.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

namespace mdsplit {
namespace {

// A member recorded as failed is found; another is not.
TEST(MemberFailuresTest, RecordedMemberIsFailed) {
    auto table = std::make_unique<MemberFailures>();
    MemberFailures::Identity a{false, 1, 2}, b{false, 1, 3}, dev{true, 0x0700, 0};
    EXPECT_TRUE(table->record(a));
    EXPECT_TRUE(table->record(dev));
    EXPECT_TRUE(table->failed(a));
    EXPECT_TRUE(table->failed(dev));
    EXPECT_FALSE(table->failed(b));
}

// A full table says so rather than forgetting silently; a member already in it stays.
TEST(MemberFailuresTest, FullTableRefusesMore) {
    auto table = std::make_unique<MemberFailures>();
    for (uint64_t i = 0; i < MemberFailures::kCapacity; i++)
        ASSERT_TRUE(table->record({false, 9, i}));
    EXPECT_FALSE(table->record({false, 9, MemberFailures::kCapacity}));
    EXPECT_TRUE(table->record({false, 9, 5}));
    EXPECT_TRUE(table->failed({false, 9, MemberFailures::kCapacity - 1}));
}

// A file and a block device are told apart by identity_of(); a directory has none.
TEST(MemberFailuresTest, IdentityOfFileAndDirectory) {
    char path[] = "/tmp/mdsplit-member-failures-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    MemberFailures::Identity id;
    EXPECT_TRUE(MemberFailures::identity_of(path, id));
    EXPECT_FALSE(id.device);
    EXPECT_FALSE(MemberFailures::identity_of("/tmp", id));
    EXPECT_FALSE(MemberFailures::identity_of("", id));
    unlink(path);
}

// The run-wide table is shared with processes forked after the library
// loaded, as fio's forked jobs are: what a child records, the parent sees.
TEST(MemberFailuresTest, RunWideTableIsSharedWithForkedJobs) {
    MemberFailures::Identity id{false, 77, uint64_t(getpid())};
    ASSERT_FALSE(MemberFailures::run_wide().failed(id));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(MemberFailures::run_wide().record(id) ? 0 : 1);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_TRUE(MemberFailures::run_wide().failed(id));
}

}  // namespace
}  // namespace mdsplit
