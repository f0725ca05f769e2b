// One B-WF2Q+ service tree (struct bfq_service_tree, block/bfq-wf2q.c) and
// the per-level scheduler data that holds one tree per I/O-priority class
// (struct bfq_sched_data).
//
// The active tree holds backlogged entities ordered by virtual finish time;
// an entity is eligible when its virtual start time is not after the tree's
// virtual time, and the next entity served is the eligible one with the
// smallest finish time (bfq_first_active_entity). The kernel keeps min_start
// in an augmented rb-tree; here the trees are short sorted lists (see
// BfqEntitySet) and the minimum is found by walking the active one. The
// idle tree keeps entities that went idle before their finish time (so that
// a quick reactivation cannot gain service), until the virtual time passes
// their finish time (bfq_forget_idle).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/block/bfq_entity.h"

namespace mdsplit::bfq {

class BfqServiceTree {
public:
    uint64_t vtime = 0;  // system virtual time of this tree
    // Sum of the weights of the entities on this tree (active, idle, in service).
    uint64_t wsum = 0;

    bool active_empty() const { return active_.empty(); }
    size_t active_size() const { return active_.size(); }
    size_t idle_size() const { return idle_.size(); }
    const BfqEntitySet& active() const { return active_; }
    const BfqEntitySet& idle() const { return idle_; }

    // bfq_active_insert() / bfq_active_extract() (tree part only).
    void active_insert(BfqEntity* entity);
    void active_extract(BfqEntity* entity);
    // bfq_idle_insert() / bfq_idle_extract().
    void idle_insert(BfqEntity* entity);
    void idle_extract(BfqEntity* entity);
    BfqEntity* first_idle() const { return idle_.front(); }
    BfqEntity* last_idle() const { return idle_.back(); }

    // Smallest start time on the active tree (the root's min_start). The
    // tree must not be empty.
    uint64_t min_start() const;
    // bfq_first_active_entity(): the eligible (start <= vtime) entity with
    // the smallest finish time, or null.
    BfqEntity* first_active_entity(uint64_t vtime) const;
    // bfq_calc_vtime_jump(): the virtual time at which at least one active
    // entity is eligible. The tree must not be empty.
    uint64_t calc_vtime_jump() const;

private:
    BfqEntitySet active_;
    BfqEntitySet idle_;
    uint64_t next_seq_ = 1;
};

struct BfqSchedData {
    BfqGroup* group = nullptr;  // the group owning this level (container_of in the kernel)
    BfqEntity* in_service_entity = nullptr;
    BfqEntity* next_in_service = nullptr;
    BfqServiceTree service_tree[kIoprioClasses];
    uint64_t class_idle_last_service_ns = 0;  // bfq_class_idle_last_service
};

}  // namespace mdsplit::bfq
