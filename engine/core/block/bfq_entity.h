// A B-WF2Q+ schedulable entity (struct bfq_entity, block/bfq-iosched.h):
// either a bfq_queue (a leaf) or a bfq_group (an inner node, whose children
// are scheduled in its own bfq_sched_data). Plus the per-level scheduler data
// (struct bfq_sched_data): one service tree per I/O-priority class and the
// in-service / next-in-service entities of that level.
#pragma once

#include <cstdint>

#include "base/intrusive_list.h"

namespace mdsplit::bfq {

// WFQ_SERVICE_SHIFT (block/bfq-wf2q.c): virtual time = service << 22 / weight.
inline constexpr unsigned kWfqServiceShift = 22;
// BFQ_IOPRIO_CLASSES: RT, BE, IDLE; service_tree[class - 1].
inline constexpr unsigned kIoprioClasses = 3;
inline constexpr uint32_t kMinWeight = 1;               // BFQ_MIN_WEIGHT
inline constexpr uint32_t kMaxWeight = 1000;            // BFQ_MAX_WEIGHT
inline constexpr uint32_t kDefaultGroupWeight = 100;    // BFQ_DEFAULT_GRP_WEIGHT
inline constexpr unsigned kIoprioBeNr = 8;              // IOPRIO_BE_NR
inline constexpr uint32_t kWeightConversionCoeff = 10;  // BFQ_WEIGHT_CONVERSION_COEFF

// bfq_ioprio_to_weight(): (IOPRIO_BE_NR - ioprio) * 10, so prio 4 -> 40.
inline uint32_t ioprio_to_weight(unsigned ioprio) {
    return (kIoprioBeNr - ioprio) * kWeightConversionCoeff;
}

// bfq_gt(): a > b, robust to wrap-around of the virtual time.
inline bool bfq_gt(uint64_t a, uint64_t b) { return int64_t(a - b) > 0; }

struct BfqEntity;
struct BfqSchedData;
struct BfqQueue;
struct BfqGroup;

// Order of the active and idle trees: by finish time; entities with equal
// finish times stay in insertion order (bfq_insert() descends to the right
// on ties).
struct BfqFinishOrder {
    bool operator()(const BfqEntity* a, const BfqEntity* b) const;
};

enum class BfqTree : uint8_t { None, Active, Idle };

struct BfqEntity {
    // B-WF2Q+ virtual timestamps.
    uint64_t start = 0;
    uint64_t finish = 0;
    // Budget and service of the current slot, in sectors.
    uint64_t budget = 0;
    uint64_t service = 0;

    uint32_t weight = 0;  // weight in use (orig_weight * wr_coeff; wr_coeff is 1 here)
    uint32_t orig_weight = 0;
    uint32_t new_weight = 0;   // applied at the next (re)activation
    bool prio_changed = true;  // weight / class change pending

    bool on_st = false;  // on_st_or_in_serv: on a service tree or in service
    BfqTree tree = BfqTree::None;
    ListHook<BfqEntity> tree_link;  // neighbours on the tree, valid while tree != None
    uint64_t seq = 0;               // insertion order (tie break)

    BfqEntity* parent = nullptr;            // the group's entity; null at the top level
    BfqSchedData* sched_data = nullptr;     // where this entity is scheduled
    BfqSchedData* my_sched_data = nullptr;  // a group's children (null for a queue)
    BfqQueue* queue = nullptr;              // bfq_entity_to_bfqq()
    BfqGroup* group = nullptr;              // the group this entity represents, if any

    // Counted in bfqd->num_groups_with_pending_reqs (legacy: on group
    // entities; fixed: on queue entities, per-group counting).
    bool in_groups_with_pending_reqs = false;
};

inline bool BfqFinishOrder::operator()(const BfqEntity* a, const BfqEntity* b) const {
    if (a->finish != b->finish) return bfq_gt(b->finish, a->finish);
    return a->seq < b->seq;
}

// The entities of one active or idle tree, kept in BfqFinishOrder by
// insert_sorted(): an intrusive list through the entities themselves, so
// that (re)activating and expiring a queue, which happens for nearly every
// request of a psync-like job, allocates nothing. A tree holds one entity
// per queue or child group of one level and class, so a sorted insertion
// (from the tail, where new finish times go) is short; the order and its tie
// break are the kernel's rb-tree order.
using BfqEntitySet = IntrusiveList<BfqEntity, &BfqEntity::tree_link>;

}  // namespace mdsplit::bfq
