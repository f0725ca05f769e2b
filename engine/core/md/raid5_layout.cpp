#include "core/md/raid5_layout.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <stdexcept>

namespace mdsplit {

namespace {

// sector_div(chunk_number, data_disks) of raid5_compute_sector(), on the
// per-chunk read path: a 32-bit divide while the numbers fit.
inline void divide_chunk(sector_t chunk_number, uint32_t data_disks, sector_t& stripe,
                         uint32_t& index) {
    if (chunk_number <= UINT32_MAX) {
        uint32_t c = uint32_t(chunk_number);
        stripe = c / data_disks;
        index = c - uint32_t(stripe) * data_disks;
    } else {
        stripe = chunk_number / data_disks;
        index = uint32_t(chunk_number - stripe * data_disks);
    }
}

// The `case 5:` switch of raid5_compute_sector() for pd_idx.
inline uint32_t parity_index(sector_t stripe, uint32_t raid_disks, Raid5Layout layout) {
    uint32_t r =
        stripe <= UINT32_MAX ? uint32_t(stripe) % raid_disks : uint32_t(stripe % raid_disks);
    switch (layout) {
        case Raid5Layout::LeftAsymmetric:
        case Raid5Layout::LeftSymmetric:
            return raid_disks - 1 - r;
        case Raid5Layout::RightAsymmetric:
        case Raid5Layout::RightSymmetric:
            return r;
    }
    return r;
}

}  // namespace

Raid5Geometry::Raid5Geometry(uint32_t raid_disks, uint32_t chunk_sectors, Raid5Layout layout)
    : raid_disks_(raid_disks),
      chunk_sectors_(chunk_sectors),
      chunk_shift_(uint32_t(std::countr_zero(chunk_sectors))),
      layout_(layout) {
    if (raid_disks < 3) throw std::invalid_argument("mdsplit: raid5 needs at least 3 members");
    if (chunk_sectors < kRaid5StripeSectors || (chunk_sectors & (chunk_sectors - 1)))
        throw std::invalid_argument("mdsplit: raid5 chunk must be a power of two of at least 4k");
}

uint32_t Raid5Geometry::parity_disk(sector_t stripe) const {
    return parity_index(stripe, raid_disks_, layout_);
}

// raid5_compute_sector()
Raid5Location Raid5Geometry::compute_sector(sector_t r_sector) const {
    sector_t chunk_offset = r_sector & (chunk_sectors_ - 1);
    sector_t stripe;
    Raid5Location loc;
    divide_chunk(r_sector >> chunk_shift_, data_disks(), stripe, loc.dd_idx);
    loc.pd_idx = parity_index(stripe, raid_disks_, layout_);
    switch (layout_) {
        case Raid5Layout::LeftAsymmetric:
        case Raid5Layout::RightAsymmetric:
            if (loc.dd_idx >= loc.pd_idx) loc.dd_idx++;
            break;
        case Raid5Layout::LeftSymmetric:
        case Raid5Layout::RightSymmetric:
            // (pd_idx + 1 + dd_idx) % raid_disks, both below raid_disks
            loc.dd_idx += loc.pd_idx + 1;
            if (loc.dd_idx >= raid_disks_) loc.dd_idx -= raid_disks_;
            break;
    }
    loc.member_sector = (stripe << chunk_shift_) + chunk_offset;
    return loc;
}

// raid5_compute_blocknr()
sector_t Raid5Geometry::compute_blocknr(sector_t member_sector, uint32_t disk) const {
    sector_t stripe = member_sector >> chunk_shift_;
    sector_t chunk_offset = member_sector & (chunk_sectors_ - 1);
    uint32_t pd_idx = parity_index(stripe, raid_disks_, layout_);
    if (disk == pd_idx) return kParity;
    uint32_t i = disk;
    switch (layout_) {
        case Raid5Layout::LeftAsymmetric:
        case Raid5Layout::RightAsymmetric:
            if (i > pd_idx) i--;
            break;
        case Raid5Layout::LeftSymmetric:
        case Raid5Layout::RightSymmetric:
            if (i < pd_idx) i += raid_disks_;
            i -= pd_idx + 1;
            break;
    }
    sector_t chunk_number = stripe * data_disks() + i;
    return (chunk_number << chunk_shift_) + chunk_offset;
}

sector_t Raid5Geometry::usable_sectors(const std::vector<sector_t>& member_sectors,
                                       uint32_t chunk_sectors) {
    if (member_sectors.size() < 2 || !chunk_sectors) return 0;
    sector_t smallest = *std::min_element(member_sectors.begin(), member_sectors.end());
    smallest -= smallest % chunk_sectors;
    return smallest * (member_sectors.size() - 1);
}

}  // namespace mdsplit
