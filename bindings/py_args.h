// Arguments at the Python boundary: one rule per kind of value, used by
// every binding, so that bad input is refused the same way everywhere, with
// a ValueError of one line in the config loader's shape:
//     <where>: <what is wrong>; allowed: <allowed values>
// e.g. "run_fio_jobs: jobs[2]: iodepth: 0 is out of range; allowed: 1..65536".
// Nothing is wrapped (uint32_t(2**32 + 100) would be 100), nothing unknown
// is ignored, and pybind's own "Unable to cast" never reaches the user.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "core/block/task_context.h"

namespace mdsplit::py_args {

namespace py = pybind11;

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// The deepest queue a closed-loop workload or fio job may keep: every slot
// has its buffer allocated up front, so an unbounded depth is an unbounded
// allocation. 65536 is io_uring's own limit on completions in flight
// (IORING_MAX_CQ_ENTRIES); fio's iodepth_batch_submit is bounded alike.
constexpr uint64_t kMaxIodepth = 65536;

// The most a modelled per-I/O CPU step may cost (BufferedCosts, fio's own
// fio_submit_ns / fio_complete_ns): a second. They add up once per I/O, and
// a bound this low keeps any run's clock far from 2**64 (virtual_time.h).
constexpr uint64_t kMaxCostNs = 1'000'000'000;

[[noreturn]] void fail(const std::string& where, const std::string& problem,
                       const std::string& allowed);

// True or False only, else one line naming `where`.
bool boolean(py::handle value, const std::string& where);

// mdsplit.UnknownKeyError (ValueError, KeyError): "<where>: unknown key "k"; allowed: ...".
void register_errors(py::module_& m);
[[noreturn]] void fail_unknown_key(const std::string& where, const std::string& key,
                                   const std::string& allowed, const std::string& what = "key");
// The keywords pybind did not bind to a named argument (a function's
// trailing py::kwargs): none is allowed. UnknownKeyError, one line:
// "<where>: unknown keyword argument "k"; allowed: <allowed>" (pybind's own
// error for an unknown keyword is several lines naming no argument).
void no_other_keywords(const py::kwargs& kwargs, const std::string& where,
                       const std::string& allowed);

// Every function, method and constructor of module `m` (and of its classes):
// a call with the wrong number of arguments, an argument given twice or an
// unknown keyword is one line naming the call and its arguments instead of
// pybind's TypeError of several lines listing signatures: "<call>: missing
// argument "length"; allowed: (op, offset, length)" (TypeError, as Python's
// own), or for a keyword UnknownKeyError as no_other_keywords() raises. Call
// once, after everything is defined.
void one_line_call_errors(py::module_& m);

// The one integer rule of the bindings: lo <= value <= hi; `note` says
// why, after the range, in the message.
uint64_t checked(uint64_t value, const std::string& where, uint64_t lo, uint64_t hi,
                 const std::string& note = "");
// The same for a Python object: an int (not a bool), then the rule above.
uint64_t checked(py::handle value, const std::string& where, uint64_t lo, uint64_t hi,
                 const std::string& note = "");

// Any unsigned 64-bit int (an offset, a length, a seed): checked() over 0..2**64-1.
uint64_t u64(py::handle value, const std::string& where);
// None, or what boolean() / checked() take.
std::optional<bool> optional_boolean(py::handle value, const std::string& where);
std::optional<uint64_t> optional_checked(py::handle value, const std::string& where, uint64_t lo,
                                         uint64_t hi, const std::string& note = "");

// A str, else one line naming `where` and `allowed` (pybind's own error for
// a wrong type is several lines naming no argument).
std::string text(py::handle value, const std::string& where, const std::string& allowed = "a str");
// A path: what text() takes, without a NUL (the kernel would take the part
// before it: another file than named), else one line naming `where`.
std::string path(py::handle value, const std::string& where, const std::string& allowed);
// None, or what text() takes.
std::optional<std::string> optional_text(py::handle value, const std::string& where,
                                         const std::string& allowed);
// A list or a tuple of exactly `n` items (one I/O of a batch), else one line.
py::sequence fixed_tuple(py::handle value, size_t n, const std::string& where,
                         const std::string& allowed);
// A list or a tuple (not any iterable: a generator would be consumed, an
// endless one never end), else one line naming `where` and `allowed`.
py::sequence list_or_tuple(py::handle value, const std::string& where, const std::string& allowed);
// The bytes of any bytes-like object (bytes, bytearray, a contiguous
// memoryview, ...), else one line naming `where`.
std::string bytes_like(py::handle value, const std::string& where);

// "<type name>" of a Python object, for "expected a dict, got int".
std::string type_name(py::handle value);

// One dict of arguments (a task, a job, a stack, a costs dict), its keys
// and values checked as they are read; messages name "<where>: <key>".
class Args {
public:
    // ValueError "<where>: expected a dict, got <type>" for anything else.
    Args(py::handle value, std::string where);

    // Every key must be in `allowed` (ValueError naming the key otherwise).
    void allow(const std::set<std::string>& allowed) const;
    bool has(const char* key) const { return dict_.contains(key); }
    std::string where() const { return where_; }
    std::string where(const char* key) const { return where_ + ": " + key; }

    // Absent keys give `def` (not checked); present ones must fit their rule.
    uint64_t integer(const char* key, uint64_t def, uint64_t lo = 0, uint64_t hi = kU64Max,
                     const std::string& note = "") const;
    uint64_t time_ns(const char* key, uint64_t def = 0) const;  // 0..kMaxTimeArgNs
    uint64_t cost_ns(const char* key, uint64_t def) const;      // 0..kMaxCostNs
    bool boolean(const char* key, bool def) const;              // True or False only
    std::string string(const char* key, const std::string& def) const;
    std::string required_string(const char* key) const;
    // A path (py_args::path()); absent: `def`.
    std::string path(const char* key, const std::string& def, const std::string& allowed) const;
    // The value itself, for a rule of the caller's (present keys only).
    py::object get(const char* key) const { return dict_[key]; }

private:
    py::dict dict_;
    std::string where_;
};

// A task's scheduling identity from its dict ("group", "group_weight" 1..1000,
// "prio" 0..7, "prioclass" rt|be|idle|none or 0..3), as fio and the engine
// take them; absent keys keep SchedIdentity's defaults.
SchedIdentity sched_identity(const Args& args);

// As the engine's mdsplit_setup: a task's group (not "") only on a stack
// whose scheduler is bfq (`bfq`), its "group_weight" only beside a group.
void check_group(const Args& args, const SchedIdentity& s, bool bfq);
// As the engine's group_weight_rival(): two tasks of one group on one
// device agree on its weight (a group has one); `other_where` names the
// other ("tasks[0]").
void check_group_weight(const Args& args, const SchedIdentity& mine, const SchedIdentity& other,
                        const std::string& other_where);

// A direct I/O the device would refuse (blkdev_dio_invalid(): EINVAL) is
// refused with the reason, naming `call`: offset and length multiples of
// the logical block size `lbs`, length > 0.
void direct_io_aligned(const std::string& call, uint64_t offset, uint64_t length, uint64_t lbs);

// A synchronous write of `length` bytes at `offset` past the end of a
// device of `device_bytes`, refused before the I/O, naming `call`'s data
// (it failed as "mdsplit: I/O failed: No space left on device").
void write_fits(const std::string& call, uint64_t offset, uint64_t length, uint64_t device_bytes);

// posix_fadvise() advice by name ("none" | "normal" | "random" |
// "sequential"); ValueError naming `where` otherwise.
Fadvise fadvise_from(const std::string& where, const std::string& name);

}  // namespace mdsplit::py_args
