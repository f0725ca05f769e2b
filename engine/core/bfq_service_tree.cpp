#include "core/bfq_service_tree.h"

#include <cassert>

namespace mdsplit::bfq {

// bfq_insert() + bfq_update_active_tree(): the kernel's augmented tree keeps
// min_start per node; the multiset of start times plays that role.
void BfqServiceTree::active_insert(BfqEntity* entity) {
    assert(entity->tree == BfqTree::None);
    entity->seq = next_seq_++;
    entity->pos = active_.insert(entity).first;
    entity->start_pos = active_starts_.insert(entity->start);
    entity->tree = BfqTree::Active;
}

// bfq_extract() from the active tree. The entity's timestamps may already
// have been updated by the caller (as in __bfq_requeue_entity), so the
// element is removed through its stored position, not looked up by key.
void BfqServiceTree::active_extract(BfqEntity* entity) {
    assert(entity->tree == BfqTree::Active);
    active_.erase(entity->pos);
    active_starts_.erase(entity->start_pos);
    entity->tree = BfqTree::None;
}

void BfqServiceTree::idle_insert(BfqEntity* entity) {
    assert(entity->tree == BfqTree::None);
    entity->seq = next_seq_++;
    entity->pos = idle_.insert(entity).first;
    entity->tree = BfqTree::Idle;
}

void BfqServiceTree::idle_extract(BfqEntity* entity) {
    assert(entity->tree == BfqTree::Idle);
    idle_.erase(entity->pos);
    entity->tree = BfqTree::None;
}

// bfq_first_active_entity(): walking the tree in finish order and stopping
// at the first eligible entity finds the same entity as the kernel's
// min_start-guided descent.
BfqEntity* BfqServiceTree::first_active_entity(uint64_t vt) const {
    for (BfqEntity* e : active_)
        if (!bfq_gt(e->start, vt)) return e;
    return nullptr;
}

uint64_t BfqServiceTree::calc_vtime_jump() const {
    uint64_t m = min_start();
    return bfq_gt(m, vtime) ? m : vtime;
}

}  // namespace mdsplit::bfq
