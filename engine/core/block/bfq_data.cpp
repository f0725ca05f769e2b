#include "core/block/bfq_data.h"

#include <algorithm>

namespace mdsplit::bfq {

namespace {

std::vector<std::pair<uint32_t, uint32_t>>::iterator weight_slot(
    std::vector<std::pair<uint32_t, uint32_t>>& weights, uint32_t weight) {
    auto it = weights.begin();
    while (it != weights.end() && it->first < weight) ++it;
    return it;
}

}  // namespace

// bfq_weights_tree_add(): count bfqq under its weight (once).
void BfqData::weights_tree_add(BfqQueue* bfqq) {
    if (bfqq->weight_counter) return;
    bfqq->weight_counter = bfqq->entity.weight;
    auto it = weight_slot(queue_weights, bfqq->weight_counter);
    if (it != queue_weights.end() && it->first == bfqq->weight_counter)
        it->second++;
    else
        queue_weights.insert(it, {bfqq->weight_counter, 1});
}

// __bfq_weights_tree_remove()
void BfqData::weights_counter_remove(BfqQueue* bfqq) {
    if (!bfqq->weight_counter) return;
    auto it = weight_slot(queue_weights, bfqq->weight_counter);
    if (it != queue_weights.end() && it->first == bfqq->weight_counter && --it->second == 0)
        queue_weights.erase(it);
    bfqq->weight_counter = 0;
}

// bfq_weights_tree_remove(). Legacy (before 6.2): walk up from bfqq's parent
// group and, for each ancestor group that is no longer active (neither a
// next_in_service nor an in_service_entity in its sched_data), perform the
// delayed decrement of num_groups_with_pending_reqs. The walk stops at the
// first still-active ancestor, and never reaches the root group (which has
// no entity and is never counted).
void BfqData::weights_tree_remove(BfqQueue* bfqq) {
    if (legacy_counting()) {
        for (BfqEntity* entity = bfqq->entity.parent; entity; entity = entity->parent) {
            BfqSchedData* sd = entity->my_sched_data;
            if (sd->next_in_service || sd->in_service_entity) break;
            if (entity->in_groups_with_pending_reqs) {
                entity->in_groups_with_pending_reqs = false;
                num_groups_with_pending_reqs--;
            }
        }
    }
    weights_counter_remove(bfqq);
}

// Legacy: __bfq_activate_entity() counts a group entity on its activation.
void BfqData::group_entity_activated(BfqEntity* entity) {
    if (!legacy_counting() || entity->queue) return;
    if (!entity->in_groups_with_pending_reqs) {
        entity->in_groups_with_pending_reqs = true;
        num_groups_with_pending_reqs++;
        max_groups_with_pending_reqs =
            std::max(max_groups_with_pending_reqs, num_groups_with_pending_reqs);
    }
}

// bfq_add_bfqq_in_groups_with_pending_reqs() (6.2, bfq-wf2q.c): the first
// queue of a group with pending requests counts the group, root included.
void BfqData::add_bfqq_in_groups_with_pending_reqs(BfqQueue* bfqq) {
    if (legacy_counting()) return;
    BfqEntity& entity = bfqq->entity;
    if (!entity.in_groups_with_pending_reqs) {
        entity.in_groups_with_pending_reqs = true;
        if (!(bfqq->group->num_queues_with_pending_reqs++)) num_groups_with_pending_reqs++;
        max_groups_with_pending_reqs =
            std::max(max_groups_with_pending_reqs, num_groups_with_pending_reqs);
    }
}

// bfq_del_bfqq_in_groups_with_pending_reqs()
void BfqData::del_bfqq_in_groups_with_pending_reqs(BfqQueue* bfqq) {
    if (legacy_counting()) return;
    BfqEntity& entity = bfqq->entity;
    if (entity.in_groups_with_pending_reqs) {
        entity.in_groups_with_pending_reqs = false;
        if (!(--bfqq->group->num_queues_with_pending_reqs)) num_groups_with_pending_reqs--;
    }
}

// The group term of bfq_asymmetric_scenario(): v5.18-rc1 tests
// num_groups_with_pending_reqs > 0 (the root group is never counted, so
// one active non-root group is already "asymmetric"); the patched kernel
// counts the root group too and tests > 1.
bool BfqData::groups_asymmetric() const {
    return legacy_counting() ? num_groups_with_pending_reqs > 0 : num_groups_with_pending_reqs > 1;
}

// varied_queue_weights of bfq_asymmetric_scenario(): queue_weights_tree has
// at least two nodes, unless bfqq has the smallest weight (then it receives
// no more than any other queue even without idling).
bool BfqData::varied_queue_weights(const BfqQueue* bfqq) const {
    bool smallest_weight = bfqq && bfqq->weight_counter && !queue_weights.empty() &&
                           bfqq->weight_counter == queue_weights.front().first;
    return !smallest_weight && queue_weights.size() > 1;
}

// multiple_classes_busy of bfq_asymmetric_scenario(): busy queues in at
// least two of the RT, BE and IDLE classes.
bool BfqData::multiple_classes_busy() const {
    return (busy_queues[0] && busy_queues[1]) || (busy_queues[0] && busy_queues[2]) ||
           (busy_queues[1] && busy_queues[2]);
}

// bfq_asymmetric_scenario() (v5.18-rc1 block/bfq-iosched.c; the patch
// series changes only the group term).
bool BfqData::asymmetric_scenario(const BfqQueue* bfqq) const {
    return varied_queue_weights(bfqq) || multiple_classes_busy() || groups_asymmetric();
}

}  // namespace mdsplit::bfq
