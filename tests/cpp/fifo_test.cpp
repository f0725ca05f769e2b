// base/fifo.h: the event loop's queue of deferred work.
#include "base/fifo.h"

#include <gtest/gtest.h>

namespace mdsplit {
namespace {

// Elements come out in the order they went in, also while the queue never
// drains (its array is compacted under it) and after it drained.
TEST(FifoTest, KeepsOrderThroughCompactionAndDrain) {
    Fifo<int> q;
    int next_in = 0, next_out = 0;
    for (int i = 0; i < 10; i++) q.push_back(next_in++);
    for (int round = 0; round < 1000; round++) {  // a backlog of 10 that never drains
        q.push_back(next_in++);
        EXPECT_EQ(q.front(), next_out++);
        q.pop_front();
    }
    for (int round = 0; round < 1000; round++) {  // a growing backlog
        q.push_back(next_in++);
        q.push_back(next_in++);
        EXPECT_EQ(q.front(), next_out++);
        q.pop_front();
    }
    EXPECT_EQ(q.size(), 1010u);
    while (!q.empty()) {
        EXPECT_EQ(q.front(), next_out++);
        q.pop_front();
    }
    EXPECT_EQ(next_out, next_in);
    q.push_back(7);
    EXPECT_EQ(q.size(), 1u);
    EXPECT_EQ(q.front(), 7);
}

}  // namespace
}  // namespace mdsplit
