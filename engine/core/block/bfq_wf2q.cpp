// Hierarchical B-WF2Q+, following block/bfq-wf2q.c (function names in the
// comments are the kernel's).
#include "core/block/bfq_wf2q.h"

#include <algorithm>
#include <cassert>

namespace mdsplit::bfq {

namespace {

constexpr uint64_t kClassIdleTimeoutNs = 200'000'000;  // BFQ_CL_IDLE_TIMEOUT (HZ / 5)

unsigned class_idx(const BfqEntity* entity) { return entity_class_idx(entity); }

// bfq_delta(): map service into the virtual time domain.
uint64_t bfq_delta(uint64_t service, uint64_t weight) {
    return weight ? (service << kWfqServiceShift) / weight : 0;
}

// bfq_calc_finish()
void calc_finish(BfqEntity* entity, uint64_t service) {
    entity->finish = entity->start + bfq_delta(service, entity->weight);
}

// bfq_active_insert(): the tree, plus bfqd->active_list and the owning
// group's active_entities.
void active_insert(BfqData& bfqd, BfqServiceTree* st, BfqEntity* entity) {
    st->active_insert(entity);
    if (BfqQueue* q = entity->queue) {
        bfqd.active_list.push_front(q);
        q->on_active_list = true;
    }
    BfqGroup* owner = entity->sched_data->group;
    if (owner && !owner->is_root()) owner->active_entities++;
}

// bfq_active_extract()
void active_extract(BfqData& bfqd, BfqServiceTree* st, BfqEntity* entity) {
    st->active_extract(entity);
    if (BfqQueue* q = entity->queue) {
        if (q->on_active_list) bfqd.active_list.erase(q);
        q->on_active_list = false;
    }
    BfqGroup* owner = entity->sched_data->group;
    if (owner && !owner->is_root()) owner->active_entities--;
}

// bfq_forget_entity(): the entity leaves its service tree for good.
void forget_entity(BfqServiceTree* st, BfqEntity* entity) {
    entity->on_st = false;
    st->wsum -= entity->weight;
}

// bfq_put_idle_entity()
void put_idle_entity(BfqServiceTree* st, BfqEntity* entity) {
    st->idle_extract(entity);
    forget_entity(st, entity);
}

// bfq_forget_idle(): drop idle entities whose finish time the virtual time
// has passed (one per call, as the kernel does).
void forget_idle(BfqServiceTree* st) {
    BfqEntity* first_idle = st->first_idle();
    BfqEntity* last_idle = st->last_idle();
    if (st->active_empty() && last_idle && !bfq_gt(last_idle->finish, st->vtime)) {
        // Forget the whole idle tree, increasing the vtime past the last
        // finish time of idle entities.
        st->vtime = last_idle->finish;
    }
    if (first_idle && !bfq_gt(first_idle->finish, st->vtime)) put_idle_entity(st, first_idle);
}

// bfq_update_vtime()
void update_vtime(BfqServiceTree* st, uint64_t new_value) {
    if (bfq_gt(new_value, st->vtime)) {
        st->vtime = new_value;
        forget_idle(st);
    }
}

// __bfq_entity_update_weight_prio(): apply a pending weight / class change.
BfqServiceTree* update_weight_prio(BfqData& bfqd, BfqServiceTree* old_st, BfqEntity* entity,
                                   bool update_class_too) {
    BfqServiceTree* new_st = old_st;
    if (!entity->prio_changed) return new_st;
    BfqQueue* bfqq = entity->queue;
    old_st->wsum -= entity->weight;
    if (entity->new_weight != entity->orig_weight)
        entity->orig_weight = std::clamp(entity->new_weight, kMinWeight, kMaxWeight);
    if (bfqq && update_class_too) {
        bfqq->ioprio_class = bfqq->new_ioprio_class;
        bfqq->ioprio = bfqq->new_ioprio;
    }
    if (!bfqq || bfqq->ioprio_class == bfqq->new_ioprio_class) entity->prio_changed = false;
    new_st = entity_service_tree(entity);
    uint32_t prev_weight = entity->weight;
    uint32_t new_weight = entity->orig_weight;  // * wr_coeff, which is 1 (no weight raising)
    bool recount = bfqq && prev_weight != new_weight && bfqq->weight_counter;
    if (recount) bfqd.weights_counter_remove(bfqq);
    entity->weight = new_weight;
    if (recount) bfqd.weights_tree_add(bfqq);
    new_st->wsum += entity->weight;
    if (new_st != old_st) entity->start = new_st->vtime;
    return new_st;
}

// bfq_update_fin_time_enqueue()
void update_fin_time_enqueue(BfqData& bfqd, BfqEntity* entity, BfqServiceTree* st,
                             bool backshifted) {
    st = update_weight_prio(bfqd, st, entity, true);
    calc_finish(entity, entity->budget);
    // Push backshifted timestamps up to the system virtual time, so that a
    // queue enjoying hole recovery cannot monopolise the device.
    if (backshifted && bfq_gt(st->vtime, entity->finish)) {
        uint64_t delta = st->vtime - entity->finish;
        entity->start += delta;
        entity->finish += delta;
    }
    active_insert(bfqd, st, entity);
}

// __bfq_activate_entity(): a true activation (entity neither in service nor
// on its active tree).
void activate_entity(BfqData& bfqd, BfqEntity* entity, bool non_blocking_wait_rq) {
    BfqServiceTree* st = entity_service_tree(entity);
    bool backshifted = false;
    uint64_t min_vstart;
    // See bfq_bfqq_update_budg_for_activation(): hole recovery.
    if (non_blocking_wait_rq && bfq_gt(st->vtime, entity->finish)) {
        backshifted = true;
        min_vstart = entity->finish;
    } else {
        min_vstart = st->vtime;
    }
    if (entity->tree == BfqTree::Idle) {
        st->idle_extract(entity);
        entity->start = bfq_gt(min_vstart, entity->finish) ? min_vstart : entity->finish;
    } else {
        // The finish time of the entity may be invalid, and it is in the
        // past for sure, otherwise the entity would be on the idle tree.
        entity->start = min_vstart;
        st->wsum += entity->weight;
        entity->on_st = true;
    }
    bfqd.group_entity_activated(entity);  // legacy group counting
    update_fin_time_enqueue(bfqd, entity, st, backshifted);
}

// __bfq_requeue_entity(): reposition an in-service or active entity.
void requeue_entity(BfqData& bfqd, BfqEntity* entity) {
    BfqSchedData* sd = entity->sched_data;
    BfqServiceTree* st = entity_service_tree(entity);
    if (entity == sd->in_service_entity) {
        // Account for the service received while in service.
        calc_finish(entity, entity->service);
        entity->start = entity->finish;
        if (entity->tree == BfqTree::Active) active_extract(bfqd, st, entity);
    } else if (entity->tree == BfqTree::Active) {
        active_extract(bfqd, st, entity);
    }
    update_fin_time_enqueue(bfqd, entity, st, false);
}

// __bfq_activate_requeue_entity()
void activate_requeue_one(BfqData& bfqd, BfqEntity* entity, BfqSchedData* sd,
                          bool non_blocking_wait_rq) {
    if (sd->in_service_entity == entity || entity->tree == BfqTree::Active)
        requeue_entity(bfqd, entity);
    else
        activate_entity(bfqd, entity, non_blocking_wait_rq);
}

// bfq_update_parent_budget(): a group's budget is its next child's.
bool update_parent_budget(BfqEntity* next_in_service) {
    BfqGroup* group = next_in_service->sched_data->group;
    BfqEntity* group_entity = group ? group->my_entity : nullptr;
    if (!group_entity) return false;  // never touch the root group
    bool ret = group_entity->budget > next_in_service->budget;
    group_entity->budget = next_in_service->budget;
    return ret;
}

// __bfq_lookup_next_entity()
BfqEntity* lookup_next_in_tree(BfqServiceTree* st, bool in_service) {
    if (st->active_empty()) return nullptr;
    uint64_t new_vtime = st->calc_vtime_jump();
    // With no in-service entity at this level, push the virtual time up to
    // the value at which some entity is eligible.
    if (!in_service) update_vtime(st, new_vtime);
    return st->first_active_entity(new_vtime);
}

// bfq_lookup_next_entity()
BfqEntity* lookup_next_entity(BfqData& bfqd, BfqSchedData* sd, bool expiration) {
    BfqServiceTree* idle_class_st = &sd->service_tree[kIoprioClasses - 1];
    unsigned idx = 0;
    uint64_t now = bfqd.now();
    // Serve the idle class at least every BFQ_CL_IDLE_TIMEOUT.
    if (now > sd->class_idle_last_service_ns + kClassIdleTimeoutNs) {
        if (!idle_class_st->active_empty()) idx = kIoprioClasses - 1;
        sd->class_idle_last_service_ns = now;
    }
    for (; idx < kIoprioClasses; idx++) {
        // On the expiration path the in-service entity is no longer in
        // service (it has been requeued), even if still recorded as such.
        if (BfqEntity* e =
                lookup_next_in_tree(&sd->service_tree[idx], sd->in_service_entity && !expiration))
            return e;
    }
    return nullptr;
}

// bfq_update_next_in_service(): returns true if the change may let the
// parent entity become the next in service of its own parent.
bool update_next_in_service(BfqData& bfqd, BfqSchedData* sd, BfqEntity* new_entity,
                            bool expiration) {
    BfqEntity* next_in_service = sd->next_in_service;
    bool parent_sched_may_change = false;
    bool change_without_lookup = false;
    // An activation/requeue of an entity other than next_in_service: it
    // replaces next_in_service if it has the same class, is eligible and
    // finishes earlier; no full lookup needed.
    if (new_entity && new_entity != sd->next_in_service) {
        change_without_lookup = true;
        if (next_in_service) {
            unsigned new_idx = class_idx(new_entity);
            BfqServiceTree* st = &sd->service_tree[new_idx];
            change_without_lookup = new_idx == class_idx(next_in_service) &&
                                    !bfq_gt(new_entity->start, st->vtime) &&
                                    bfq_gt(next_in_service->finish, new_entity->finish);
        }
        if (change_without_lookup) next_in_service = new_entity;
    }
    if (!change_without_lookup) next_in_service = lookup_next_entity(bfqd, sd, expiration);
    if (next_in_service) {
        bool new_budget_triggers_change = update_parent_budget(next_in_service);
        parent_sched_may_change = !sd->next_in_service || new_budget_triggers_change;
    }
    sd->next_in_service = next_in_service;
    return parent_sched_may_change;
}

// bfq_activate_requeue_entity(): up the hierarchy while the parent's
// schedule may change (always, for a requeue on expiration).
void activate_requeue_entity(BfqData& bfqd, BfqEntity* entity, bool non_blocking_wait_rq,
                             bool requeue, bool expiration) {
    for (; entity; entity = entity->parent) {
        BfqSchedData* sd = entity->sched_data;
        activate_requeue_one(bfqd, entity, sd, non_blocking_wait_rq);
        if (!update_next_in_service(bfqd, sd, entity, expiration) && !requeue) break;
    }
}

// __bfq_deactivate_entity()
bool deactivate_one(BfqData& bfqd, BfqEntity* entity, bool ins_into_idle_tree) {
    if (!entity->on_st) return false;  // never activated, or already inactive
    BfqSchedData* sd = entity->sched_data;
    BfqServiceTree* st = entity_service_tree(entity);
    bool is_in_service = entity == sd->in_service_entity;
    calc_finish(entity, entity->service);
    if (is_in_service)
        sd->in_service_entity = nullptr;
    else
        entity->service = 0;  // nobody else will reset it for a non in-service entity
    if (entity->tree == BfqTree::Active)
        active_extract(bfqd, st, entity);
    else if (!is_in_service && entity->tree == BfqTree::Idle)
        st->idle_extract(entity);
    if (!ins_into_idle_tree || !bfq_gt(entity->finish, st->vtime))
        forget_entity(st, entity);
    else
        st->idle_insert(entity);
    return true;
}

// bfq_deactivate_entity()
void deactivate_entity(BfqData& bfqd, BfqEntity* entity, bool ins_into_idle_tree, bool expiration) {
    BfqEntity* parent = nullptr;
    for (; entity; entity = parent) {
        parent = entity->parent;
        BfqSchedData* sd = entity->sched_data;
        if (!deactivate_one(bfqd, entity, ins_into_idle_tree)) return;
        if (sd->next_in_service == entity) update_next_in_service(bfqd, sd, nullptr, expiration);
        // The parent is still active: stop deactivating.
        if (sd->next_in_service || sd->in_service_entity) break;
        // Otherwise the parent is no more backlogged; it goes to the idle
        // tree too, to preserve service guarantees.
        ins_into_idle_tree = true;
    }
    // Requeue (if about to stop being served) or reposition the remaining
    // ancestors, since next_in_service changed.
    for (entity = parent; entity; entity = entity->parent) {
        requeue_entity(bfqd, entity);
        BfqSchedData* sd = entity->sched_data;
        if (!update_next_in_service(bfqd, sd, entity, expiration) && !expiration) break;
    }
}

// bfq_no_longer_next_in_service()
bool no_longer_next_in_service(BfqEntity* entity) {
    if (entity->queue) return true;
    return entity->group->active_entities == 1;
}

}  // namespace

void init_queue_entity(BfqQueue* bfqq, BfqGroup* group) {
    BfqEntity& e = bfqq->entity;
    e.weight = e.orig_weight = e.new_weight;
    bfqq->ioprio = bfqq->new_ioprio;
    bfqq->ioprio_class = bfqq->new_ioprio_class;
    e.prio_changed = false;
    e.queue = bfqq;
    e.parent = group->my_entity;
    e.sched_data = &group->sched_data;
    bfqq->group = group;
}

void init_group_entity(BfqGroup* group, BfqGroup* parent) {
    group->sched_data.group = group;
    group->parent = parent;
    if (!parent) {
        group->my_entity = nullptr;
        return;
    }
    BfqEntity& e = group->entity;
    e.weight = e.orig_weight = e.new_weight;
    e.prio_changed = false;
    e.group = group;
    e.my_sched_data = &group->sched_data;
    e.parent = parent->my_entity;
    e.sched_data = &parent->sched_data;
    group->my_entity = &e;
}

void activate_bfqq(BfqData& bfqd, BfqQueue* bfqq) {
    activate_requeue_entity(bfqd, &bfqq->entity, bfqq->non_blocking_wait_rq, false, false);
    bfqq->non_blocking_wait_rq = false;
}

void requeue_bfqq(BfqData& bfqd, BfqQueue* bfqq, bool expiration) {
    activate_requeue_entity(bfqd, &bfqq->entity, false, bfqq == bfqd.in_service_queue, expiration);
}

void deactivate_bfqq(BfqData& bfqd, BfqQueue* bfqq, bool ins_into_idle_tree, bool expiration) {
    deactivate_entity(bfqd, &bfqq->entity, ins_into_idle_tree, expiration);
}

// bfq_add_bfqq_busy(): 6.2 ordering; the legacy variant counts groups in
// __bfq_activate_entity() instead (BfqData::group_entity_activated).
void add_bfqq_busy(BfqData& bfqd, BfqQueue* bfqq) {
    activate_bfqq(bfqd, bfqq);
    bfqq->busy = true;
    bfqd.busy_queues[bfqq->ioprio_class - 1]++;
    if (!bfqq->dispatched) {
        bfqd.add_bfqq_in_groups_with_pending_reqs(bfqq);
        bfqd.weights_tree_add(bfqq);  // wr_coeff == 1
    }
}

// bfq_del_bfqq_busy()
void del_bfqq_busy(BfqData& bfqd, BfqQueue* bfqq, bool expiration) {
    bfqq->busy = false;
    bfqd.busy_queues[bfqq->ioprio_class - 1]--;
    deactivate_bfqq(bfqd, bfqq, true, expiration);
    if (!bfqq->dispatched) {
        bfqd.del_bfqq_in_groups_with_pending_reqs(bfqq);
        bfqd.weights_tree_remove(bfqq);
    }
}

// bfq_get_next_queue(): make each level's next_in_service its in-service
// entity, from the root down to a queue, then update next_in_service along
// the path back up.
BfqQueue* get_next_queue(BfqData& bfqd) {
    if (bfqd.tot_busy_queues() == 0) return nullptr;
    BfqEntity* entity = nullptr;
    for (BfqSchedData* sd = &bfqd.root_group->sched_data; sd; sd = entity->my_sched_data) {
        entity = sd->next_in_service;
        assert(entity && "busy queues but no next_in_service");
        if (!entity) return nullptr;
        sd->in_service_entity = entity;
        // A queue, or a group with a single active child, stops being a
        // candidate for next service at its level.
        if (no_longer_next_in_service(entity))
            active_extract(bfqd, entity_service_tree(entity), entity);
    }
    BfqQueue* bfqq = entity->queue;
    for (; entity; entity = entity->parent)
        if (!update_next_in_service(bfqd, entity->sched_data, nullptr, false)) break;
    return bfqq;
}

void reset_in_service_entities(BfqQueue* bfqq) {
    for (BfqEntity* e = &bfqq->entity; e; e = e->parent) e->sched_data->in_service_entity = nullptr;
}

bool next_queue_may_preempt(const BfqData& bfqd) {
    const BfqSchedData& sd = bfqd.root_group->sched_data;
    return sd.next_in_service != sd.in_service_entity;
}

void bfqq_served(BfqData& bfqd, BfqQueue* bfqq, uint64_t served) {
    (void)bfqd;
    bfqq->service_from_backlogged += served;
    bfqq->stats.charged_sectors += served;
    for (BfqEntity* entity = &bfqq->entity; entity; entity = entity->parent) {
        BfqServiceTree* st = entity_service_tree(entity);
        entity->service += served;
        st->vtime += bfq_delta(served, st->wsum);
        forget_idle(st);
    }
}

// bfq_bfqq_charge_time(): charge the service the queue would have received
// at full speed in `time_ms`, bounded by the budget timeout (time fairness
// for slow queues). Linux >= 4.16 form (bounded_time_ms), with the
// configured timeout_sync as in "block, bfq: use bfqd->bfq_timeout".
void bfqq_charge_time(BfqData& bfqd, BfqQueue* bfqq, uint64_t time_ms) {
    BfqEntity& entity = bfqq->entity;
    uint64_t timeout_ms = std::max<uint64_t>(1, bfqd.timeout_ns / 1'000'000);
    uint64_t bounded_time_ms = std::min(time_ms, timeout_ms);
    uint64_t serv_to_charge_for_time = bfqd.max_budget * bounded_time_ms / timeout_ms;
    uint64_t tot_serv_to_charge = std::max(serv_to_charge_for_time, entity.service);
    // Increase budget to avoid inconsistencies.
    if (tot_serv_to_charge > entity.budget) entity.budget = tot_serv_to_charge;
    bfqq_served(bfqd, bfqq, tot_serv_to_charge - entity.service);
}

}  // namespace mdsplit::bfq
