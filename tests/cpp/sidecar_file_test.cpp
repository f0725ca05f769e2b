// stack/sidecar_file.h: where a sidecar may go, and writing it there.
#include "stack/sidecar_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

class SidecarFile : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("sidecar_file_test." + std::to_string(getpid()) + "." +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    static std::string read(const std::string& p) {
        std::ifstream in(p);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    fs::path dir_;
};

TEST_F(SidecarFile, AFileIsReplacedWholeAndNoTemporaryIsLeft) {
    std::ofstream(path("s.json")) << "old contents that are longer";
    EXPECT_EQ(write_sidecar("s.json", path("s.json"), "{}\n"), "");
    EXPECT_EQ(read(path("s.json")), "{}\n");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SidecarFile, ALinkIsFollowedAndKept) {
    std::ofstream(path("target.json")) << "x";
    fs::create_symlink("target.json", path("link.json"));
    EXPECT_EQ(write_sidecar("link.json", path("link.json"), "{}\n"), "");
    EXPECT_TRUE(fs::is_symlink(path("link.json")));
    EXPECT_EQ(read(path("target.json")), "{}\n");
}

TEST_F(SidecarFile, AMissingDirectoryIsMade) {
    EXPECT_EQ(write_sidecar("a/b/s.json", path("a/b/s.json"), "{}\n"), "");
    EXPECT_EQ(read(path("a/b/s.json")), "{}\n");
}

TEST_F(SidecarFile, AFifoWithoutAReaderIsAStreamThatFailsWithItsLine) {
    ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
    EXPECT_TRUE(sidecar_is_stream(path("fifo")));
    EXPECT_EQ(write_sidecar("fifo", path("fifo"), "{}\n"),
              "mdsplit: mdsplit_stats=fifo: cannot write it (No such device or address); "
              "allowed: a path in a writable directory, or a writable stream");
}

TEST_F(SidecarFile, DescriptorPathsAreStreamsThroughLinks) {
    fs::create_symlink("/proc/self/fd/2", path("err"));
    EXPECT_TRUE(sidecar_is_stream(path("err")));
    EXPECT_TRUE(sidecar_is_stream("/dev/fd/1"));
    EXPECT_FALSE(sidecar_is_stream(path("plain.json")));
}

TEST_F(SidecarFile, ADirectoryIsRefusedWithTheOptionsLine) {
    EXPECT_EQ(sidecar_target_refusal("d", dir_.string(), ""),
              "mdsplit: mdsplit_stats=d is a directory; allowed: a regular file (replaced "
              "whole), or a character device or FIFO such as /dev/null or /dev/stderr");
}

TEST_F(SidecarFile, TheReportFileIsRefused) {
    std::ofstream(path("report.json")) << "{}";
    std::string report = file_identity(path("report.json"));
    EXPECT_NE(sidecar_target_refusal("report.json", path("report.json"), report)
                  .find("is where fio writes its own report"),
              std::string::npos);
    EXPECT_EQ(sidecar_target_refusal("other.json", path("other.json"), report), "");
}

TEST_F(SidecarFile, AReportNotYetMadeIsRefusedByItsPath) {
    std::string report = file_identity(path("later.json"));
    EXPECT_NE(sidecar_target_refusal("later.json", path("later.json"), report), "");
}

TEST_F(SidecarFile, APathUnderARegularFileCannotBeCreated) {
    std::ofstream(path("afile")) << "x";
    EXPECT_EQ(sidecar_target_refusal("afile/x.json", path("afile/x.json"), ""),
              "mdsplit: mdsplit_stats=afile/x.json: cannot create it (Not a directory); "
              "allowed: a path in a writable directory");
}

TEST_F(SidecarFile, TheCheckLeavesNoProbeBehind) {
    EXPECT_EQ(sidecar_target_refusal("s.json", path("s.json"), ""), "");
    EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SidecarFile, TemporariesBesideOneTargetAreDistinct) {
    std::string a, b;
    int fa = create_temporary_beside(path("t"), a);
    int fb = create_temporary_beside(path("t"), b);
    ASSERT_GE(fa, 0);
    ASSERT_GE(fb, 0);
    EXPECT_NE(a, b);
    close(fa);
    close(fb);
}

TEST_F(SidecarFile, ATerminalIsNoReport) { EXPECT_EQ(descriptor_identity(-1), ""); }

}  // namespace
}  // namespace mdsplit
