#include "stack/device_safety.h"

#include "base/mountinfo.h"

#include <blkid/blkid.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "config/config_error.h"
#include "core/md/md_superblock.h"
#include "stack/member_claim.h"

namespace mdsplit {

namespace {

constexpr size_t kProbeBytes = 68 * 1024;  // covers btrfs's superblock at 64 KiB + 64

// md_p.h MD_SB_MAGIC 0xa92b4efc as it lies on disk (little-endian).
constexpr std::string_view kMdMagic("\xfc\x4e\x2b\xa9", 4);

struct Signature {
    size_t offset;
    std::string_view magic;
    const char* what;
};

// Most specific first: a GPT disk also carries a protective MBR.
const Signature kSignatures[] = {
    {512, "EFI PART", "a GPT partition table (\"EFI PART\" at byte 512)"},
    {4096, "EFI PART", "a GPT partition table (\"EFI PART\" at byte 4096)"},
    // lvm2's label_scan reads the label from any of the first four sectors.
    {512, "LABELONE", "an LVM2 physical volume label (\"LABELONE\" at byte 512)"},
    {0, "LABELONE", "an LVM2 physical volume label (\"LABELONE\" at byte 0)"},
    {1024, "LABELONE", "an LVM2 physical volume label (\"LABELONE\" at byte 1024)"},
    {1536, "LABELONE", "an LVM2 physical volume label (\"LABELONE\" at byte 1536)"},
    {0, std::string_view("LUKS\xba\xbe", 6), "a LUKS header (\"LUKS\\xba\\xbe\" at byte 0)"},
    {0, "XFSB", "an XFS file system signature (\"XFSB\" at byte 0)"},
    {65600, "_BHRfS_M", "a btrfs file system signature (\"_BHRfS_M\" at byte 65600)"},
    {1080, std::string_view("\x53\xef", 2),
     "an ext2/3/4 file system signature (0xEF53 at byte 1080)"},
    {4086, "SWAPSPACE2", "a swap signature (\"SWAPSPACE2\" at byte 4086)"},
    {4086, "SWAP-SPACE", "a swap signature (\"SWAP-SPACE\" at byte 4086)"},
    // md's superblock 1.2 and 1.1; 1.0
    // and 0.90 sit near the end (md_end_signature).
    {4096, kMdMagic, "an md RAID superblock (0xA92B4EFC at byte 4096, version 1.2)"},
    {0, kMdMagic, "an md RAID superblock (0xA92B4EFC at byte 0, version 1.1)"},
    {510, std::string_view("\x55\xaa", 2), "a partition table or boot sector (0x55AA at byte 510)"},
};

std::string devno(dev_t d) { return std::to_string(major(d)) + ":" + std::to_string(minor(d)); }

bool parse_devno(const std::string& text, dev_t& out) {
    unsigned ma = 0, mi = 0;
    char extra = 0;
    if (sscanf(text.c_str(), "%u:%u%c", &ma, &mi, &extra) < 2) return false;
    out = makedev(ma, mi);
    return true;
}

// The first entry of a sysfs holders/ directory, "" when none.
std::string first_holder(const std::string& holders) {
    std::string name;
    if (DIR* dir = opendir(holders.c_str())) {
        while (dirent* e = readdir(dir)) {
            if (e->d_name[0] == '.') continue;
            name = e->d_name;
            break;
        }
        closedir(dir);
    }
    return name;
}

// rdev itself, or a partition of it: how to name `d` relative to rdev.
// Empty when d is neither.
std::string relation(dev_t d, dev_t rdev, const std::string& sysfs) {
    if (d == rdev) return "it";
    if (partition_parent(d, sysfs) == rdev) return "partition " + devno(d) + " of it";
    return "";
}

// The size of a file or block device, 0 when unknown.
uint64_t size_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    if (S_ISREG(st.st_mode)) return uint64_t(st.st_size);
    uint64_t bytes = 0;
    if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &bytes) == 0) return bytes;
    return 0;
}

bool magic_at(int fd, uint64_t offset, std::string_view magic) {
    char buf[8];
    return pread(fd, buf, magic.size(), off_t(offset)) == ssize_t(magic.size()) &&
           memcmp(buf, magic.data(), magic.size()) == 0;
}

