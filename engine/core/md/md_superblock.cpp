#include "core/md/md_superblock.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
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

std::string member_name(const StackConfig& config, size_t i) {
    return "members[" + std::to_string(i) + "] (" + config.members[i].path + ")";
}

[[noreturn]] void refuse(const StackConfig& config, const std::string& why,
                         const std::string& allowed) {
    std::string where = config.source.empty() ? "raid5" : config.source;
    throw std::runtime_error("mdsplit: " + where + ": " + why + "; allowed: " + allowed);
}

// md_do_sync()'s two log lines around @sync (a resync or a recovery, @desc),
// which returns the rows it wrote: "md: resync of RAID array md0", then
// "md: md0: resync done.", here with what was done and how long it took.
uint64_t logged_sync(const StackConfig& config, uint64_t member_bytes, const std::string& desc,
                     const std::string& why, const std::function<void(const std::string&)>& log,
                     const std::function<uint64_t()>& sync) {
    std::string where = config.source.empty() ? "raid5" : config.source;
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MiB", double(member_bytes) / (1 << 20));
    if (log)
        log("mdsplit: md: " + desc + " of RAID array " + where + " (" +
            std::to_string(config.members.size()) + " members, " + size + " each): " + why +
            ", before the first I/O");
    auto start = std::chrono::steady_clock::now();
    uint64_t rows = sync();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.2f s", secs);
    if (log)
        log("mdsplit: md: " + where + ": " + desc + " done: " + std::to_string(rows) + " of " +
            std::to_string(member_bytes / config.device.chunk_bytes) + " chunk rows written, in " +
            took);
    return rows;
}

// What a member's xattr holds.
struct Loaded {
    std::optional<MdSuperblock> sb;  // ours, parsed
    bool none = false;               // no such xattr: a new disk
    bool unsupported = false;        // the file system keeps no user xattrs
};

// The member's superblock. One that is there but is none this version
// reads (too long, another format) is refused: taken as a new disk it
// would be rebuilt over.
Loaded load_superblock(const StackConfig& config, size_t i) {
    Loaded l;
    char buf[1024];
    ssize_t n = ::getxattr(config.members[i].path.c_str(), kMdSuperblockXattr, buf, sizeof buf);
    if (n < 0 && errno == ENODATA) {
        l.none = true;
        return l;
    }
    if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
        l.unsupported = true;
        return l;
    }
    std::string why = n < 0 ? std::string("cannot be read: ") + std::strerror(errno)
                            : "is no md superblock this version reads";
    std::string reason;
    if (n >= 0) l.sb = MdSuperblock::parse(std::string(buf, size_t(n)), &reason);
    if (!reason.empty()) why += " (" + reason + ")";
    if (!l.sb)
        refuse(config, member_name(config, i) + ": its xattr " + kMdSuperblockXattr + " " + why,
               "the xattr removed (setfattr -x " + std::string(kMdSuperblockXattr) +
                   ", which makes the file a new member), or new member files");
    return l;
}

