#include "py_args.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/virtual_time.h"

namespace mdsplit::py_args {

void fail(const std::string& where, const std::string& problem, const std::string& allowed) {
    throw py::value_error(where + ": " + problem + "; allowed: " + allowed);
}

namespace {
PyObject* unknown_key_error = nullptr;  // mdsplit.UnknownKeyError, for the module's lifetime
}  // namespace

void register_errors(py::module_& m) {
    // A ValueError, as every bad argument; also a KeyError, which is what
    // set_costs() raised for an unknown key before, so callers catching that
    // keep working. KeyError's __str__ would quote the message: not taken.
    py::dict body;
    body["__str__"] = py::module_::import("builtins").attr("BaseException").attr("__str__");
    body["__doc__"] = "An unknown key in a dict of arguments (a ValueError and a KeyError).";
    py::tuple bases = py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_KeyError));
    unknown_key_error = PyErr_NewException("mdsplit.UnknownKeyError", bases.ptr(), body.ptr());
    if (!unknown_key_error) throw py::error_already_set();
    m.attr("UnknownKeyError") = py::handle(unknown_key_error);
}

[[noreturn]] void fail_unknown_key(const std::string& where, const std::string& key,
                                   const std::string& allowed, const std::string& what) {
    std::string message = where + ": unknown " + what + " \"" + key + "\"; allowed: " + allowed;
    PyErr_SetString(unknown_key_error ? unknown_key_error : PyExc_ValueError, message.c_str());
    throw py::error_already_set();
}

void no_other_keywords(const py::kwargs& kwargs, const std::string& where,
                       const std::string& allowed) {
    for (const auto& kv : kwargs)
        fail_unknown_key(where, std::string(py::str(kv.first)), allowed, "keyword argument");
}

namespace {
// pybind's own dispatcher, which every function of the module shares
// (METH_VARARGS | METH_KEYWORDS).
using Dispatcher = PyObject* (*)(PyObject*, PyObject*, PyObject*);
Dispatcher pybind_dispatcher = nullptr;

// What is wrong with a call of `rec` with positional `args` (self first, for
// a method) and keywords `kwargs` that pybind could not match, as one line
// with the error type to raise; "" when the arguments' number and names fit
// (then pybind's error, about a type, stands).
std::pair<std::string, PyObject*> explain_call(const py::detail::function_record& rec,
                                               PyObject* args, PyObject* kwargs) {
    const size_t skip = rec.is_method ? 1 : 0;  // self
    std::vector<std::string> names;             // positional parameters, self excluded
    std::vector<bool> optional;
    for (size_t i = skip; i < rec.nargs_pos; i++) {
        bool named = i < rec.args.size() && rec.args[i].name;
        names.push_back(named ? rec.args[i].name : "arg" + std::to_string(i - skip));
        optional.push_back(i < rec.args.size() && bool(rec.args[i].value));
    }
    std::string where = rec.name ? rec.name : "?";
    py::handle scope = rec.scope;
    if (scope && PyType_Check(scope.ptr()) && (where == "__init__" || !rec.is_method)) {
        std::string cls = py::str(scope.attr("__name__"));
        where = where == "__init__" ? cls : cls + "." + where;
    }
    std::string signature, keywords;
    for (size_t i = 0; i < names.size(); i++) {
        std::string sep = i ? ", " : "";
        signature +=
            sep + names[i] +
            (optional[i] && rec.args[i + skip].descr ? std::string("=") + rec.args[i + skip].descr
                                                     : "");
        keywords += sep + names[i];
    }
    signature = "(" + signature + ")";
    size_t given = size_t(PyTuple_GET_SIZE(args));
    if (skip && !rec.is_constructor && scope && PyType_Check(scope.ptr())) {
        std::string cls = py::str(scope.attr("__name__"));
        if (!given)
            return {cls + "." + where + ": called without its object; allowed: a " + cls + "'s " +
                        where + signature,
                    PyExc_TypeError};
        if (!PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0),
                                reinterpret_cast<PyTypeObject*>(scope.ptr())))
            return {cls + "." + where + ": self: expected a " + cls + ", got " +
                        type_name(PyTuple_GET_ITEM(args, 0)) + "; allowed: a " + cls + "'s " +
                        where + signature,
                    PyExc_TypeError};
    }
    given = given > skip ? given - skip : 0;
    if (given > names.size() && !rec.has_args)
        return {where + ": takes at most " + std::to_string(names.size()) + " argument" +
                    (names.size() == 1 ? "" : "s") + ", got " + std::to_string(given) +
                    "; allowed: " + signature,
                PyExc_TypeError};
    std::set<std::string> by_keyword;
    if (kwargs) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            std::string k = py::str(key);
            auto it = std::find(names.begin(), names.end(), k);
            if (it == names.end()) {
                if (rec.has_kwargs) continue;  // the function refuses it itself
                return {where + ": unknown keyword argument \"" + k +
                            "\"; allowed: " + (keywords.empty() ? "none" : keywords),
                        nullptr};
            }
            if (size_t(it - names.begin()) < given)
                return {where + ": argument \"" + k +
                            "\" given twice (by position and by keyword); allowed: " + signature,
                        PyExc_TypeError};
            by_keyword.insert(k);
        }
    }
    for (size_t i = given; i < names.size(); i++)
        if (!optional[i] && !by_keyword.count(names[i]))
            return {where + ": missing argument \"" + names[i] + "\"; allowed: " + signature,
                    PyExc_TypeError};
    return {"", nullptr};
}

