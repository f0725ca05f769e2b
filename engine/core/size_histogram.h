// How many bios or requests of each size (in sectors) a device saw: the
// distributions seed 001 compares between bio policies.
#pragma once

#include <cstdint>
#include <map>
#include <sstream>

namespace mdsplit {

class SizeHistogram {
public:
    void record(uint32_t nr_sectors) { counts_[nr_sectors]++; }
    const std::map<uint32_t, uint64_t>& counts() const { return counts_; }
    // {"<sectors>": count, ...}
    void write_json(std::ostream& o) const {
        o << "{";
        bool first = true;
        for (auto& [sectors, n] : counts_) {
            o << (first ? "" : ", ") << "\"" << sectors << "\": " << n;
            first = false;
        }
        o << "}";
    }

private:
    std::map<uint32_t, uint64_t> counts_;
};

}  // namespace mdsplit
