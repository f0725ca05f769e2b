#include "core/block/bfq_service_tree.h"

#include <cassert>

namespace mdsplit::bfq {

// bfq_insert() + bfq_update_active_tree(). The start time needs no index:
// min_start() walks the (short) tree.
void BfqServiceTree::active_insert(BfqEntity* entity) {
    assert(entity->tree == BfqTree::None);
    entity->seq = next_seq_++;
    active_.insert_sorted(entity, BfqFinishOrder());
    entity->tree = BfqTree::Active;
}

// bfq_extract() from the active tree. The entity's timestamps may already
// have been updated by the caller (as in __bfq_requeue_entity), so the
// element is unlinked where it is, not looked up by key.
void BfqServiceTree::active_extract(BfqEntity* entity) {
    assert(entity->tree == BfqTree::Active);
    active_.erase(entity);
    entity->tree = BfqTree::None;
}

void BfqServiceTree::idle_insert(BfqEntity* entity) {
    assert(entity->tree == BfqTree::None);
    entity->seq = next_seq_++;
    idle_.insert_sorted(entity, BfqFinishOrder());
    entity->tree = BfqTree::Idle;
}

void BfqServiceTree::idle_extract(BfqEntity* entity) {
    assert(entity->tree == BfqTree::Idle);
    idle_.erase(entity);
    entity->tree = BfqTree::None;
}

uint64_t BfqServiceTree::min_start() const {
    uint64_t m = active_.front()->start;
    for (const BfqEntity* e : active_)
        if (e->start < m) m = e->start;
    return m;
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
