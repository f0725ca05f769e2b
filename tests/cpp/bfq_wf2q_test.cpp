// B-WF2Q+ (block/bfq-wf2q.c): the per-class service tree (eligibility,
// smallest finish time, virtual-time jumps, idle tree) and the hierarchical
// engine (weights of queues and groups, class priority, timestamps of newly
// activated and reactivated queues).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/clock.h"
#include "core/block/bfq_data.h"
#include "core/block/bfq_service_tree.h"
#include "core/block/bfq_wf2q.h"

namespace mdsplit::bfq {
namespace {

BfqEntity entity(uint64_t start, uint64_t finish) {
    BfqEntity e;
    e.start = start;
    e.finish = finish;
    return e;
}

TEST(BfqServiceTreeTest, ServesTheEligibleEntityWithTheSmallestFinishTime) {
    BfqServiceTree st;
    st.vtime = 100;
    BfqEntity a = entity(150, 200);  // smallest finish, but not eligible yet
    BfqEntity b = entity(50, 300);
    BfqEntity c = entity(100, 250);  // eligible (start == vtime)
    st.active_insert(&a);
    st.active_insert(&b);
    st.active_insert(&c);
    EXPECT_EQ(st.first_active_entity(100), &c);
    EXPECT_EQ(st.first_active_entity(99), &b);
    EXPECT_EQ(st.first_active_entity(150), &a);
    EXPECT_EQ(st.first_active_entity(49), nullptr);
    EXPECT_EQ(st.min_start(), 50u);
    EXPECT_EQ(st.calc_vtime_jump(), 100u);  // already past min_start: no jump
}

TEST(BfqServiceTreeTest, VirtualTimeJumpsToTheSmallestStartWhenNothingIsEligible) {
    BfqServiceTree st;
    st.vtime = 10;
    BfqEntity a = entity(70, 90);
    BfqEntity b = entity(40, 120);
    st.active_insert(&a);
    st.active_insert(&b);
    EXPECT_EQ(st.first_active_entity(st.vtime), nullptr);
    EXPECT_EQ(st.calc_vtime_jump(), 40u);
    EXPECT_EQ(st.first_active_entity(40), &b);
}

TEST(BfqServiceTreeTest, EqualFinishTimesKeepInsertionOrder) {
    BfqServiceTree st;
    BfqEntity a = entity(0, 100), b = entity(0, 100), c = entity(0, 100);
    st.active_insert(&b);
    st.active_insert(&a);
    st.active_insert(&c);
    std::vector<BfqEntity*> order(st.active().begin(), st.active().end());
    EXPECT_EQ(order, (std::vector<BfqEntity*>{&b, &a, &c}));
}

TEST(BfqServiceTreeTest, ExtractsAnEntityWhoseTimestampsAlreadyChanged) {
    // __bfq_requeue_entity() updates start/finish before bfq_active_extract().
    BfqServiceTree st;
    BfqEntity a = entity(0, 100), b = entity(5, 50);
    st.active_insert(&a);
    st.active_insert(&b);
    a.start = a.finish = 1000;
    st.active_extract(&a);
    EXPECT_EQ(st.active_size(), 1u);
    EXPECT_EQ(st.min_start(), 5u);
    EXPECT_EQ(a.tree, BfqTree::None);
}

TEST(BfqServiceTreeTest, IdleTreeIsOrderedByFinishTime) {
    BfqServiceTree st;
    BfqEntity a = entity(0, 300), b = entity(0, 100), c = entity(0, 200);
    st.idle_insert(&a);
    st.idle_insert(&b);
    st.idle_insert(&c);
    EXPECT_EQ(st.first_idle(), &b);
    EXPECT_EQ(st.last_idle(), &a);
    st.idle_extract(&b);
    EXPECT_EQ(st.first_idle(), &c);
}

// The hierarchical engine driven like the scheduler does: set the next queue
// in service, charge it, expire it (requeue while backlogged).
class Wf2q {
public:
    explicit Wf2q(GroupCounting counting = GroupCounting::Fixed) {
        d.clock = &clock;
        d.group_counting = counting;
        init_group_entity(&root, nullptr);
        d.root_group = &root;
    }
    BfqGroup* group(uint32_t weight) {
        groups.push_back(std::make_unique<BfqGroup>());
        BfqGroup* g = groups.back().get();
        g->entity.new_weight = weight;
        init_group_entity(g, &root);
        return g;
    }
    BfqQueue* queue(BfqGroup* g, uint32_t weight, unsigned ioclass = 2) {
        queues.push_back(std::make_unique<BfqQueue>());
        BfqQueue* q = queues.back().get();
        q->entity.new_weight = weight;
        q->new_ioprio_class = ioclass;
        init_queue_entity(q, g);
        return q;
    }
    void activate(BfqQueue* q, uint64_t budget) {
        q->entity.budget = budget;
        add_bfqq_busy(d, q);
    }
    // One service slot of `sectors` for the next queue; it stays backlogged.
    BfqQueue* serve(uint64_t sectors) {
        BfqQueue* q = get_next_queue(d);
        if (!q) return nullptr;
        d.in_service_queue = q;
        bfqq_served(d, q, sectors);
        requeue_bfqq(d, q, true);  // __bfq_bfqq_expire() of a backlogged queue
        d.in_service_queue = nullptr;
        reset_in_service_entities(q);
        q->entity.service = 0;
        for (BfqEntity* e = q->entity.parent; e; e = e->parent) e->service = 0;
        return q;
    }