/**
 * md_end_signature - an md superblock kept near the end of the device
 * @fd: the member, open for reading
 *
 * Version 1.0 sits 8 KiB before the end, rounded down to 4 KiB
 * (super_1_load: sb_start = (dev_sectors - 8 * 2) & ~(4 * 2 - 1)); 0.90 in
 * the last whole 64 KiB (MD_NEW_SIZE_SECTORS: (sectors & ~127) - 128).
 * Both start with MD_SB_MAGIC (0.90 in host order: little-endian here).
 */
std::string md_end_signature(int fd) {
    uint64_t sectors = size_of(fd) >> 9;
    if (sectors >= 16 && magic_at(fd, ((sectors - 16) & ~uint64_t(7)) << 9, kMdMagic))
        return "an md RAID superblock (0xA92B4EFC 8 KiB before the end, version 1.0)";
    if (sectors >= 256 && magic_at(fd, ((sectors & ~uint64_t(127)) - 128) << 9, kMdMagic))
        return "an md RAID superblock (0xA92B4EFC in the last 64 KiB, version 0.90)";
    return "";
}

// The paths /proc/swaps lists (swap devices and swap files), unescaped.
std::vector<std::string> swap_paths(const std::string& swaps_file) {
    std::vector<std::string> out;
    std::ifstream swaps(swaps_file);
    std::string line;
    std::getline(swaps, line);  // header
    while (std::getline(swaps, line)) {
        std::istringstream in(line);
        std::string name;
        if (in >> name) out.push_back(unescape_octal(name));
    }
    return out;
}

struct LoopBacking {
    std::string loop;  // the loop device's "major:minor"
    std::string file;  // loop/backing_file: what it reads its blocks from
};

// Every loop device's backing file or device (sysfs loop/backing_file).
std::vector<LoopBacking> loop_backings(const std::string& sysfs_dev_block) {
    std::vector<LoopBacking> out;
    if (DIR* dir = opendir(sysfs_dev_block.c_str())) {
        while (dirent* e = readdir(dir)) {
            std::ifstream backing(sysfs_dev_block + "/" + e->d_name + "/loop/backing_file");
            std::string file;
            if (std::getline(backing, file)) out.push_back(LoopBacking{e->d_name, file});
        }
        closedir(dir);
    }
    return out;
}

}  // namespace

std::string find_signature(int fd) {
    std::vector<char> buf(kProbeBytes, 0);
    size_t have = 0;
    while (have < buf.size()) {
        ssize_t n = pread(fd, buf.data() + have, buf.size() - have, off_t(have));
        if (n <= 0) break;
        have += size_t(n);
    }
    for (const Signature& s : kSignatures) {
        if (s.offset + s.magic.size() > have) continue;
        if (memcmp(buf.data() + s.offset, s.magic.data(), s.magic.size()) == 0) return s.what;
    }
    return md_end_signature(fd);
}

std::string find_signature(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string what = find_signature(fd);
    close(fd);
    return what.empty() ? probe_signature(path) : what;
}

// libblkid's low-level probe, as wipefs(8) uses it: superblocks (file
// systems, RAID members, LVM, swap, ...) and partition tables.
std::string probe_signature(const std::string& path) {
    blkid_probe pr = blkid_new_probe_from_filename(path.c_str());
    if (!pr) return "";
    blkid_probe_enable_superblocks(pr, 1);
    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
    blkid_probe_enable_partitions(pr, 1);
    std::string what;
    if (blkid_do_safeprobe(pr) == 0) {
        const char* value = nullptr;
        if (blkid_probe_lookup_value(pr, "TYPE", &value, nullptr) == 0 && value) {
            const char* usage = nullptr;
            blkid_probe_lookup_value(pr, "USAGE", &usage, nullptr);
            what = std::string("a ") + value + " signature (libblkid: TYPE=\"" + value + "\"" +
                   (usage ? std::string(", USAGE=\"") + usage + "\"" : "") + ")";
        } else if (blkid_probe_lookup_value(pr, "PTTYPE", &value, nullptr) == 0 && value) {
            what =
                std::string("a ") + value + " partition table (libblkid: PTTYPE=\"" + value + "\")";
        }
    }
    blkid_free_probe(pr);
    return what;
}

