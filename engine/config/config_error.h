// The one exception type of configuration loading. Its message is a single
// line: "<file>: <key>: <what is wrong>; allowed: <allowed values>", so the
// fio engine can print it as is and a user knows which line to fix.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace mdsplit {

// Control characters that reach a message from the input (a path or value
// written with TOML escapes like "\n") are shown escaped, so the message
// stays one line whatever the input.
inline std::string one_line_message(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u != 0x7f) {
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else {
            out += "\\x";
            out += kHex[u >> 4];
            out += kHex[u & 15];
        }
    }
    return out;
}

// A path or value as a message shows it: in double quotes.
inline std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

struct ConfigError : std::runtime_error {
    explicit ConfigError(std::string_view message)
        : std::runtime_error(one_line_message(message)) {}
};

// "<file>: <key>: <problem>; allowed: <allowed>". An empty `key` or `allowed`
// leaves that part out.
inline ConfigError make_config_error(std::string_view file, std::string_view key,
                                     std::string_view problem, std::string_view allowed = {}) {
    std::string message;
    if (!file.empty()) {
        message.append(file).append(": ");
    }
    if (!key.empty()) {
        message.append(key).append(": ");
    }
    message.append(problem);
    if (!allowed.empty()) {
        message.append("; allowed: ").append(allowed);
    }
    return ConfigError(message);
}

}  // namespace mdsplit