// pybind's dispatcher, then one line for a call whose arguments it could not match.
PyObject* one_line_dispatcher(PyObject* self, PyObject* args, PyObject* kwargs) {
    PyObject* result = pybind_dispatcher(self, args, kwargs);
    if (result || !PyErr_ExceptionMatches(PyExc_TypeError) || !PyCapsule_CheckExact(self))
        return result;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* rec = static_cast<py::detail::function_record*>(
        PyCapsule_GetPointer(self, PyCapsule_GetName(self)));
    std::pair<std::string, PyObject*> why;
    // Overloads (none here): pybind's list of them says more.
    if (rec && !rec->next) {
        try {
            why = explain_call(*rec, args, kwargs);
        } catch (const std::exception&) {
            why = {};
        }
    }
    PyErr_Clear();
    if (why.first.empty()) {
        PyErr_Restore(type, value, traceback);  // about a type, or from the call itself
        return nullptr;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyObject* error = why.second ? why.second : unknown_key_error;
    PyErr_SetString(error ? error : PyExc_ValueError, why.first.c_str());
    return nullptr;
}

// Routes one pybind function of the module through one_line_dispatcher.
void patch_function(py::handle value) {
    if (PyObject_TypeCheck(value.ptr(), &PyStaticMethod_Type))
        value = py::handle(value).attr("__func__");
    py::handle fn = py::detail::get_function(value);
    if (!fn || !PyCFunction_Check(fn.ptr())) return;
    py::handle self = PyCFunction_GET_SELF(fn.ptr());
    if (!self || !PyCapsule_CheckExact(self.ptr()) ||
        !py::detail::is_function_record_capsule(py::reinterpret_borrow<py::capsule>(self)))
        return;
    PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(fn.ptr())->m_ml;
    if (!(def->ml_flags & METH_KEYWORDS)) return;
    auto ours = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(one_line_dispatcher));
    if (def->ml_meth == ours) return;
    pybind_dispatcher = reinterpret_cast<Dispatcher>(reinterpret_cast<void (*)()>(def->ml_meth));
    def->ml_meth = ours;
}
}  // namespace

void one_line_call_errors(py::module_& m) {
    for (auto item : py::reinterpret_borrow<py::dict>(m.attr("__dict__"))) {
        py::handle value = item.second;
        if (PyType_Check(value.ptr()) &&
            py::detail::get_type_info(reinterpret_cast<PyTypeObject*>(value.ptr()))) {
            // A class's __dict__ is a mappingproxy: copied into a dict to walk it.
            for (auto member : py::dict(value.attr("__dict__"))) patch_function(member.second);
        } else {
            patch_function(value);
        }
    }
}

std::string type_name(py::handle value) { return Py_TYPE(value.ptr())->tp_name; }

namespace {
// A str's UTF-8 bytes; a lone surrogate (a file name os.fsdecode() kept
// with surrogateescape, or "\udcff") has none: one line naming `where`.
std::string utf8(py::handle str, const std::string& where, const std::string& allowed) {
    Py_ssize_t size = 0;
    if (const char* bytes = PyUnicode_AsUTF8AndSize(str.ptr(), &size))
        return std::string(bytes, size_t(size));
    PyErr_Clear();
    Py_ssize_t i = 0;
    Py_UCS4 c = 0;
    for (; i < PyUnicode_GetLength(str.ptr()); i++)
        if (c = PyUnicode_ReadChar(str.ptr(), i); c >= 0xd800 && c <= 0xdfff) break;
    char code[16];
    snprintf(code, sizeof code, "U+%04X", unsigned(c));
    fail(where,
         std::string("the str holds a lone surrogate, ") + code + " at index " + std::to_string(i) +
             ", which UTF-8 cannot encode",
         allowed);
}
}  // namespace

