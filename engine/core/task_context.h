// What the kernel keeps in `current` for the block layer: the recursion
// lists (current->bio_list) and the plug (current->plug). One per submitter
// (fio job).
#pragma once

#include <cstdint>
#include <vector>

#include "core/bio.h"
#include "core/plug_list.h"

namespace mdsplit {

// An fio I/O that finished: its cookie, a negative errno, bytes not done.
struct IoCompletion {
    uint64_t cookie = 0;
    int32_t error = 0;
    uint64_t resid = 0;
};

struct TaskContext {
    uint32_t pid = 0;
    std::vector<IoCompletion> completions;
    uint64_t in_flight = 0;
    BioList* bio_list = nullptr;  // current->bio_list: [0] and [1]
    PlugList plug;
};

}  // namespace mdsplit
