// Hierarchical B-WF2Q+ (block/bfq-wf2q.c): activation, requeueing and
// deactivation of entities up the group hierarchy, selection of the next
// queue to serve (descending from the root group through next_in_service),
// and charging of service to a queue and its ancestors.
//
// Each level (a group's sched_data) has one service tree per class; an
// entity's virtual finish time is start + budget * 2^22 / weight; the tree's
// virtual time advances by service * 2^22 / (sum of weights) as service is
// received; an entity is eligible when its start time is not after the
// virtual time; the next entity of a level is the eligible one with the
// smallest finish time in the highest-priority non-empty class (with the
// idle class served at least every 200 ms).
#pragma once

#include <cstdint>

#include "core/block/bfq_data.h"

namespace mdsplit::bfq {

// bfq_init_entity(): the queue's entity is scheduled in `group`'s sched_data.
void init_queue_entity(BfqQueue* bfqq, BfqGroup* group);
// bfq_init_entity() for a group's entity / bfq_group_set_parent().
void init_group_entity(BfqGroup* group, BfqGroup* parent);

// bfq_class_idx(): a queue's class, or BFQ_DEFAULT_GRP_CLASS (BE) for groups.
inline unsigned entity_class_idx(const BfqEntity* entity) {
    return entity->queue ? entity->queue->ioprio_class - 1 : 1;
}

// bfq_entity_service_tree()
inline BfqServiceTree* entity_service_tree(BfqEntity* entity) {
    return &entity->sched_data->service_tree[entity_class_idx(entity)];
}

// bfq_activate_bfqq(), bfq_requeue_bfqq(), bfq_deactivate_bfqq()
void activate_bfqq(BfqData& bfqd, BfqQueue* bfqq);
void requeue_bfqq(BfqData& bfqd, BfqQueue* bfqq, bool expiration);
void deactivate_bfqq(BfqData& bfqd, BfqQueue* bfqq, bool ins_into_idle_tree, bool expiration);

// bfq_add_bfqq_busy() / bfq_del_bfqq_busy(): a queue gets its first request /
// stops being scheduled; keeps busy_queues, the weights counters and the
// groups-with-pending-requests count (per variant) up to date.
void add_bfqq_busy(BfqData& bfqd, BfqQueue* bfqq);
void del_bfqq_busy(BfqData& bfqd, BfqQueue* bfqq, bool expiration);

// bfq_get_next_queue(): sets the path to the next queue in service and
// returns that queue (null when no queue is busy).
BfqQueue* get_next_queue(BfqData& bfqd);
// The B-WF2Q+ part of __bfq_bfqd_reset_in_service(): no entity on the path
// of bfqq is in service any more.
void reset_in_service_entities(BfqQueue* bfqq);
// next_queue_may_preempt()
bool next_queue_may_preempt(const BfqData& bfqd);

// bfq_bfqq_served(): charge `served` sectors to bfqq and its ancestors.
void bfqq_served(BfqData& bfqd, BfqQueue* bfqq, uint64_t served);
// bfq_bfqq_charge_time(): charge a slow queue with the time it was served.
void bfqq_charge_time(BfqData& bfqd, BfqQueue* bfqq, uint64_t time_ms);

}  // namespace mdsplit::bfq
