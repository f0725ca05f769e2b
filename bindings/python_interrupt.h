// Ctrl-C during a long run called from Python (run_interrupt.h): the run
// polls Python's signal handlers and, once one has raised, drains and ends;
// the caller then gets that exception (KeyboardInterrupt) instead of waiting
// for the whole run. Only the main thread sees signals, as in Python itself.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "sim/run_interrupt.h"

namespace mdsplit {

/**
 * python_interrupt - an InterruptPoll that runs Python's signal handlers
 *
 * Takes the GIL for the poll, so it serves runs that hold it and runs that
 * have released it alike. When a handler raised, its exception stays set
 * for interruptible() to raise.
 */
inline InterruptPoll python_interrupt() {
    return InterruptPoll([] {
        pybind11::gil_scoped_acquire gil;
        return PyErr_CheckSignals() != 0;
    });
}

/**
 * interruptible - calls @run (a driver given python_interrupt()) and turns
 * its RunInterrupted into the Python exception the signal handler raised
 *
 * Call it with the GIL held.
 */
template <typename Run>
auto interruptible(Run&& run) {
    try {
        return std::forward<Run>(run)();
    } catch (const RunInterrupted&) {
        throw pybind11::error_already_set();
    }
}

}  // namespace mdsplit
