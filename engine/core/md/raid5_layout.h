// md RAID5 address mapping: where a virtual sector lives and which member
// holds the parity of its stripe, for md's four RAID5 layouts
// (drivers/md/raid5.c raid5_compute_sector / raid5_compute_blocknr).
#pragma once

#include <cstdint>
#include <vector>

#include "base/units.h"
#include "config/stack_config.h"

namespace mdsplit {

// RAID5_STRIPE_SECTORS: a stripe head covers one 4 KiB page per member.
inline constexpr uint32_t kRaid5StripeSectors = 8;
inline constexpr uint64_t kRaid5StripeBytes = uint64_t(kRaid5StripeSectors) << kSectorShift;

// ALGORITHM_* numbers of drivers/md/raid5.h (mdadm's --layout).
inline constexpr int raid5_algorithm(Raid5Layout layout) { return int(layout); }

struct Raid5Location {
    uint32_t dd_idx = 0;  // member holding the data
    uint32_t pd_idx = 0;  // member holding the stripe's parity
    sector_t member_sector = 0;
};

class Raid5Geometry {
public:
    // compute_blocknr() of the parity member.
    static constexpr sector_t kParity = ~sector_t(0);

    Raid5Geometry(uint32_t raid_disks, uint32_t chunk_sectors, Raid5Layout layout);

    // raid5_compute_sector(): virtual sector -> data member, parity member,
    // sector on the member.
    Raid5Location compute_sector(sector_t r_sector) const;
    // pd_idx of chunk-stripe `stripe` (member sector / chunk sectors).
    uint32_t parity_disk(sector_t stripe) const;
    // raid5_compute_blocknr(): the virtual sector stored at member_sector of
    // `disk`, or kParity when that member holds the stripe's parity.
    sector_t compute_blocknr(sector_t member_sector, uint32_t disk) const;

    // What md exposes: (N-1) x the smallest member rounded down to a chunk.
    static sector_t usable_sectors(const std::vector<sector_t>& member_sectors,
                                   uint32_t chunk_sectors);

    uint32_t raid_disks() const { return raid_disks_; }
    uint32_t data_disks() const { return raid_disks_ - 1; }
    uint32_t chunk_sectors() const { return chunk_sectors_; }
    Raid5Layout layout() const { return layout_; }

private:
    uint32_t raid_disks_;
    uint32_t chunk_sectors_;
    uint32_t chunk_shift_;  // chunk_sectors_ is a power of two
    Raid5Layout layout_;
};

}  // namespace mdsplit
