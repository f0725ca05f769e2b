// md's superblock text and the resync / recovery of a RAID5 of member files
// (engine/core/md/md_superblock.h, raid5_resync.h), computed by hand on
// three members of one 4 KiB chunk row each.
#include "core/md/md_superblock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/md/raid5_resync.h"

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

// Three member files of `rows` 4 KiB chunks, member i's bytes all `fill[i]`.
class MemberFilesTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("md_superblock_test." + std::to_string(getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::vector<std::string> make(const std::vector<uint8_t>& fill, uint64_t bytes) {
        std::vector<std::string> paths;
        for (size_t i = 0; i < fill.size(); i++) {
            paths.push_back((dir_ / ("m" + std::to_string(i))).string());
            std::ofstream(paths.back(), std::ios::binary) << std::string(bytes, char(fill[i]));
        }
        return paths;
    }
    static std::string contents(const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    fs::path dir_;
};

constexpr uint64_t kChunk = 4096;

// A superblock reads back as it was written.
TEST(MdSuperblockTest, FormatParsesBack) {
    MdSuperblock sb;
    sb.uuid = "0123456789abcdef0123456789abcdef";
    sb.raid_disks = 5;
    sb.chunk_bytes = 65536;
    sb.layout = Raid5Layout::RightAsymmetric;
    sb.role = 3;
    sb.state = MdSuperblock::State::Faulty;
    sb.faulty_roles = {1, 3};
    auto back = MdSuperblock::parse(sb.format());
    ASSERT_TRUE(back);
    EXPECT_EQ(back->format(), sb.format());
}

// Text that is not ours, or is missing a field, is no superblock.
TEST(MdSuperblockTest, ForeignOrPartialTextIsNoSuperblock) {
    EXPECT_FALSE(MdSuperblock::parse(""));
    EXPECT_FALSE(MdSuperblock::parse("something else"));
    EXPECT_FALSE(MdSuperblock::parse("mdsplit-md 1 uuid=0123456789abcdef0123456789abcdef disks=3"));
    EXPECT_FALSE(
        MdSuperblock::parse("mdsplit-md 2 uuid=0123456789abcdef0123456789abcdef disks=3 "
                            "chunk=4096 layout=2 role=0 state=clean"));
    EXPECT_FALSE(
        MdSuperblock::parse("mdsplit-md 1 uuid=0123456789abcdef0123456789abcdef disks=3 "
                            "chunk=4096 layout=2 role=0 state=odd"));
}

// A number past its field's range is refused with the field named, never
// wrapped to 32 bits (disks=4294967297 read as 1, role=-1 as 4294967295).
TEST(MdSuperblockTest, NumbersPastTheirRangeAreRefusedNotWrapped) {
    const std::string base =
        "mdsplit-md 1 uuid=0123456789abcdef0123456789abcdef chunk=4096 layout=2 "
        "state=clean faulty=- ";
    std::string why;
    EXPECT_FALSE(MdSuperblock::parse(base + "disks=4294967297 role=0", &why));
    EXPECT_EQ(why, "disks=4294967297: not a whole number from 0 to 4294967295");
    EXPECT_FALSE(MdSuperblock::parse(base + "disks=3 role=-1", &why));
    EXPECT_EQ(why, "role=-1: not a whole number from 0 to 4294967295");
    auto sb = MdSuperblock::parse(base + "disks=4294967295 role=2", &why);
    ASSERT_TRUE(sb);
    EXPECT_EQ(sb->raid_disks, 4294967295u);
}

// Row 0's parity is on member 2 (left-symmetric, 3 members): 0x11 ^ 0x22 =
// 0x33 is written over 0x00; a row already right is not rewritten.
TEST_F(MemberFilesTest, ResyncWritesTheXorOfTheDataWhereParityDiffers) {
    auto paths = make({0x11, 0x22, 0x00}, kChunk);
    Raid5Geometry g(3, kChunk >> kSectorShift, Raid5Layout::LeftSymmetric);
    ASSERT_EQ(g.parity_disk(0), 2u);
    EXPECT_EQ(raid5_resync(paths, g, kChunk), 1u);
    EXPECT_EQ(contents(paths[2]), std::string(kChunk, char(0x33)));
    EXPECT_EQ(raid5_resync(paths, g, kChunk), 0u);
}

// Member 1 rebuilt from members 0 and 2: 0x11 ^ 0x33 = 0x22.
TEST_F(MemberFilesTest, RecoveryRebuildsAMemberFromTheOthers) {
    auto paths = make({0x11, 0x00, 0x33}, kChunk);
    Raid5Geometry g(3, kChunk >> kSectorShift, Raid5Layout::LeftSymmetric);
    EXPECT_EQ(raid5_recover(paths, g, kChunk, 1), 1u);
    EXPECT_EQ(contents(paths[1]), std::string(kChunk, char(0x22)));
}

// Sparse members hold no data: nothing to resync, no row visited.
TEST_F(MemberFilesTest, SparseMembersHoldNoData) {
    std::vector<std::string> paths;
    for (int i = 0; i < 3; i++) {
        paths.push_back((dir_ / ("s" + std::to_string(i))).string());
        std::ofstream(paths.back());
        fs::resize_file(paths.back(), 1 << 20);
    }
    Raid5Geometry g(3, kChunk >> kSectorShift, Raid5Layout::LeftSymmetric);
    EXPECT_FALSE(raid5_members_hold_data(paths, 1 << 20));
    EXPECT_EQ(raid5_resync(paths, g, 1 << 20), 0u);
}

}  // namespace
}  // namespace mdsplit
