// JSON text for the statistics the core writes (sidecars, bfq and page-cache
// objects): names that come from the user (device labels, bfq group names)
// are written as RFC 8259 strings, so any name gives a parseable file.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

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

}  // namespace mdsplit
