// The one exception type of configuration loading. Its message is a single
// line: "<file>: <key>: <what is wrong>; allowed: <allowed values>", so the
// fio engine can print it as is and a user knows which line to fix.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace mdsplit {

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
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
