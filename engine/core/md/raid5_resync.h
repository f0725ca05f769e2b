// md's resync and recovery of a RAID5 whose members are files, done as the
// array is assembled (md_superblock.h), before its first I/O: the parity of
// each chunk row computed again from its data (raid5.c sync_request ->
// handle_parity_checks5, which writes the parity back where it does not
// match), or a new member's chunks rebuilt from the others (recovery,
// compute_block_1). Plain reads and writes through descriptors of their
// own, synced before they are closed; rows where no member holds data
// (holes, SEEK_DATA) are skipped, as they are consistent already.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/md/raid5_layout.h"

namespace mdsplit {

/**
 * raid5_members_hold_data() - whether any member has data in its first
 * @member_bytes (a file system extent that is not a hole)
 */
bool raid5_members_hold_data(const std::vector<std::string>& paths, uint64_t member_bytes);

/**
 * raid5_resync() - write each row's parity again where it does not match
 * the XOR of the row's data; returns the rows rewritten
 * @paths: the members, in role order
 * @geometry: the array's layout (which member holds each row's parity)
 * @member_bytes: the bytes of each member the array uses (rows x chunk)
 *
 * Throws std::runtime_error naming the member on an I/O error.
 */
uint64_t raid5_resync(const std::vector<std::string>& paths, const Raid5Geometry& geometry,
                      uint64_t member_bytes);

/**
 * raid5_recover() - rebuild member @target from the others (data or parity,
 * the XOR of the rest of its row); returns the rows written
 */
uint64_t raid5_recover(const std::vector<std::string>& paths, const Raid5Geometry& geometry,
                       uint64_t member_bytes, uint32_t target);

}  // namespace mdsplit
