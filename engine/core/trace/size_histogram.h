// How many bios or requests of each size (in sectors) a device saw: the
// distributions seed 001 compares between bio policies.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/json_writer.h"

namespace mdsplit {

class SizeHistogram {
public:
    SizeHistogram() = default;
    SizeHistogram(const SizeHistogram& o) : counts_(o.counts_) {}
    SizeHistogram& operator=(const SizeHistogram& o) {
        counts_ = o.counts_;
        last_count_ = nullptr;
        return *this;
    }

    // One per bio or request: the size seen last (nearly always the same
    // one) skips the map lookup.
    void record(uint32_t nr_sectors) {
        if (!last_count_ || nr_sectors != last_sectors_) {
            last_sectors_ = nr_sectors;
            last_count_ = &counts_[nr_sectors];
        }
        ++*last_count_;
    }
    const std::map<uint32_t, uint64_t>& counts() const { return counts_; }
    // {"<sectors>": count, ...}
    void write_json(JsonWriter& j) const {
        j.begin_object();
        for (auto& [sectors, n] : counts_) j.field(std::to_string(sectors), n);
        j.end_object();
    }

private:
    std::map<uint32_t, uint64_t> counts_;
    uint32_t last_sectors_ = 0;
    uint64_t* last_count_ = nullptr;  // &counts_[last_sectors_]: map nodes stay put
};

}  // namespace mdsplit