dev_t partition_parent(dev_t rdev, const std::string& sysfs) {
    std::string dir = sysfs + "/" + devno(rdev);
    struct stat st;
    if (stat((dir + "/partition").c_str(), &st) != 0) return 0;
    // /sys/dev/block/M:m links to .../block/sda/sda1; ".." is the disk.
    std::ifstream f(dir + "/../dev");
    std::string text;
    dev_t parent = 0;
    if (f >> text && parse_devno(text, parent)) return parent;
    return 0;
}

std::string find_use(dev_t rdev, const DeviceSafetyOptions& o) {
    // Mounted: field 3 of mountinfo is the file system's st_dev.
    for (const MountEntry& m : read_mountinfo(o.mountinfo)) {
        dev_t d;
        if (!parse_devno(m.dev, d)) continue;
        std::string rel = relation(d, rdev, o.sysfs_dev_block);
        if (rel.empty()) continue;
        std::string where = "mounted at " + m.point;
        return rel == "it" ? where : where + " (" + rel + ")";
    }
    // Swap: /proc/swaps names the device by path.
    for (const std::string& name : swap_paths(o.swaps)) {
        struct stat st;
        if (stat(name.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) continue;
        std::string rel = relation(st.st_rdev, rdev, o.sysfs_dev_block);
        if (rel.empty()) continue;
        return rel == "it" ? "used as swap" : "used as swap (" + rel + ")";
    }
    // A loop device whose backing file is this device (losetup /dev/loopN DEV),
    // one of its partitions, or the whole disk this device is a partition of
    // (losetup -o over the disk reaches the partition's blocks).
    dev_t whole_disk = partition_parent(rdev, o.sysfs_dev_block);
    std::vector<LoopBacking> loops = loop_backings(o.sysfs_dev_block);
    for (const LoopBacking& b : loops) {
        struct stat st;
        if (stat(b.file.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) continue;
        if (whole_disk && st.st_rdev == whole_disk)
            return "a partition of " + devno(whole_disk) + ", the backing device of loop " + b.loop;
        std::string rel = relation(st.st_rdev, rdev, o.sysfs_dev_block);
        if (rel.empty()) continue;
        return "the backing device of loop " + b.loop + (rel == "it" ? "" : " (" + rel + ")");
    }
    // A loop device over the same file as this one (losetup twice over one
    // file): writing here rewrites that loop's blocks.
    for (const LoopBacking& self : loops) {
        if (self.loop != devno(rdev)) continue;
        struct stat mine;
        if (stat(self.file.c_str(), &mine) != 0) break;
        for (const LoopBacking& b : loops) {
            struct stat st;
            if (b.loop != self.loop && stat(b.file.c_str(), &st) == 0 && st.st_dev == mine.st_dev &&
                st.st_ino == mine.st_ino && S_ISREG(st.st_mode))
                return "a loop device over the same file as loop " + b.loop + " (" + self.file +
                       ")";
        }
        break;
    }
    // Held: device-mapper, LVM or md on top of it or of one of its partitions.
    if (DIR* dir = opendir(o.sysfs_dev_block.c_str())) {
        std::string found;
        while (dirent* e = readdir(dir)) {
            dev_t d;
            if (!parse_devno(e->d_name, d)) continue;
            std::string rel = relation(d, rdev, o.sysfs_dev_block);
            if (rel.empty()) continue;
            std::string holder = first_holder(o.sysfs_dev_block + "/" + e->d_name + "/holders");
            if (holder.empty()) continue;
            found = "held by " + holder;
            if (rel != "it") found += " (" + rel + ")";
            if (rel == "it") break;  // the device itself first
        }
        closedir(dir);
        if (!found.empty()) return found;
    }
    return "";
}

std::string find_file_use(dev_t dev, ino_t ino, const DeviceSafetyOptions& o) {
    auto same_file = [&](const std::string& path) {
        struct stat st;
        return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == dev &&
               st.st_ino == ino;
    };
    // A loop device over it (losetup /dev/loopN FILE): its contents are the
    // loop's, mounted or not. loop_attr_backing_file_show() prints the path.
    for (const LoopBacking& b : loop_backings(o.sysfs_dev_block))
        if (same_file(b.file)) return "the backing file of loop " + b.loop;
    // A swap file: /proc/swaps names it by path.
    for (const std::string& name : swap_paths(o.swaps))
        if (same_file(name)) return "used as swap";
    return "";
}

std::string find_file_use(const std::string& path, const DeviceSafetyOptions& o) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
    return find_file_use(st.st_dev, st.st_ino, o);
}

void check_no_md_member(const StackConfig& config, size_t index) {
    // The array's own stack assembles it from the superblocks (md_superblock.h).
    if (config.device.kind == DeviceKind::Raid5) return;
    const MemberConfig& m = config.members[index];
    std::string signature = md_member_signature(m.path);
    if (signature.empty()) return;
    std::string key = "members[" + std::to_string(index) + "]";
    throw make_config_error(
        config.source, key + ".path",
        in_quotes(m.path) + " carries " + signature +
            ": writing it outside the array would leave the array's parity wrong",
        "the array's own raid5 stack file, jobs that only read, or force = true on " + key +
            " in the stack file (the array is then resynced at its next run)");
}

ConfigError device_in_use_error(const StackConfig& config, size_t index, const std::string& use) {
    const std::string& path = config.members[index].path;
    struct stat st;
    bool file = stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    return make_config_error(
        config.source, "members[" + std::to_string(index) + "].path",
        in_quotes(path) + " is " + use + ": writing would corrupt it",
        std::string(file ? "a file that no other run, loop device or swap area uses"
                         : "an unused device") +
            ", or allow_mounted_write=1 in every fio job that writes to it");
}

void check_device_safety(const StackConfig& config, const DeviceSafetyOptions& o) {
    struct Member {
        size_t index;
        dev_t rdev;
    };
    std::vector<Member> devices;
    for (size_t i = 0; i < config.members.size(); i++) {
        const MemberConfig& m = config.members[i];
        if (m.path.empty() || m.backend != BackendKind::IoUring) continue;
        struct stat st;
        if (stat(m.path.c_str(), &st) != 0) continue;
        if (S_ISREG(st.st_mode) && o.writes && !o.allow_mounted_write) {
            std::string use = find_file_use(st.st_dev, st.st_ino, o);
            if (!use.empty()) throw device_in_use_error(config, i, use);
        }
        if (S_ISREG(st.st_mode) && o.writes && !m.force) check_no_md_member(config, i);
        if (!S_ISBLK(st.st_mode)) continue;
        std::string key = "members[" + std::to_string(i) + "].path";
        // A whole disk and one of its partitions overlap.
        for (const Member& other : devices) {
            std::string other_key = "members[" + std::to_string(other.index) + "].path";
            if (other.rdev == st.st_rdev)
                throw make_config_error(config.source, key,
                                        in_quotes(m.path) + " is the same device as " + other_key,
                                        "one member per file or block device");
            if (partition_parent(st.st_rdev, o.sysfs_dev_block) == other.rdev)
                throw make_config_error(config.source, key,
                                        in_quotes(m.path) + " is a partition of " + other_key +
                                            " (" + in_quotes(config.members[other.index].path) +
                                            ")",
                                        "members that do not overlap");
            if (partition_parent(other.rdev, o.sysfs_dev_block) == st.st_rdev)
                throw make_config_error(config.source, key,
                                        in_quotes(m.path) + " holds " + other_key + " (" +
                                            in_quotes(config.members[other.index].path) +
                                            ") as a partition",
                                        "members that do not overlap");
        }
        devices.push_back(Member{i, st.st_rdev});
        if (!o.writes) continue;
        if (!o.allow_mounted_write) {
            std::string use = find_use(st.st_rdev, o);
            if (use.empty()) use = exclusive_holder_of(m.path, st.st_rdev);
            if (!use.empty()) throw device_in_use_error(config, i, use);
        }
        if (m.force) continue;
        std::string signature = find_signature(m.path);
        if (!signature.empty())
            throw make_config_error(
                config.source, key,
                in_quotes(m.path) + " carries " + signature + ": writing would destroy it",
                "a blank device (wipefs -a), jobs that only read, or force = true on "
                "members[" +
                    std::to_string(i) + "] in the stack file");
    }
}

}  // namespace mdsplit
