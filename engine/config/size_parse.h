// Sizes and durations as written in a stack file.
//
// Sizes: a whole number of bytes ("4096"), or a number with a binary suffix,
// case-insensitive: k/kb/kib = 1024, m/mb/mib = 1024^2, g/gb/gib = 1024^3,
// t/tb/tib = 1024^4 ("64k", "2G", "512KiB"); "b" means bytes. A decimal
// fraction is allowed when the result is a whole number of bytes ("1.5m").
//
// Durations: a number with a unit, case-insensitive: ns, us (or µs), ms, s
// ("80us", "8ms", "1.5ms"); the result must be a whole number of nanoseconds.
// A bare number is not a duration, except "0". (In TOML, the loader accepts
// the integer 0 for a duration and rejects every other integer: "slice_idle
// = 8" could mean seconds, milliseconds or nanoseconds.)
//
// Both throw ConfigError with a one-line message "<key>: <what is wrong>;
// allowed: <what is allowed>"; the loader prefixes the file name.
#pragma once

#include <cstdint>
#include <string_view>

namespace mdsplit {

uint64_t parse_size(std::string_view text, std::string_view key);
uint64_t parse_duration_ns(std::string_view text, std::string_view key);

// The "allowed:" texts of the messages, for callers that report a wrong type.
inline constexpr std::string_view kSizeSyntax =
    R"(an integer number of bytes or a string like "64k", "2g")";
inline constexpr std::string_view kDurationSyntax =
    R"(a string with a unit ns, us, ms or s like "80us", "8ms" (or the integer 0))";

}  // namespace mdsplit
