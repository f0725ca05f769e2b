#include "base/intrusive_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace mdsplit {
namespace {

struct Item {
    Item() = default;
    explicit Item(int id_, int key_ = 0) : key(key_), id(id_) {}
    int key = 0;
    int id = 0;
    ListHook<Item> a;
    ListHook<Item> b;
};

using ListA = IntrusiveList<Item, &Item::a>;
using ListB = IntrusiveList<Item, &Item::b>;

struct KeyLess {
    bool operator()(const Item* x, const Item* y) const { return x->key < y->key; }
};

template <class List>
std::vector<int> ids(const List& l) {
    std::vector<int> out;
    for (const Item* i : l) out.push_back(i->id);
    return out;
}

// The links walked backwards from back() must mirror the forward order.
template <class List>
std::vector<int> ids_backwards(const List& l) {
    std::vector<int> out;
    for (const Item* i = l.back(); i; i = List::prev(i)) out.insert(out.begin(), i->id);
    return out;
}

TEST(IntrusiveListTest, PushFrontAndBackKeepOrder) {
    Item i1(1), i2(2), i3(3);
    ListA l;
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.front(), nullptr);
    EXPECT_EQ(l.back(), nullptr);
    l.push_back(&i2);
    l.push_front(&i1);
    l.push_back(&i3);
    EXPECT_EQ(ids(l), (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(ids_backwards(l), ids(l));
    EXPECT_EQ(l.size(), 3u);
    EXPECT_EQ(l.front(), &i1);
    EXPECT_EQ(l.back(), &i3);
    EXPECT_EQ(ListA::next(&i1), &i2);
    EXPECT_EQ(ListA::prev(&i1), nullptr);
    EXPECT_EQ(ListA::next(&i3), nullptr);
}

TEST(IntrusiveListTest, InsertBeforeAndAfter) {
    Item i1(1), i2(2), i3(3), i4(4), i5(5);
    ListA l;
    l.insert_after(nullptr, &i3);  // null: at the front
    l.insert_before(&i3, &i1);
    l.insert_after(&i1, &i2);
    l.insert_before(nullptr, &i5);  // null (the end): at the back
    l.insert_after(&i3, &i4);
    EXPECT_EQ(ids(l), (std::vector<int>{1, 2, 3, 4, 5}));
    EXPECT_EQ(ids_backwards(l), ids(l));
    EXPECT_EQ(l.back(), &i5);
}

TEST(IntrusiveListTest, InsertSortedScansFromTheTailAndKeepsTiesInInsertionOrder) {
    // key: 5 1 5 3 1 5 3 -> sorted, equal keys in insertion order.
    std::vector<Item> items(7);
    const int keys[] = {5, 1, 5, 3, 1, 5, 3};
    ListA l;
    for (int n = 0; n < 7; n++) {
        items[n].key = keys[n];
        items[n].id = n;
        l.insert_sorted(&items[n], KeyLess());
    }
    EXPECT_EQ(ids(l), (std::vector<int>{1, 4, 3, 6, 0, 2, 5}));
    EXPECT_EQ(ids_backwards(l), ids(l));
    // Re-inserting an element goes after the ones equal to it.
    l.erase(&items[1]);
    l.insert_sorted(&items[1], KeyLess());
    EXPECT_EQ(ids(l), (std::vector<int>{4, 1, 3, 6, 0, 2, 5}));
}

TEST(IntrusiveListTest, InsertSortedLessThanAllGoesToTheFront) {
    Item hi(1, 9), lo(2, 0);
    ListA l;
    l.insert_sorted(&hi, KeyLess());
    l.insert_sorted(&lo, KeyLess());
    EXPECT_EQ(ids(l), (std::vector<int>{2, 1}));
    EXPECT_EQ(l.front(), &lo);
    EXPECT_EQ(l.back(), &hi);
}

TEST(IntrusiveListTest, EraseHeadTailAndMiddleUntilEmpty) {
    std::vector<Item> items(5);
    ListA l;
    for (int n = 0; n < 5; n++) {
        items[n].id = n;
        l.push_back(&items[n]);
    }
    l.erase(&items[0]);  // head
    EXPECT_EQ(ids(l), (std::vector<int>{1, 2, 3, 4}));
    EXPECT_EQ(l.front(), &items[1]);
    l.erase(&items[4]);  // tail
    EXPECT_EQ(ids(l), (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(l.back(), &items[3]);
    l.erase(&items[2]);  // middle
    EXPECT_EQ(ids(l), (std::vector<int>{1, 3}));
    EXPECT_EQ(ids_backwards(l), ids(l));
    EXPECT_EQ(l.size(), 2u);
    // An erased element's links are cleared.
    EXPECT_EQ(items[2].a.prev, nullptr);
    EXPECT_EQ(items[2].a.next, nullptr);
    l.erase(&items[3]);
    l.erase(&items[1]);
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.size(), 0u);
    EXPECT_EQ(l.front(), nullptr);
    EXPECT_EQ(l.back(), nullptr);
    EXPECT_EQ(l.begin(), l.end());
    // Usable again once empty.
    l.push_back(&items[2]);
    EXPECT_EQ(ids(l), (std::vector<int>{2}));
}

TEST(IntrusiveListTest, AnElementSitsOnTwoListsThroughTwoHooks) {
    Item i1(1, 2), i2(2, 1);
    ListA by_arrival;
    ListB by_key;
    for (Item* i : {&i1, &i2}) {
        by_arrival.push_back(i);
        by_key.insert_sorted(i, KeyLess());
    }
    EXPECT_EQ(ids(by_arrival), (std::vector<int>{1, 2}));
    EXPECT_EQ(ids(by_key), (std::vector<int>{2, 1}));
    by_arrival.erase(&i1);
    EXPECT_EQ(ids(by_arrival), (std::vector<int>{2}));
    EXPECT_EQ(ids(by_key), (std::vector<int>{2, 1}));
}

}  // namespace
}  // namespace mdsplit
