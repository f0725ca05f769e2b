// md's superblock for a RAID5 of member files, and what md does with it as
// it assembles the array (drivers/md/md.c: super_1_load, analyze_sbs,
// md_update_sb; raid5.c: raid5_run).
//
// md keeps on every member which array it belongs to (set_uuid), the
// array's geometry, the member's role, an event count, and whether the
// array was stopped cleanly (resync_offset = MaxSector) or is active. As it
// assembles, a member of another array or in another role is not taken, a
// member whose event count is behind the freshest's by more than one is
// kicked as non-fresh (an old copy of it restored: cp -a, rsync -X, a
// snapshot) and rebuilt from the others, or left out by a run that may not
// write -- never trusted; an array that
// was not stopped cleanly is resynced (parity computed again from the data:
// the stripes a crash cut between a data write and its parity write), a new
// disk in a member's role is recovered (its contents rebuilt from the
// others), a member marked faulty stays out, and a dirty array that is also
// degraded is refused ("cannot start dirty degraded array": its parity
// cannot rebuild the missing member). A new array (`mdadm --create`) over
// members that already hold data is resynced too.
//
// Here a member's data is the whole file, so the superblock lives in an
// extended attribute of the file, user.mdsplit.md (one line of text). Only
// arrays whose members are all regular files on a file system with user
// extended attributes keep one; for others (block devices, ram and null
// members) nothing is kept and the members are trusted as they are. The
// resync and the recovery run at assembly, before the first I/O, with plain
// reads and writes (raid5_resync.h): they cost no device time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/stack_config.h"

namespace mdsplit {

inline constexpr const char* kMdSuperblockXattr = "user.mdsplit.md";

struct MdSuperblock {
    enum class State { Clean, Active, Faulty };
    std::string uuid;  // the array's set_uuid: 32 hex digits
    uint32_t raid_disks = 0;
    uint64_t chunk_bytes = 0;
    Raid5Layout layout = Raid5Layout::LeftSymmetric;
    uint32_t role = 0;  // the member's slot: its index in [[members]]
    State state = State::Clean;
    // md's event count (sb->events): the array's count when this superblock
    // was last written. Every update of the superblocks bumps it (the array
    // going active, a member failing, the clean stop), so a member whose
    // count is behind is an old copy (md.c super_1_validate). 0 in a
    // superblock written without one.
    uint64_t events = 0;
    // The roles the array runs without (md's dev_roles of every superblock
    // mark a failed member; here each member lists them): a member stays
    // out when any superblock names it, even one that could not be written.
    std::vector<uint32_t> faulty_roles;

    std::string format() const;
    // nullopt for text that is no superblock of ours, @why (when given)
    // saying which field is wrong. Numbers are decimal digits within their
    // field's range (never wrapped to 32 bits).
    static std::optional<MdSuperblock> parse(const std::string& text, std::string* why = nullptr);
};

// What assemble_md_array() found and did.
struct MdAssembly {
    bool kept = false;            // the array keeps superblocks (all members files with xattrs)
    bool read_only = false;       // the run may not write: no superblock is written
    std::string action;           // "new", "clean", "resync", "recovery", "read-only", "none"
    std::vector<bool> faulty;     // members the superblocks hold faulty: they stay out
    uint64_t resync_rows = 0;     // chunk rows whose parity was written again
    uint64_t recovered_rows = 0;  // chunk rows rebuilt onto a new member
    std::string uuid;
    uint64_t events = 0;       // the array's event count (mddev->events)
    std::vector<bool> kicked;  // members kicked as non-fresh: rebuilt, or out (read-only)
};

/**
 * assemble_md_array() - take a RAID5's members as md assembles them
 * @config: the stack file (members, geometry, failed = true)
 * @member_bytes: the bytes of each member the array uses (rows x chunk)
 * @writable: the run may write; a read-only one changes nothing
 * @log: takes md's two kernel log lines around a resync or recovery (md.c
 *       md_do_sync: "md: resync of RAID array", "resync done."), each one
 *       line, so that a long one is not taken for a hang
 *
 * Reads each member's superblock, refuses what md would not assemble
 * (std::runtime_error, one line naming the member and what is allowed),
 * resyncs or recovers, and marks every member it takes active.
 */
MdAssembly assemble_md_array(const StackConfig& config, uint64_t member_bytes, bool writable,
                             const std::function<void(const std::string&)>& log = {});

/**
 * md_member_signature() - what marks the file at @path as a member of an
 * array (its user.mdsplit.md xattr), as device safety names a signature:
 * "an md superblock (xattr user.mdsplit.md: member 1 of a raid5 of 4
 * members)", or "" for a file without one (or an xattr that cannot be read)
 */
std::string md_member_signature(const std::string& path);

/**
 * mark_written_outside_array() - the array of the member file at @path
 * was written behind md's back (a non-RAID stack with force = true): its
 * superblock says active, so the array's next run resyncs its parity
 * instead of trusting it. "" when done or nothing to mark, else why not.
 */
std::string mark_written_outside_array(const std::string& path) noexcept;

/**
 * mark_member_faulty() - md_error()'s md_update_sb(): member @member failed
 * while running (or an earlier job of the run failed it), and every
 * superblock says so from now on
 *
 * Never throws (it runs on the I/O path): returns what could not be
 * written, "" when all was.
 */
std::string mark_member_faulty(const StackConfig& config, MdAssembly& assembly,
                               uint32_t member) noexcept;

/**
 * stop_md_array() - the clean stop: superblocks say clean, listing the
 * members that failed (@failed bit i, and those already faulty)
 *
 * Writes every member it can; returns what could not be written, "" when all was.
 */
std::string stop_md_array(const StackConfig& config, MdAssembly& assembly,
                          uint64_t failed) noexcept;

}  // namespace mdsplit
