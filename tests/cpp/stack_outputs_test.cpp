// What a Stack writes besides its members: trace files never over one of its
// inputs, and the one-line notice of a member that failed during the run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "base/clock.h"
#include "config/config_loader.h"
#include "core/md/raid5_device.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/mdsplit-outputs-XXXXXX";
        path_ = mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The trace files are the device's, then member i's, in the trace directory.
TEST(StackOutputs, TracePathsNameTheDeviceThenEachMember) {
    StackConfig config = load_stack_text(
        "[device]\nkind = \"raid5\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n",
        "/tmp", "<test>");
    EXPECT_EQ(Stack::trace_paths(config, "tr", "md0"),
              (std::vector<std::string>{"tr/md0.blktrace.0", "tr/m0.blktrace.0", "tr/m1.blktrace.0",
                                        "tr/m2.blktrace.0"}));
}

// A member file named like a trace file is refused, and left as it was.
TEST(StackOutputs, TraceOverAMemberIsRefusedAndTheMemberKept) {
    TempDir dir;
    const std::string member = dir.path() + "/m0.blktrace.0";
    std::string data(1 << 20, 'x');
    std::ofstream(member, std::ios::binary) << data;
    StackConfig config = load_stack_text("[[members]]\npath = \"m0.blktrace.0\"\n", dir.path(),
                                         dir.path() + "/stack.toml");
    RealClock clock;
    StackOptions options;
    options.label = "md0";
    options.trace_dir = dir.path();
    try {
        Stack stack(config, clock, options);
        FAIL() << "a trace over a member was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("is members[0]"), std::string::npos) << e.what();
    }
    EXPECT_EQ(contents(member), data);
}

// A stack that cannot be made leaves the host as it found it: the member it
// created is removed with its new directory, the member it grew is cut back.
TEST(StackOutputs, FailedSetupUndoesWhatOpeningMembersChanged) {
    TempDir dir;
    const std::string grown = dir.path() + "/g.img";
    std::string data(1 << 20, 'g');
    std::ofstream(grown, std::ios::binary) << data;
    std::filesystem::create_directory(dir.path() + "/adir");
    StackConfig config = load_stack_text(
        "[device]\nkind = \"raid5\"\n"
        "[[members]]\npath = \"g.img\"\nsize = \"4m\"\ngrow = true\n"
        "[[members]]\npath = \"new/m1.img\"\nsize = \"4m\"\n"
        "[[members]]\npath = \"m2.img\"\nsize = \"4m\"\n",
        dir.path(), "s.toml");
    // The third member cannot be opened: a directory took its name meanwhile.
    std::filesystem::create_directory(dir.path() + "/m2.img");
    RealClock clock;
    StackOptions options;
    options.label = "md0";
    options.writable = true;
    EXPECT_ANY_THROW(Stack(config, clock, options));
    EXPECT_EQ(contents(grown), data);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/new"));
}

// No member failed: no notice.
TEST(StackOutputs, NoNoticeWithoutAFailedMember) {
    StackConfig config = load_stack_text(
        "[device]\nkind = \"raid5\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\nfailed = true\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n",
        "/tmp", "s.toml");
    VirtualClock clock;
    Stack stack(config, clock, StackOptions{});
    EXPECT_EQ(stack.member_failure_notice(), "");  // failed from the start is not news
}

// A member md_error() marked Faulty during the run is named, with its path.
TEST(StackOutputs, NoticeNamesTheMemberThatFailedWhileRunning) {
    StackConfig config = load_stack_text(
        "[device]\nkind = \"raid5\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n",
        "/tmp", "s.toml");
    VirtualClock clock;
    StackOptions options;
    options.label = "md0";
    Stack stack(config, clock, options);
    static_cast<Raid5Device&>(stack.top()).md_error(2);
    EXPECT_EQ(stack.member_failure_notice(),
              "mdsplit: md0: members[2] failed during this run (an I/O error; md_error) and "
              "the array went on without it: its data is stale from then on, and no superblock "
              "here remembers it; allowed: failed = true on that member in s.toml for the next "
              "runs, or new member files");
}

}  // namespace
}  // namespace mdsplit