std::string text(py::handle value, const std::string& where, const std::string& allowed) {
    if (!py::isinstance<py::str>(value))
        fail(where, "expected a str, got " + type_name(value), allowed);
    return utf8(value, where, allowed);
}

std::string path(py::handle value, const std::string& where, const std::string& allowed) {
    std::string p = text(value, where, allowed);
    if (p.find('\0') != std::string::npos)
        fail(where, "the path holds a NUL character", allowed + ", without NUL");
    return p;
}

std::optional<std::string> optional_text(py::handle value, const std::string& where,
                                         const std::string& allowed) {
    if (value.is_none()) return std::nullopt;
    return text(value, where, allowed);
}

py::sequence list_or_tuple(py::handle value, const std::string& where, const std::string& allowed) {
    if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
        fail(where, "expected a list, got " + type_name(value), allowed);
    return py::reinterpret_borrow<py::sequence>(value);
}

py::sequence fixed_tuple(py::handle value, size_t n, const std::string& where,
                         const std::string& allowed) {
    if (!(py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) ||
        py::len(value) != n)
        fail(where,
             "expected a tuple of " + std::to_string(n) + ", got " + type_name(value) +
                 (py::hasattr(value, "__len__") ? " of " + std::to_string(py::len(value)) : ""),
             allowed);
    return py::reinterpret_borrow<py::sequence>(value);
}

std::string bytes_like(py::handle value, const std::string& where) {
    const std::string allowed = "bytes, bytearray or another contiguous bytes-like object";
    // A str has no buffer: its bytes would depend on an encoding.
    Py_buffer view;
    if (!PyObject_CheckBuffer(value.ptr()) ||
        PyObject_GetBuffer(value.ptr(), &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        fail(where, "expected bytes, got " + type_name(value), allowed);
    }
    std::string out(static_cast<const char*>(view.buf), size_t(view.len));
    PyBuffer_Release(&view);
    return out;
}

namespace {
std::string range_text(uint64_t lo, uint64_t hi, const std::string& note) {
    std::string text = hi == kU64Max ? "an int >= " + std::to_string(lo)
                                     : std::to_string(lo) + ".." + std::to_string(hi);
    return note.empty() ? text : text + " (" + note + ")";
}
}  // namespace

uint64_t checked(uint64_t value, const std::string& where, uint64_t lo, uint64_t hi,
                 const std::string& note) {
    if (value < lo || value > hi)
        fail(where, std::to_string(value) + " is out of range", range_text(lo, hi, note));
    return value;
}

uint64_t checked(py::handle value, const std::string& where, uint64_t lo, uint64_t hi,
                 const std::string& note) {
    // bool is an int in Python: True would silently be 1.
    if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr()))
        fail(where, "expected an int, got " + type_name(value), range_text(lo, hi, note));
    py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
    if (!i) throw py::error_already_set();
    unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
    if (v == ~0ull && PyErr_Occurred()) {  // negative, or past 2**64 - 1
        PyErr_Clear();
        fail(where, std::string(py::str(i)) + " is out of range", range_text(lo, hi, note));
    }
    return checked(uint64_t(v), where, lo, hi, note);
}

Args::Args(py::handle value, std::string where) : where_(std::move(where)) {
    if (!py::isinstance<py::dict>(value))
        fail(where_, "expected a dict, got " + type_name(value), "a dict");
    dict_ = py::reinterpret_borrow<py::dict>(value);
}

void Args::allow(const std::set<std::string>& allowed) const {
    std::string names;
    for (const std::string& k : allowed) names += (names.empty() ? "" : ", ") + k;
    for (const auto& kv : dict_) {
        if (!py::isinstance<py::str>(kv.first))
            fail(where_, "a key of type " + type_name(kv.first), names);
        std::string key = py::str(kv.first);
        if (!allowed.count(key)) fail_unknown_key(where_, key, names);
    }
}

uint64_t Args::integer(const char* key, uint64_t def, uint64_t lo, uint64_t hi,
                       const std::string& note) const {
    return has(key) ? checked(get(key), where(key), lo, hi, note) : def;
}

uint64_t Args::time_ns(const char* key, uint64_t def) const {
    return integer(key, def, 0, kMaxTimeArgNs, "ns: at most 2**60, about 36.5 years");
}

uint64_t Args::cost_ns(const char* key, uint64_t def) const {
    return integer(key, def, 0, kMaxCostNs, "ns: a per-I/O CPU cost, at most a second");
}

bool boolean(py::handle value, const std::string& where) {
    // pybind would take any object with __bool__ ("false" is true, 5 too).
    if (!py::isinstance<py::bool_>(value))
        fail(where, "expected a bool, got " + type_name(value), "True | False");
    return value.cast<bool>();
}

