// Block-device safety: signatures found in temp files with fake magic, a
// fake mountinfo / sysfs tree for mounts, partitions and holders. Real
// loop devices are exercised by tests/py/test_device_safety.py (root).
#include <gtest/gtest.h>

#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config_error.h"
#include "stack/device_safety.h"

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/mdsplit-safety-XXXXXX";
        path_ = mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// A 128 KiB file of zeroes with `magic` at `offset`.
std::string image(const TempDir& dir, const std::string& name, size_t offset,
                  const std::string& magic) {
    std::string p = (dir.path() / name).string();
    std::string data(128 * 1024, '\0');
    data.replace(offset, magic.size(), magic);
    std::ofstream(p, std::ios::binary) << data;
    return p;
}

void write_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

TEST(DeviceSafetyTest, FindsEachSignature) {
    TempDir d;
    struct Case {
        size_t offset;
        std::string magic;
        std::string expect;  // a piece of the description
    };
    const std::vector<Case> cases = {
        {510, "\x55\xaa", "partition table or boot sector (0x55AA at byte 510)"},
        {512, "EFI PART", "GPT partition table"},
        {4096, "EFI PART", "GPT partition table (\"EFI PART\" at byte 4096)"},
        {1080, "\x53\xef", "ext2/3/4 file system signature (0xEF53 at byte 1080)"},
        {0, "XFSB", "XFS file system signature"},
        {65600, "_BHRfS_M", "btrfs file system signature"},
        {4086, "SWAPSPACE2", "swap signature"},
        {512, "LABELONE", "LVM2 physical volume"},
        {0, "LABELONE", "LVM2 physical volume label (\"LABELONE\" at byte 0)"},
        {1024, "LABELONE", "LVM2 physical volume label (\"LABELONE\" at byte 1024)"},
        {1536, "LABELONE", "LVM2 physical volume label (\"LABELONE\" at byte 1536)"},
        {0, "\xfc\x4e\x2b\xa9", "md RAID superblock (0xA92B4EFC at byte 0, version 1.1)"},
        {0, std::string("LUKS\xba\xbe", 6), "LUKS header"},
        {4096, "\xfc\x4e\x2b\xa9", "md RAID superblock"},
    };
    for (size_t i = 0; i < cases.size(); i++) {
        std::string p = image(d, "img" + std::to_string(i), cases[i].offset, cases[i].magic);
        std::string found = find_signature(p);
        EXPECT_NE(found.find(cases[i].expect), std::string::npos) << "case " << i << ": " << found;
    }
    EXPECT_EQ(find_signature(image(d, "blank", 0, "")), "");
    // Magic at the wrong place is nothing; a short file is read as far as it goes.
    EXPECT_EQ(find_signature(image(d, "off", 1081, "\x53\xef")), "");
    std::string small = (d.path() / "small").string();
    std::ofstream(small) << "XFSB";
    EXPECT_NE(find_signature(small).find("XFS"), std::string::npos);
    EXPECT_EQ(find_signature((d.path() / "missing").string()), "");
}

// md's 1.0 and 0.90 superblocks sit near the end, where super_1_load and
// MD_NEW_SIZE_SECTORS put them on a member of this size.
TEST(DeviceSafetyTest, FindsMdSuperblocksAtTheEnd) {
    TempDir d;
    const std::string magic = "\xfc\x4e\x2b\xa9";
    // 1 MiB + 5 sectors: 2053 sectors; 1.0 at (2053 - 16) & ~7 = 2032,
    // 0.90 at (2053 & ~127) - 128 = 1920.
    auto member = [&](const std::string& name, uint64_t sector) {
        std::string p = (d.path() / name).string();
        std::string data(2053 * 512, '\0');
        if (sector) data.replace(sector * 512, magic.size(), magic);
        std::ofstream(p, std::ios::binary) << data;
        return p;
    };
    EXPECT_NE(find_signature(member("v10", 2032)).find("version 1.0"), std::string::npos);
    EXPECT_NE(find_signature(member("v090", 1920)).find("version 0.90"), std::string::npos);
    EXPECT_EQ(find_signature(member("none", 0)), "");
    EXPECT_EQ(find_signature(member("elsewhere", 2033)), "");
}

TEST(DeviceSafetyTest, GptWinsOverItsProtectiveMbr) {
    TempDir d;
    std::string p = image(d, "gpt", 510, "\x55\xaa");
    {
        std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(512);
        f << "EFI PART";
    }
    EXPECT_NE(find_signature(p).find("GPT"), std::string::npos);
}

// A fake /sys/dev/block: 7:0 a disk, 7:1 its partition, 7:5 another disk.
struct FakeSystem {
    TempDir dir;
    DeviceSafetyOptions options;
    FakeSystem() {
        fs::path root = dir.path();
        write_file(root / "block/loop0/dev", "7:0\n");
        write_file(root / "block/loop0/loop0p1/dev", "7:1\n");
        write_file(root / "block/loop0/loop0p1/partition", "1\n");
        write_file(root / "block/loop5/dev", "7:5\n");
        fs::create_directories(root / "dev-block");
        fs::create_symlink("../block/loop0", root / "dev-block/7:0");
        fs::create_symlink("../block/loop0/loop0p1", root / "dev-block/7:1");
        fs::create_symlink("../block/loop5", root / "dev-block/7:5");
        options.sysfs_dev_block = (root / "dev-block").string();
        options.mountinfo = (root / "mountinfo").string();
        options.swaps = (root / "swaps").string();
        write_file(options.mountinfo,
                   "22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n"
                   "98 1 7:1 / /mnt/my\\040data rw,relatime shared:50 - ext4 /dev/loop0p1 rw\n");
        write_file(options.swaps, "Filename\tType\tSize\tUsed\tPriority\n");
    }
};

