// An intrusive doubly-linked list: the links are a ListHook member of the
// elements themselves, so linking and unlinking allocate nothing. An
// element may sit on several lists at once through several hooks, and on
// at most one list per hook. The list does not own its elements.
#pragma once

#include <cstddef>
#include <iterator>

namespace mdsplit {

// An element's links on one list; null at the ends and while unlinked.
template <class T>
struct ListHook {
    T* prev = nullptr;
    T* next = nullptr;
};

template <class T, ListHook<T> T::*Hook>
class IntrusiveList {
public:
    // Walks the elements front to back, yielding T*.
    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = T*;
        using difference_type = std::ptrdiff_t;
        using pointer = T* const*;
        using reference = T* const&;
        iterator() = default;
        explicit iterator(T* e) : cur_(e) {}
        reference operator*() const { return cur_; }
        iterator& operator++() {
            cur_ = next(cur_);
            return *this;
        }
        iterator operator++(int) {
            iterator t = *this;
            ++*this;
            return t;
        }
        bool operator==(const iterator& o) const { return cur_ == o.cur_; }

    private:
        T* cur_ = nullptr;
    };

    IntrusiveList() = default;
    IntrusiveList(const IntrusiveList&) = delete;
    IntrusiveList& operator=(const IntrusiveList&) = delete;

    bool empty() const { return head_ == nullptr; }
    size_t size() const { return size_; }
    T* front() const { return head_; }
    T* back() const { return tail_; }
    iterator begin() const { return iterator(head_); }
    iterator end() const { return iterator(); }
    // Neighbours of a linked element (null at the ends).
    static T* next(const T* e) { return (e->*Hook).next; }
    static T* prev(const T* e) { return (e->*Hook).prev; }

    // Links e after pos; a null pos means at the front.
    void insert_after(T* pos, T* e) {
        ListHook<T>& h = e->*Hook;
        h.prev = pos;
        h.next = pos ? next(pos) : head_;
        if (h.next)
            (h.next->*Hook).prev = e;
        else
            tail_ = e;
        if (pos)
            (pos->*Hook).next = e;
        else
            head_ = e;
        size_++;
    }
    // Links e before pos; a null pos (the end) means at the back.
    void insert_before(T* pos, T* e) { insert_after(pos ? prev(pos) : tail_, e); }
    void push_front(T* e) { insert_after(nullptr, e); }
    void push_back(T* e) { insert_after(tail_, e); }

    // Inserts e into a list sorted by less, scanning from the back: e goes
    // after every element it does not order before, so elements that
    // compare equal stay in insertion order.
    template <class Less>
    void insert_sorted(T* e, Less less) {
        T* pos = tail_;
        while (pos && less(e, pos)) pos = prev(pos);
        insert_after(pos, e);
    }

    // Unlinks e (which must be on this list) and clears its links.
    void erase(T* e) {
        ListHook<T>& h = e->*Hook;
        if (h.prev)
            (h.prev->*Hook).next = h.next;
        else
            head_ = h.next;
        if (h.next)
            (h.next->*Hook).prev = h.prev;
        else
            tail_ = h.prev;
        h.prev = h.next = nullptr;
        size_--;
    }

private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
    size_t size_ = 0;
};

}  // namespace mdsplit
