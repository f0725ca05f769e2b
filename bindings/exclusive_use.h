// One simulation object, one call at a time. Any call that builds Python objects may let another
// thread run (a garbage collection runs finalisers), so a second thread can
// call into an object whose stack is in the middle of a run: its buffers,
// queues and clock would be shared unsynchronised (use-after-free). Every
// bound method therefore takes its object first and, when another call
// holds it, raises RuntimeError at once.
//
// It never waits: a thread that blocked here holding the GIL would deadlock
// with the holder, which needs the GIL to return. And it is an atomic flag,
// not std::mutex::try_lock, which is undefined when the thread holding the
// lock calls it (a finaliser re-entering the object on the same thread).
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>

namespace mdsplit {

class InUse {
public:
    class Guard {
    public:
        explicit Guard(InUse& u) : u_(u) {}
        ~Guard() { u_.busy_.clear(std::memory_order_release); }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;

    private:
        InUse& u_;
    };

    // Takes the object for one call; `who` names its class in the error.
    [[nodiscard]] Guard take(const char* who) {
        if (busy_.test_and_set(std::memory_order_acquire))
            throw std::runtime_error(std::string(who) +
                                     ": in use by another thread (one call at a time per "
                                     "object): use one object per thread, or wait for that "
                                     "call to return");
        return Guard(*this);
    }

private:
    std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
};

// A method of C as a function that holds C's InUse (C::in_use, named
// C::kName) for the call: what every .def of C binds.
template <class C, class R, class... A>
auto exclusive(R (C::*f)(A...)) {
    return [f](C& self, A... a) -> R {
        InUse::Guard g = self.in_use.take(C::kName);
        return (self.*f)(std::forward<A>(a)...);
    };
}
template <class C, class R, class... A>
auto exclusive(R (C::*f)(A...) const) {
    return [f](C& self, A... a) -> R {
        InUse::Guard g = self.in_use.take(C::kName);
        return (self.*f)(std::forward<A>(a)...);
    };
}

}  // namespace mdsplit