uint64_t u64(py::handle value, const std::string& where) {
    return checked(value, where, 0, kU64Max);
}

std::optional<bool> optional_boolean(py::handle value, const std::string& where) {
    if (value.is_none()) return std::nullopt;
    return boolean(value, where);
}

std::optional<uint64_t> optional_checked(py::handle value, const std::string& where, uint64_t lo,
                                         uint64_t hi, const std::string& note) {
    if (value.is_none()) return std::nullopt;
    return checked(value, where, lo, hi, note);
}

bool Args::boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    return py_args::boolean(get(key), where(key));
}

std::string Args::string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    return text(get(key), where(key), "a str");
}

std::string Args::path(const char* key, const std::string& def, const std::string& allowed) const {
    return has(key) ? py_args::path(get(key), where(key), allowed) : def;
}

std::string Args::required_string(const char* key) const {
    if (!has(key)) fail(where(key), "missing", "a str");
    return string(key, "");
}

namespace {
// ioprio classes by name and number (IOPRIO_CLASS_*), as fio's prioclass=.
IoprioClass prioclass(py::handle value, const std::string& where) {
    static const char* const kNames[] = {"none", "rt", "be", "idle"};  // by number
    const std::string names = "none | rt | be | idle";
    if (py::isinstance<py::str>(value)) {
        std::string name = text(value, where, names);
        for (int c = 0; c < 4; c++)
            if (name == kNames[c] || name == std::to_string(c)) return IoprioClass(c);
        fail(where, "\"" + name + "\" is not an ioprio class", "0..3 (" + names + ")");
    }
    return IoprioClass(checked(value, where, 0, 3, names));
}
}  // namespace

SchedIdentity sched_identity(const Args& args) {
    SchedIdentity s;
    s.group = args.string("group", s.group);
    s.group_weight = uint32_t(args.integer("group_weight", s.group_weight, 1, 1000));
    s.ioprio = uint8_t(args.integer("prio", s.ioprio, 0, 7));
    if (args.has("prioclass"))
        s.ioprio_class = prioclass(args.get("prioclass"), args.where("prioclass"));
    return s;
}

void check_group(const Args& args, const SchedIdentity& s, bool bfq) {
    if (args.has("group_weight") && s.group.empty())
        fail(args.where("group_weight"), "is the weight of a group, and none is named",
             "\"group\" (a name, not \"\") beside it, or no group_weight");
    if (!s.group.empty() && !bfq)
        fail(args.where("group"), "groups are scheduled by bfq, which this stack does not run",
             "device.scheduler = \"bfq\" in the stack, or no group (or \"\")");
}

void check_group_weight(const Args& args, const SchedIdentity& mine, const SchedIdentity& other,
                        const std::string& other_where) {
    if (mine.group.empty() || mine.group != other.group || mine.group_weight == other.group_weight)
        return;
    fail(args.where("group_weight"),
         std::to_string(mine.group_weight) + (args.has("group_weight") ? "" : " (the default)") +
             " for group \"" + mine.group + "\", which " + other_where + " gives " +
             std::to_string(other.group_weight) + ", and a group has one weight",
         "the same group_weight on every task of a group (on one device)");
}

void direct_io_aligned(const std::string& call, uint64_t offset, uint64_t length, uint64_t lbs) {
    if (length == 0 || offset % lbs || length % lbs)
        fail(call + ": offset " + std::to_string(offset) + ", length " + std::to_string(length),
             "not a direct I/O the device takes (blkdev_dio_invalid)",
             "offset and length multiples of the logical block size, " + std::to_string(lbs) +
                 " bytes, length > 0");
}

void write_fits(const std::string& call, uint64_t offset, uint64_t length, uint64_t device_bytes) {
    if (offset <= device_bytes && length <= device_bytes - offset) return;
    fail(call + ": data",
         std::to_string(length) + " bytes at offset " + std::to_string(offset) +
             " pass the end of the device (" + std::to_string(device_bytes) + " bytes)",
         "at most " + std::to_string(offset > device_bytes ? 0 : device_bytes - offset) +
             " bytes at that offset");
}

Fadvise fadvise_from(const std::string& where, const std::string& name) {
    static const std::pair<const char*, Fadvise> kAdvice[] = {{"none", Fadvise::None},
                                                              {"normal", Fadvise::Normal},
                                                              {"random", Fadvise::Random},
                                                              {"sequential", Fadvise::Sequential}};
    for (auto [n, value] : kAdvice)
        if (name == n) return value;
    fail(where, "\"" + name + "\" is not an advice",
         "\"none\" | \"normal\" | \"random\" | \"sequential\"");
}

}  // namespace mdsplit::py_args