    VirtualClock clock;
    BfqData d;
    BfqGroup root;
    std::vector<std::unique_ptr<BfqGroup>> groups;
    std::vector<std::unique_ptr<BfqQueue>> queues;
};

TEST(BfqWf2qTest, QueueWeightsShareTheService) {
    Wf2q w;
    BfqQueue* light = w.queue(&w.root, 40);
    BfqQueue* heavy = w.queue(&w.root, 120);
    w.activate(light, 100);
    w.activate(heavy, 100);
    int served_light = 0, served_heavy = 0;
    for (int i = 0; i < 400; i++) {
        BfqQueue* q = w.serve(100);
        ASSERT_NE(q, nullptr);
        (q == light ? served_light : served_heavy)++;
    }
    EXPECT_NEAR(double(served_heavy) / served_light, 3.0, 0.06);
}

TEST(BfqWf2qTest, GroupWeightsShareTheServiceHierarchically) {
    Wf2q w;
    BfqGroup* slow = w.group(100);
    BfqGroup* fast = w.group(300);
    std::vector<BfqQueue*> qs = {w.queue(slow, 40), w.queue(slow, 40), w.queue(fast, 40),
                                 w.queue(fast, 40)};
    for (BfqQueue* q : qs) w.activate(q, 64);
    std::vector<int> slots(4, 0);
    for (int i = 0; i < 800; i++) {
        BfqQueue* q = w.serve(64);
        ASSERT_NE(q, nullptr);
        for (size_t k = 0; k < qs.size(); k++)
            if (qs[k] == q) slots[k]++;
    }
    double slow_slots = slots[0] + slots[1], fast_slots = slots[2] + slots[3];
    EXPECT_NEAR(fast_slots / slow_slots, 3.0, 0.06);
    // Inside a group, equal weights share equally.
    EXPECT_NEAR(slots[0], slots[1], 2);
    EXPECT_NEAR(slots[2], slots[3], 2);
}

TEST(BfqWf2qTest, HigherClassIsServedFirst) {
    Wf2q w;
    BfqQueue* be = w.queue(&w.root, 1000, 2);
    BfqQueue* rt = w.queue(&w.root, 10, 1);
    w.activate(be, 100);
    w.activate(rt, 100);
    for (int i = 0; i < 10; i++) EXPECT_EQ(w.serve(100), rt);
    EXPECT_EQ(w.d.busy_queues[0], 1u);
    EXPECT_EQ(w.d.busy_queues[1], 1u);
}

TEST(BfqWf2qTest, ANewlyActivatedQueueStartsAtTheVirtualTime) {
    Wf2q w;
    BfqQueue* old_q = w.queue(&w.root, 40);
    w.activate(old_q, 100);
    for (int i = 0; i < 50; i++) EXPECT_EQ(w.serve(100), old_q);
    BfqServiceTree& st = w.root.sched_data.service_tree[1];
    BfqQueue* new_q = w.queue(&w.root, 40);
    w.activate(new_q, 100);
    // No credit for the time it was not backlogged: it starts at vtime and
    // the two queues then alternate instead of new_q monopolising the device.
    EXPECT_EQ(new_q->entity.start, st.vtime);
    int new_slots = 0;
    for (int i = 0; i < 20; i++) new_slots += w.serve(100) == new_q;
    EXPECT_NEAR(new_slots, 10, 1);
}

TEST(BfqWf2qTest, AnIdleQueueReactivatedSoonKeepsItsFinishTime) {
    Wf2q w;
    BfqQueue* a = w.queue(&w.root, 40);
    BfqQueue* b = w.queue(&w.root, 40);
    w.activate(a, 100);
    w.activate(b, 100);
    // Serve a, then let it go idle (bfq_del_bfqq_busy) before the virtual
    // time reaches its finish time: it is parked on the idle tree.
    BfqQueue* first = get_next_queue(w.d);
    ASSERT_EQ(first, a);
    w.d.in_service_queue = a;
    bfqq_served(w.d, a, 100);
    del_bfqq_busy(w.d, a, true);
    w.d.in_service_queue = nullptr;
    reset_in_service_entities(a);
    BfqServiceTree& st = w.root.sched_data.service_tree[1];
    EXPECT_EQ(a->entity.tree, BfqTree::Idle);
    uint64_t finish = a->entity.finish;
    EXPECT_TRUE(bfq_gt(finish, st.vtime));
    // Reactivation starts from the old finish time, not from vtime: going
    // idle for a moment gains nothing.
    a->entity.service = 0;
    w.activate(a, 100);
    EXPECT_EQ(a->entity.start, finish);
    EXPECT_EQ(w.serve(100), b);
}

TEST(BfqWf2qTest, ChargingTimeToASlowQueueIsBoundedByTheBudgetTimeout) {
    Wf2q w;
    w.d.max_budget = 16384;
    w.d.timeout_ns = 125'000'000;
    BfqQueue* q = w.queue(&w.root, 40);
    w.activate(q, 1000);
    ASSERT_EQ(get_next_queue(w.d), q);
    w.d.in_service_queue = q;
    bfqq_served(w.d, q, 8);
    bfqq_charge_time(w.d, q, 250);  // longer than the timeout: max_budget
    EXPECT_EQ(q->entity.service, 16384u);
    EXPECT_EQ(q->entity.budget, 16384u);
}

}  // namespace
}  // namespace mdsplit::bfq
