#include "core/md/md_superblock.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "core/md/raid5_layout.h"
#include "core/md/raid5_resync.h"

namespace mdsplit {
namespace {

const char* state_name(MdSuperblock::State s) {
    switch (s) {
        case MdSuperblock::State::Clean:
            return "clean";
        case MdSuperblock::State::Active:
            return "active";
        case MdSuperblock::State::Faulty:
            return "faulty";
    }
    return "?";
}

// The member's superblock; nullopt when it has none of ours. errno_out:
// ENOTSUP (or another errno) when the file system keeps no user xattrs.
std::optional<MdSuperblock> load_superblock(const std::string& path, int& unsupported) {
    char buf[256];
    ssize_t n = ::getxattr(path.c_str(), kMdSuperblockXattr, buf, sizeof buf - 1);
    if (n < 0) {
        if (errno != ENODATA) unsupported = errno;
        return std::nullopt;
    }
    return MdSuperblock::parse(std::string(buf, size_t(n)));
}

void store_superblock(const std::string& path, const MdSuperblock& sb) {
    std::string text = sb.format();
    if (::setxattr(path.c_str(), kMdSuperblockXattr, text.data(), text.size(), 0) != 0)
        throw std::runtime_error("mdsplit: raid5 assembly: " + path + ": cannot write its md " +
                                 "superblock (xattr " + kMdSuperblockXattr +
                                 "): " + std::strerror(errno));
}

std::string new_uuid() {
    std::random_device rd;
    std::ostringstream s;
    for (int i = 0; i < 4; i++) {
        char part[9];
        std::snprintf(part, sizeof part, "%08x", unsigned(rd()));
        s << part;
    }
    return s.str();
}

std::string member_name(const StackConfig& config, size_t i) {
    return "members[" + std::to_string(i) + "] (" + config.members[i].path + ")";
}

// Whether every member is a regular file (or not there yet, as a new file
// is made before assembly): only those keep a superblock.
bool all_files(const StackConfig& config) {
    for (const MemberConfig& m : config.members) {
        if (m.backend != BackendKind::IoUring) return false;
        struct stat st;
        if (::stat(m.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    }
    return true;
}

MdSuperblock superblock_of(const StackConfig& config, const MdAssembly& assembly, size_t i,
                           MdSuperblock::State state);

const char* const kDirtyDegraded =
    "the array was not stopped cleanly (its last run was killed) and is degraded: its parity "
    "cannot be trusted to rebuild a member (md: cannot start dirty degraded array)";
const char* const kDirtyDegradedAllowed =
    "all its members as they were in a run that may write, so that its parity is resynced, or "
    "new member files";

[[noreturn]] void refuse(const StackConfig& config, const std::string& why,
                         const std::string& allowed) {
    std::string where = config.source.empty() ? "raid5" : config.source;
    throw std::runtime_error("mdsplit: " + where + ": " + why + "; allowed: " + allowed);
}

}  // namespace

std::string MdSuperblock::format() const {
    std::ostringstream s;
    s << "mdsplit-md 1 uuid=" << uuid << " disks=" << raid_disks << " chunk=" << chunk_bytes
      << " layout=" << int(layout) << " role=" << role << " state=" << state_name(state);
    return s.str();
}

std::optional<MdSuperblock> MdSuperblock::parse(const std::string& text) {
    std::istringstream in(text);
    std::string magic, version;
    if (!(in >> magic >> version) || magic != "mdsplit-md" || version != "1") return std::nullopt;
    MdSuperblock sb;
    bool have[6] = {};
    for (std::string field; in >> field;) {
        size_t eq = field.find('=');
        if (eq == std::string::npos) return std::nullopt;
        std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        try {
            if (key == "uuid" && value.size() == 32) {
                sb.uuid = value, have[0] = true;
            } else if (key == "disks") {
                sb.raid_disks = uint32_t(std::stoul(value)), have[1] = true;
            } else if (key == "chunk") {
                sb.chunk_bytes = std::stoull(value), have[2] = true;
            } else if (key == "layout") {
                int l = std::stoi(value);
                if (l < 0 || l > 3) return std::nullopt;
                sb.layout = Raid5Layout(l), have[3] = true;
            } else if (key == "role") {
                sb.role = uint32_t(std::stoul(value)), have[4] = true;
            } else if (key == "state") {
                if (value == "clean")
                    sb.state = State::Clean;
                else if (value == "active")
                    sb.state = State::Active;
                else if (value == "faulty")
                    sb.state = State::Faulty;
                else
                    return std::nullopt;
                have[5] = true;
            } else {
                return std::nullopt;
            }
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    for (bool h : have)
        if (!h) return std::nullopt;
    return sb;
}

MdAssembly assemble_md_array(const StackConfig& config, uint64_t member_bytes, bool writable) {
    MdAssembly a;
    const size_t n = config.members.size();
    a.faulty.assign(n, false);
    if (!all_files(config)) {
        a.action = "none";
        return a;
    }
    int unsupported = 0;
    std::vector<std::optional<MdSuperblock>> sbs;
    for (const MemberConfig& m : config.members)
        sbs.push_back(load_superblock(m.path, unsupported));
    if (unsupported) {  // no user xattrs here: nothing can be kept
        a.action = "none";
        return a;
    }
    a.kept = true;
    // The array the members say they belong to: the first superblock's.
    const MdSuperblock* first = nullptr;
    for (const auto& sb : sbs)
        if (sb && !first) first = &*sb;
    std::vector<size_t> fresh;  // members with no superblock: new disks
    bool dirty = false;
    if (first) {
        a.uuid = first->uuid;
        for (size_t i = 0; i < n; i++) {
            const auto& sb = sbs[i];
            if (!sb) {
                fresh.push_back(i);
                continue;
            }
            if (sb->uuid != first->uuid)
                refuse(config,
                       member_name(config, i) + " belongs to another array (md superblock " +
                           kMdSuperblockXattr + " uuid " + sb->uuid + ", " +
                           member_name(config, 0) + "'s is " + first->uuid + ")",
                       "the members of one array, or new member files");
            if (sb->raid_disks != n || sb->chunk_bytes != config.device.chunk_bytes ||
                sb->layout != config.device.layout)
                refuse(config,
                       member_name(config, i) + " was written as one of " +
                           std::to_string(sb->raid_disks) + " members with chunk " +
                           std::to_string(sb->chunk_bytes) + " bytes and layout " +
                           std::to_string(int(sb->layout)) + " (its md superblock, xattr " +
                           kMdSuperblockXattr + ")",
                       "that geometry, or new member files (a new array)");
            if (sb->role != i)
                refuse(config,
                       member_name(config, i) + " is member " + std::to_string(sb->role) +
                           " of its array (its md superblock, xattr " + kMdSuperblockXattr + ")",
                       "the members in their array order, or new member files");
            a.faulty[i] = sb->state == MdSuperblock::State::Faulty;
            dirty = dirty || sb->state == MdSuperblock::State::Active;
        }
    }
    std::vector<size_t> out;  // members the array runs without
    for (size_t i = 0; i < n; i++)
        if (config.members[i].failed || a.faulty[i]) out.push_back(i);
    if (!writable) {  // changes nothing: a new file stays out until a writer rebuilds it
        a.action = "read-only";
        for (size_t i : fresh)
            if (!config.members[i].failed) a.faulty[i] = true, out.push_back(i);
        if (out.size() > 1)
            refuse(config,
                   std::to_string(out.size()) +
                       " members are new or failed in an array that "
                       "survives one",
                   "one new or failed member at a time, or new files for all (a new array)");
        if (dirty && !out.empty()) refuse(config, kDirtyDegraded, kDirtyDegradedAllowed);
        return a;
    }
    Raid5Geometry geometry(uint32_t(n), uint32_t(config.device.chunk_bytes >> kSectorShift),
                           config.device.layout);
    std::vector<std::string> paths;
    for (const MemberConfig& m : config.members) paths.push_back(m.path);
    if (!first) {
        // mdadm --create: a new array. Over members that hold data its parity
        // is computed (the initial resync); over empty ones it holds already.
        a.uuid = new_uuid();
        a.action = "new";
        if (out.empty() && raid5_members_hold_data(paths, member_bytes)) {
            a.resync_rows = raid5_resync(paths, geometry, member_bytes);
            a.action = "new, resynced";
        }
    } else {
        std::vector<size_t> rebuild;
        for (size_t i : fresh)
            if (!config.members[i].failed) rebuild.push_back(i);
        if (rebuild.size() + out.size() > 1)
            refuse(config,
                   std::to_string(rebuild.size() + out.size()) +
                       " members are new or failed in an array that survives one (a new file "
                       "has no md superblock, xattr " +
                       kMdSuperblockXattr + ")",
                   "one new or failed member at a time, or new files for all (a new array)");
        if (dirty && (!out.empty() || !rebuild.empty()))
            refuse(config, kDirtyDegraded, kDirtyDegradedAllowed);
        if (dirty) {
            a.resync_rows = raid5_resync(paths, geometry, member_bytes);
            a.action = "resync";
        } else if (!rebuild.empty()) {
            a.recovered_rows =
                raid5_recover(paths, geometry, member_bytes, uint32_t(rebuild.front()));
            a.action = "recovery of members[" + std::to_string(rebuild.front()) + "]";
        } else {
            a.action = "clean";
        }
    }
    // Active from here to the clean stop: a run killed meanwhile leaves it so.
    for (size_t i = 0; i < n; i++)
        if (!config.members[i].failed)
            store_superblock(config.members[i].path,
                             superblock_of(config, a, i,
                                           a.faulty[i] ? MdSuperblock::State::Faulty
                                                       : MdSuperblock::State::Active));
    return a;
}

namespace {
// Member i's superblock in the array `assembly` took, in `state`.
MdSuperblock superblock_of(const StackConfig& config, const MdAssembly& assembly, size_t i,
                           MdSuperblock::State state) {
    MdSuperblock sb;
    sb.uuid = assembly.uuid;
    sb.raid_disks = uint32_t(config.members.size());
    sb.chunk_bytes = config.device.chunk_bytes;
    sb.layout = config.device.layout;
    sb.role = uint32_t(i);
    sb.state = state;
    return sb;
}
}  // namespace

void mark_member_faulty(const StackConfig& config, const MdAssembly& assembly, uint32_t member) {
    if (!assembly.kept || assembly.action == "read-only" || member >= config.members.size() ||
        config.members[member].failed)
        return;
    store_superblock(config.members[member].path,
                     superblock_of(config, assembly, member, MdSuperblock::State::Faulty));
}

void stop_md_array(const StackConfig& config, const MdAssembly& assembly, uint64_t failed) {
    if (!assembly.kept || assembly.action == "read-only") return;
    for (size_t i = 0; i < config.members.size(); i++) {
        if (config.members[i].failed) continue;
        bool faulty = (failed >> i & 1) || assembly.faulty[i];
        store_superblock(
            config.members[i].path,
            superblock_of(config, assembly, i,
                          faulty ? MdSuperblock::State::Faulty : MdSuperblock::State::Clean));
    }
}

}  // namespace mdsplit