void store_superblock(const std::string& path, const MdSuperblock& sb) {
    std::string text = sb.format();
    if (::setxattr(path.c_str(), kMdSuperblockXattr, text.data(), text.size(), 0) != 0)
        throw std::runtime_error("mdsplit: raid5: " + path + ": cannot write its md superblock " +
                                 "(xattr " + kMdSuperblockXattr + "): " + std::strerror(errno));
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

// Whether every member is a regular file: only those keep a superblock.
bool all_files(const StackConfig& config) {
    for (const MemberConfig& m : config.members) {
        if (m.backend != BackendKind::IoUring) return false;
        struct stat st;
        if (::stat(m.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    }
    return true;
}

std::string names_of(const StackConfig& config, const std::vector<size_t>& members) {
    std::string out;
    for (size_t i : members) out += (out.empty() ? "" : ", ") + member_name(config, i);
    return out;
}

// Member i's superblock in the array `assembly` took, in `state`.
MdSuperblock superblock_of(const StackConfig& config, const MdAssembly& assembly, size_t i,
                           MdSuperblock::State state) {
    MdSuperblock sb;
    sb.uuid = assembly.uuid;
    sb.raid_disks = uint32_t(config.members.size());
    sb.chunk_bytes = config.device.chunk_bytes;
    sb.layout = config.device.layout;
    sb.role = uint32_t(i);
    sb.state = assembly.faulty[i] ? MdSuperblock::State::Faulty : state;
    sb.events = assembly.events;
    for (size_t k = 0; k < assembly.faulty.size(); k++)
        if (assembly.faulty[k]) sb.faulty_roles.push_back(uint32_t(k));
    return sb;
}

// What update_superblocks() could not write.
struct Unwritten {
    std::string first_error;  // "" when every superblock was written
    bool in_array = false;    // one of them a member the array runs with
};

// md_update_sb(): the array's event count bumped (mddev->events++), every
// member's superblock written with it, the array `state` (a faulty member
// says faulty).
Unwritten update_superblocks(const StackConfig& config, MdAssembly& assembly,
                             MdSuperblock::State state) noexcept {
    Unwritten u;
    assembly.events++;
    for (size_t i = 0; i < config.members.size(); i++) {
        try {
            store_superblock(config.members[i].path, superblock_of(config, assembly, i, state));
        } catch (const std::exception& e) {
            // A failed member's own may fail (a dead disk); the others list it.
            if (u.first_error.empty()) u.first_error = e.what();
            u.in_array = u.in_array || !assembly.faulty[i];
        }
    }
    return u;
}

// md.c super_1_validate(), assembling (mddev->pers == NULL): "++ev1; if
// (ev1 < mddev->events) return -EINVAL" -- a member whose event count is
// behind the freshest superblock's by more than one is not taken. (One
// behind is: a crash between two members' superblock writes leaves them so.)
bool non_fresh(const MdSuperblock& sb, uint64_t freshest) {
    return freshest > 0 && sb.events < freshest - 1;
}

// analyze_sbs(): "md: kicking non-fresh %pg from array!", and the member
// is out (md_kick_rdev_from_array): a run that may write rebuilds it like a
// new disk, one that may not runs without it.
void kick_non_fresh(const StackConfig& config, MdAssembly& a, size_t i, uint64_t events,
                    bool writable, const std::function<void(const std::string&)>& log) {
    a.kicked[i] = true;
    if (!log) return;
    std::string where = config.source.empty() ? "raid5" : config.source;
    log("mdsplit: md: kicking non-fresh " + member_name(config, i) + " from array " + where +
        "! (its md superblock's event count " + std::to_string(events) + ", the freshest " +
        std::to_string(a.events) + ": an old copy of the member; " +
        (writable ? "rebuilt from the others" : "left out of this run, which may not write") + ")");
}

const char* const kDirtyDegraded =
    "the array was not stopped cleanly (its last run was killed) and is degraded: its parity "
    "cannot be trusted to rebuild a member (md: cannot start dirty degraded array)";

}  // namespace

std::string MdSuperblock::format() const {
    std::ostringstream s;
    s << "mdsplit-md 1 uuid=" << uuid << " disks=" << raid_disks << " chunk=" << chunk_bytes
      << " layout=" << int(layout) << " role=" << role << " state=" << state_name(state)
      << " events=" << events << " faulty=";
    if (faulty_roles.empty()) s << "-";
    for (size_t k = 0; k < faulty_roles.size(); k++) s << (k ? "," : "") << faulty_roles[k];
    return s.str();
}

namespace {

// A field's value as a whole number from 0 to @max, written in decimal
// digits only: nullopt for anything else (a sign, a fraction, a number past
// @max, which a cast would have wrapped: disks=4294967297 was 1 member).
std::optional<uint64_t> parse_number(const std::string& value, uint64_t max) {
    if (value.empty() || value.size() > 20 ||
        value.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    uint64_t v = 0;
    for (char c : value) {
        if (v > (UINT64_MAX - uint64_t(c - '0')) / 10) return std::nullopt;
        v = v * 10 + uint64_t(c - '0');
    }
    if (v > max) return std::nullopt;
    return v;
}

}  // namespace

std::optional<MdSuperblock> MdSuperblock::parse(const std::string& text, std::string* why) {
    auto fail = [&](const std::string& reason) -> std::optional<MdSuperblock> {
        if (why) *why = reason;
        return std::nullopt;
    };
    std::istringstream in(text);
    std::string magic, version;
    if (!(in >> magic >> version) || magic != "mdsplit-md" || version != "1")
        return fail("not \"mdsplit-md 1 ...\"");
    MdSuperblock sb;
    const char* const required[] = {"uuid", "disks", "chunk", "layout", "role", "state", "faulty"};
    bool have[7] = {};
    auto number = [&](const std::string& key, const std::string& value, uint64_t max) {
        std::optional<uint64_t> v = parse_number(value, max);
        if (!v && why)
            *why = key + "=" + value + ": not a whole number from 0 to " + std::to_string(max);
        return v;
    };
    for (std::string field; in >> field;) {
        size_t eq = field.find('=');
        if (eq == std::string::npos) return fail("\"" + field + "\" is no key=value");
        std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        if (key == "uuid") {
            if (value.size() != 32 ||
                value.find_first_not_of("0123456789abcdef") != std::string::npos)
                return fail("uuid=" + value + ": not 32 hex digits");
            sb.uuid = value, have[0] = true;
        } else if (key == "disks") {
            auto v = number(key, value, UINT32_MAX);
            if (!v) return std::nullopt;
            sb.raid_disks = uint32_t(*v), have[1] = true;
        } else if (key == "chunk") {
            auto v = number(key, value, UINT64_MAX);
            if (!v) return std::nullopt;
            sb.chunk_bytes = *v, have[2] = true;
        } else if (key == "layout") {
            auto v = number(key, value, 3);
            if (!v) return std::nullopt;
            sb.layout = Raid5Layout(*v), have[3] = true;
        } else if (key == "role") {
            auto v = number(key, value, UINT32_MAX);
            if (!v) return std::nullopt;
            sb.role = uint32_t(*v), have[4] = true;
        } else if (key == "state") {
            if (value == "clean")
                sb.state = State::Clean;
            else if (value == "active")
                sb.state = State::Active;
            else if (value == "faulty")
                sb.state = State::Faulty;
            else
                return fail("state=" + value + ": not clean, active or faulty");
            have[5] = true;
        } else if (key == "events") {  // optional: 0 in a superblock written without one
            auto v = number(key, value, UINT64_MAX);
            if (!v) return std::nullopt;
            sb.events = *v;
        } else if (key == "faulty") {
            if (value != "-") {
                std::istringstream roles(value);
                for (std::string r; std::getline(roles, r, ',');) {
                    auto v = number(key, r, UINT32_MAX);
                    if (!v) return std::nullopt;
                    sb.faulty_roles.push_back(uint32_t(*v));
                }
            }
            have[6] = true;
        } else {
            return fail("unknown key " + key);
        }
    }
    for (size_t k = 0; k < 7; k++)
        if (!have[k]) return fail(std::string("no ") + required[k] + "=");
    return sb;
}

namespace {

// The member file's superblock text: nullopt when it has none, or it cannot
// be read.
std::optional<std::string> superblock_text(const std::string& path) {
    char buf[1024];
    ssize_t n = ::getxattr(path.c_str(), kMdSuperblockXattr, buf, sizeof buf);
    if (n < 0) return std::nullopt;
    return std::string(buf, size_t(n));
}

}  // namespace

std::string md_member_signature(const std::string& path) {
    std::optional<std::string> text = superblock_text(path);
    if (!text) return "";
    std::string where = std::string("xattr ") + kMdSuperblockXattr;
    if (std::optional<MdSuperblock> sb = MdSuperblock::parse(*text))
        return "an md superblock (" + where + ": member " + std::to_string(sb->role) +
               " of a raid5 of " + std::to_string(sb->raid_disks) + " members)";
    return "an md superblock (" + where + ")";
}

std::string mark_written_outside_array(const std::string& path) noexcept {
    try {
        std::optional<std::string> text = superblock_text(path);
        if (!text) return "";
        std::optional<MdSuperblock> sb = MdSuperblock::parse(*text);
        if (!sb || sb->state != MdSuperblock::State::Clean) return "";
        sb->state = MdSuperblock::State::Active;
        store_superblock(path, *sb);
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

MdAssembly assemble_md_array(const StackConfig& config, uint64_t member_bytes, bool writable,
                             const std::function<void(const std::string&)>& log) {
    MdAssembly a;
    const size_t n = config.members.size();
    a.faulty.assign(n, false);
    if (!all_files(config)) {
        a.action = "none";
        return a;
    }
    std::vector<Loaded> loaded;
    for (size_t i = 0; i < n; i++) {
        loaded.push_back(load_superblock(config, i));
        if (loaded.back().unsupported) {  // no user xattrs here: nothing can be kept
            a.action = "none";
            return a;
        }
    }
    a.kept = true;
    // The array the members say they belong to: the first superblock's.
    const MdSuperblock* first = nullptr;
    for (const Loaded& l : loaded)
        if (l.sb && !first) first = &*l.sb;
    std::vector<size_t> fresh;  // members with no superblock (new disks), or kicked
    a.kicked.assign(n, false);
    bool dirty = false;
    if (first) {
        a.uuid = first->uuid;
        for (const Loaded& l : loaded)  // the freshest superblock's count (analyze_sbs)
            if (l.sb) a.events = std::max(a.events, l.sb->events);
        for (size_t i = 0; i < n; i++) {
            const auto& sb = loaded[i].sb;
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
            if (non_fresh(*sb, a.events)) {
                kick_non_fresh(config, a, i, sb->events, writable, log);
                fresh.push_back(i);
                continue;  // its state and faulty list are as old as it is
            }
            // Faulty by its own superblock or by any other's list.
            a.faulty[i] = a.faulty[i] || sb->state == MdSuperblock::State::Faulty;
            for (uint32_t r : sb->faulty_roles)
                if (r < n) a.faulty[r] = true;
            dirty = dirty || sb->state == MdSuperblock::State::Active;
        }
    }
    // A new disk (or a kicked one) in a faulty member's place is a new disk.
    for (size_t i : fresh) a.faulty[i] = false;
    std::vector<size_t> out;  // members the array runs without
    for (size_t i = 0; i < n; i++)
        if (config.members[i].failed || a.faulty[i]) out.push_back(i);
    if (!writable) {  // changes nothing: a new file stays out until a writer rebuilds it
        a.read_only = true;
        a.action = "read-only";
        for (size_t i : fresh)
            if (!config.members[i].failed) a.faulty[i] = true, out.push_back(i);
        if (out.size() > 1)
            refuse(config,
                   names_of(config, out) +
                       " are new, non-fresh or failed in an array that survives one",
                   "one new or failed member at a time, or new files for all (a new array)");
        if (dirty && !out.empty())
            refuse(config, names_of(config, out) + " out: " + kDirtyDegraded,
                   "new member files (a new array)");
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
            a.resync_rows = logged_sync(
                config, member_bytes, "initial resync",
                "a new array over members that hold data: parity computed from the data", log,
                [&] { return raid5_resync(paths, geometry, member_bytes); });
            a.action = "new, resynced";
        }
    } else {
        std::vector<size_t> rebuild;
        for (size_t i : fresh)
            if (!config.members[i].failed) rebuild.push_back(i);
        std::vector<size_t> missing = out;
        missing.insert(missing.end(), rebuild.begin(), rebuild.end());
        if (missing.size() > 1)
            refuse(config,
                   names_of(config, missing) + " are new (no md superblock, xattr " +
                       kMdSuperblockXattr +
                       "), non-fresh (kicked: an older event count) or failed in an array "
                       "that survives one",
                   "one new or failed member at a time, or new files for all (a new array)");
        if (dirty && !missing.empty())
            refuse(config, names_of(config, missing) + " out: " + kDirtyDegraded,
                   "new member files (a new array)");
        if (dirty) {
            a.resync_rows = logged_sync(
                config, member_bytes, "resync",
                "it was not stopped cleanly (md superblock active): parity computed again", log,
                [&] { return raid5_resync(paths, geometry, member_bytes); });
            a.action = "resync";
        } else if (!rebuild.empty()) {
            const size_t target = rebuild.front();
            a.recovered_rows = logged_sync(
                config, member_bytes, "recovery",
                member_name(config, target) +
                    (a.kicked[target] ? " is non-fresh (kicked: an older event count)"
                                      : " is new (no md superblock)") +
                    ": rebuilt from the others",
                log,
                [&] { return raid5_recover(paths, geometry, member_bytes, uint32_t(target)); });
            a.action = "recovery of members[" + std::to_string(target) + "]";
        } else {
            a.action = "clean";
        }
    }
    // A member the stack file fails sits out a run that writes: from here on
    // it is stale, and every superblock says so.
    for (size_t i = 0; i < n; i++)
        if (config.members[i].failed) a.faulty[i] = true;
    // Active from here to the clean stop: a run killed meanwhile leaves it so.
    // A member in the array whose superblock cannot say active would be
    // taken as clean after a kill: refused (a faulty one's may fail).
    Unwritten u = update_superblocks(config, a, MdSuperblock::State::Active);
    if (u.in_array) throw std::runtime_error(u.first_error);
    return a;
}

std::string mark_member_faulty(const StackConfig& config, MdAssembly& assembly,
                               uint32_t member) noexcept {
    if (!assembly.kept || assembly.read_only || member >= config.members.size() ||
        assembly.faulty[member])
        return "";
    assembly.faulty[member] = true;
    return update_superblocks(config, assembly, MdSuperblock::State::Active).first_error;
}

std::string stop_md_array(const StackConfig& config, MdAssembly& assembly,
                          uint64_t failed) noexcept {
    if (!assembly.kept || assembly.read_only) return "";
    for (size_t i = 0; i < config.members.size(); i++)
        if (failed >> i & 1) assembly.faulty[i] = true;
    return update_superblocks(config, assembly, MdSuperblock::State::Clean).first_error;
}

}  // namespace mdsplit