TEST(DeviceSafetyTest, PartitionParentFromSysfs) {
    FakeSystem sys;
    EXPECT_EQ(partition_parent(makedev(7, 1), sys.options.sysfs_dev_block), makedev(7, 0));
    EXPECT_EQ(partition_parent(makedev(7, 0), sys.options.sysfs_dev_block), dev_t(0));
    EXPECT_EQ(partition_parent(makedev(9, 9), sys.options.sysfs_dev_block), dev_t(0));
}

TEST(DeviceSafetyTest, MountedDeviceOrPartition) {
    FakeSystem sys;
    EXPECT_EQ(find_use(makedev(7, 1), sys.options), "mounted at /mnt/my data");
    EXPECT_EQ(find_use(makedev(7, 0), sys.options),
              "mounted at /mnt/my data (partition 7:1 of it)");
    EXPECT_EQ(find_use(makedev(7, 5), sys.options), "");
}

TEST(DeviceSafetyTest, HeldDevice) {
    FakeSystem sys;
    fs::create_directories(sys.dir.path() / "block/loop5/holders/dm-3");
    EXPECT_EQ(find_use(makedev(7, 5), sys.options), "held by dm-3");
}

// A disk whose partition an LVM PV or md array holds is in use too.
TEST(DeviceSafetyTest, HeldPartition) {
    FakeSystem sys;
    fs::create_directories(sys.dir.path() / "block/loop0/loop0p1/holders/md127");
    write_file(sys.options.mountinfo, "22 1 0:21 / /proc rw shared:12 - proc proc rw\n");
    EXPECT_EQ(find_use(makedev(7, 0), sys.options), "held by md127 (partition 7:1 of it)");
    EXPECT_EQ(find_use(makedev(7, 1), sys.options), "held by md127");
    EXPECT_EQ(find_use(makedev(7, 5), sys.options), "");
}

// A regular file a loop device reads its blocks from is in use, whatever
// path names it.
TEST(DeviceSafetyTest, BackingFileOfALoopDevice) {
    FakeSystem sys;
    std::string file = (sys.dir.path() / "disk.img").string();
    write_file(file, "x");
    fs::create_symlink(file, sys.dir.path() / "alias.img");
    write_file(sys.dir.path() / "block/loop5/loop/backing_file", file + "\n");
    struct stat st;
    ASSERT_EQ(stat((sys.dir.path() / "alias.img").c_str(), &st), 0);
    EXPECT_EQ(find_file_use(st.st_dev, st.st_ino, sys.options), "the backing file of loop 7:5");
    StackConfig config;
    config.source = "s.toml";
    config.members.push_back(MemberConfig{});
    config.members[0].path = (sys.dir.path() / "alias.img").string();
    DeviceSafetyOptions writes = sys.options;
    EXPECT_THROW(check_device_safety(config, writes), ConfigError);
    DeviceSafetyOptions reads = sys.options;
    reads.writes = false;
    EXPECT_NO_THROW(check_device_safety(config, reads));
    DeviceSafetyOptions allowed = sys.options;
    allowed.allow_mounted_write = true;
    EXPECT_NO_THROW(check_device_safety(config, allowed));
}

// A swap file is in use; another file on the same file system is not.
TEST(DeviceSafetyTest, SwapFile) {
    FakeSystem sys;
    std::string swap = (sys.dir.path() / "swap\tfile").string();
    std::string other = (sys.dir.path() / "other").string();
    write_file(swap, "x");
    write_file(other, "x");
    write_file(sys.options.swaps, "Filename\tType\tSize\tUsed\tPriority\n" +
                                      (sys.dir.path() / "swap\\011file").string() +
                                      "\tfile\t4\t0\t-2\n");
    struct stat st;
    ASSERT_EQ(stat(swap.c_str(), &st), 0);
    EXPECT_EQ(find_file_use(st.st_dev, st.st_ino, sys.options), "used as swap");
    ASSERT_EQ(stat(other.c_str(), &st), 0);
    EXPECT_EQ(find_file_use(st.st_dev, st.st_ino, sys.options), "");
}

// Regular-file members are never a block device's business.
TEST(DeviceSafetyTest, RegularFilesPass) {
    TempDir d;
    StackConfig config;
    config.source = "s.toml";
    for (int i = 0; i < 3; i++) {
        MemberConfig m;
        m.path = image(d, "m" + std::to_string(i), 1080, "\x53\xef");  // even with a signature
        config.members.push_back(m);
    }
    EXPECT_NO_THROW(check_device_safety(config));
}

}  // namespace
}  // namespace mdsplit
