// A bfq_group (struct bfq_group, block/bfq-iosched.h; block/bfq-cgroup.c):
// a cgroup's share of the device. Its entity is scheduled in its parent's
// sched_data with the group weight (io.bfq.weight); its children (the
// processes' queues and sub-groups) are scheduled in its own sched_data.
// The root group has no entity: its sched_data is the top of the hierarchy.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/block/bfq_entity.h"
#include "core/block/bfq_service_tree.h"

namespace mdsplit::bfq {

struct BfqQueue;

struct BfqGroup {
    std::string name;                // "" for the root group; nested groups use "a/b"
    BfqGroup* parent = nullptr;      // null for the root group
    BfqEntity entity;                // scheduled in parent->sched_data (unused for the root)
    BfqEntity* my_entity = nullptr;  // &entity, or null for the root group
    BfqSchedData sched_data;

    int active_entities = 0;  // children on the active trees (non-root groups)
    // Fixed counting (6.2): this group's queues counted as having pending requests.
    uint32_t num_queues_with_pending_reqs = 0;
    // async_bfqq[class][prio]: one async queue per priority, shared by the group.
    std::map<unsigned, BfqQueue*> async_queues;

    uint32_t queues = 0;  // queues created in this group (statistics)

    bool is_root() const { return my_entity == nullptr; }
};

}  // namespace mdsplit::bfq
