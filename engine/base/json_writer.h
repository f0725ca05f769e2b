// The one JSON writer of the statistics the core writes: the sidecar (every
// device's iostat fields), the bfq scheduler's queues and groups, the page
// cache. Callers say what they write (begin_object, field, end_array); the
// writer places the separators, so no caller builds JSON text by hand.
//
// Strings are RFC 8259 strings: names that come from the user (device labels,
// bfq group names) give a parseable file whatever they contain. Numbers
// round-trip: integers exactly, doubles in their shortest form that reads back
// to the same double (std::to_chars), a non-finite double as null.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace mdsplit {

/**
 * json_quote() - @text as a JSON string literal, quotes included.
 *
 * Escapes '"' and '\\', the short forms \b \f \n \r \t, and every other
 * control character (below 0x20, and 0x7f) as \u00XX. Bytes from 0x80 up
 * pass through: UTF-8 stays UTF-8.
 */
inline std::string json_quote(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (char c : text) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x",
                                  unsigned(static_cast<unsigned char>(c)));
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

/**
 * class JsonWriter - builds one JSON text, separators placed for the caller.
 *
 * An object's members are key() then one value (a scalar, or a nested
 * begin_object/begin_array ... end); field(k, v) is the two in one. Text
 * layout is `{"a": 1, "b": [2, 3]}`.
 */
class JsonWriter {
public:
    JsonWriter& begin_object() { return open('{'); }
    JsonWriter& end_object() { return close('}'); }
    JsonWriter& begin_array() { return open('['); }
    JsonWriter& end_array() { return close(']'); }

    JsonWriter& key(std::string_view name) {
        separate();
        out_ += json_quote(name);
        out_ += ": ";
        after_key_ = true;
        return *this;
    }

    JsonWriter& value(bool v) { return scalar(v ? "true" : "false"); }
    JsonWriter& value(std::string_view v) { return scalar(json_quote(v)); }
    JsonWriter& value(const char* v) { return value(std::string_view(v)); }
    JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
    JsonWriter& null() { return scalar("null"); }

    template <std::integral T>
    JsonWriter& value(T v) {
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        return scalar(std::string_view(buf, size_t(r.ptr - buf)));
    }

    template <std::floating_point T>
    JsonWriter& value(T v) {
        double d = double(v);
        if (d != d || d - d != 0) return null();  // NaN or infinite: JSON has neither
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, d);
        return scalar(std::string_view(buf, size_t(r.ptr - buf)));
    }

    template <class T>
    JsonWriter& field(std::string_view name, const T& v) {
        key(name);
        return value(v);
    }

    /** The text written so far (whole once every container is closed). */
    const std::string& str() const { return out_; }

private:
    JsonWriter& scalar(std::string_view text) {
        separate();
        out_ += text;
        return *this;
    }
    JsonWriter& open(char c) {
        separate();
        out_ += c;
        has_item_.push_back(false);
        return *this;
    }
    JsonWriter& close(char c) {
        out_ += c;
        has_item_.pop_back();
        return *this;
    }
    // A ", " before every item of a container but its first; none between a
    // key and its value.
    void separate() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (!has_item_.empty()) {
            if (has_item_.back()) out_ += ", ";
            has_item_.back() = true;
        }
    }

    std::string out_;
    std::vector<bool> has_item_;  // one per open container: an item written yet
    bool after_key_ = false;
};

}  // namespace mdsplit
