#include "config/size_parse.h"

#include <cctype>
#include <string>

#include "config/config_error.h"

namespace mdsplit {
namespace {

std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
        text.remove_prefix(1);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
        text.remove_suffix(1);
    }
    return text;
}

std::string lower_case(std::string_view text) {
    std::string result(text);
    for (char& c : result) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return result;
}

// "12.5" at the start of `text`: the digits before and after the point.
struct DecimalNumber {
    std::string_view whole_digits;
    std::string_view fraction_digits;
    std::string_view rest;  // what follows the number (the unit)
};

bool split_number(std::string_view text, DecimalNumber& number) {
    size_t position = 0;
    while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) {
        ++position;
    }
    number.whole_digits = text.substr(0, position);
    if (position < text.size() && text[position] == '.') {
        size_t fraction_start = ++position;
        while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) {
            ++position;
        }
        number.fraction_digits = text.substr(fraction_start, position - fraction_start);
        if (number.fraction_digits.empty()) {
            return false;  // "1." is not a number
        }
    }
    number.rest = text.substr(position);
    return !number.whole_digits.empty();
}

enum class ScaleResult { Ok, Overflow, NotWhole };

// number × multiplier, exactly, in uint64_t.
ScaleResult scale(const DecimalNumber& number, uint64_t multiplier, uint64_t& result) {
    uint64_t whole = 0;
    for (char digit : number.whole_digits) {
        if (__builtin_mul_overflow(whole, 10u, &whole) ||
            __builtin_add_overflow(whole, uint64_t(digit - '0'), &whole)) {
            return ScaleResult::Overflow;
        }
    }
    if (__builtin_mul_overflow(whole, multiplier, &result)) {
        return ScaleResult::Overflow;
    }
    if (number.fraction_digits.empty()) {
        return ScaleResult::Ok;
    }
    // fraction × multiplier must be whole: fraction_digits / 10^n × multiplier.
    if (number.fraction_digits.size() > 18) {
        return ScaleResult::NotWhole;
    }
    uint64_t fraction = 0;
    uint64_t denominator = 1;
    for (char digit : number.fraction_digits) {
        fraction = fraction * 10 + uint64_t(digit - '0');
        denominator *= 10;
    }
    unsigned __int128 scaled = static_cast<unsigned __int128>(fraction) * multiplier;
    if (scaled % denominator != 0) {
        return ScaleResult::NotWhole;
    }
    unsigned __int128 fraction_part = scaled / denominator;
    if (__builtin_add_overflow(result, static_cast<uint64_t>(fraction_part), &result)) {
        return ScaleResult::Overflow;
    }
    return ScaleResult::Ok;
}

bool size_multiplier(const std::string& unit, uint64_t& multiplier) {
    if (unit.empty() || unit == "b") {
        multiplier = 1;
        return true;
    }
    static constexpr std::string_view kPrefixes = "kmgt";
    size_t power = kPrefixes.find(unit[0]);
    if (power == std::string_view::npos) {
        return false;
    }
    std::string_view tail = std::string_view(unit).substr(1);
    if (!(tail.empty() || tail == "b" || tail == "ib")) {
        return false;
    }
    multiplier = uint64_t(1) << (10 * (power + 1));
    return true;
}

bool duration_multiplier(const std::string& unit, uint64_t& multiplier) {
    if (unit == "ns") {
        multiplier = 1;
    } else if (unit == "us" || unit == "\xc2\xb5s") {  // µs
        multiplier = 1'000;
    } else if (unit == "ms") {
        multiplier = 1'000'000;
    } else if (unit == "s") {
        multiplier = 1'000'000'000;
    } else {
        return false;
    }
    return true;
}

[[noreturn]] void fail(std::string_view key, const std::string& problem, std::string_view allowed) {
    throw make_config_error({}, key, problem, allowed);
}

}  // namespace

uint64_t parse_size(std::string_view text, std::string_view key) {
    std::string_view trimmed = trim(text);
    DecimalNumber number;
    uint64_t multiplier = 0;
    if (!split_number(trimmed, number) ||
        !size_multiplier(lower_case(trim(number.rest)), multiplier)) {
        fail(key, in_quotes(text) + " is not a size", kSizeSyntax);
    }
    uint64_t bytes = 0;
    switch (scale(number, multiplier, bytes)) {
        case ScaleResult::Ok:
            return bytes;
        case ScaleResult::Overflow:
            fail(key, in_quotes(text) + " is too large", "sizes below 16 EiB");
        case ScaleResult::NotWhole:
            fail(key, in_quotes(text) + " is not a whole number of bytes", kSizeSyntax);
    }
    return bytes;
}

uint64_t parse_duration_ns(std::string_view text, std::string_view key) {
    std::string_view trimmed = trim(text);
    DecimalNumber number;
    if (!split_number(trimmed, number)) {
        fail(key, in_quotes(text) + " is not a duration", kDurationSyntax);
    }
    std::string unit = lower_case(trim(number.rest));
    uint64_t multiplier = 0;
    if (unit.empty()) {
        bool is_zero = number.whole_digits.find_first_not_of('0') == std::string_view::npos &&
                       number.fraction_digits.find_first_not_of('0') == std::string_view::npos;
        if (is_zero) {
            return 0;
        }
        fail(key, in_quotes(text) + " has no unit", kDurationSyntax);
    }
    if (!duration_multiplier(unit, multiplier)) {
        fail(key, in_quotes(text) + " is not a duration", kDurationSyntax);
    }
    uint64_t nanoseconds = 0;
    switch (scale(number, multiplier, nanoseconds)) {
        case ScaleResult::Ok:
            return nanoseconds;
        case ScaleResult::Overflow:
            fail(key, in_quotes(text) + " is too long", "durations below 584 years");
        case ScaleResult::NotWhole:
            fail(key, in_quotes(text) + " is not a whole number of nanoseconds", kDurationSyntax);
    }
    return nanoseconds;
}

}  // namespace mdsplit
