// JsonWriter: separators, RFC 8259 strings and round-tripping numbers.
#include "base/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace mdsplit {
namespace {

// Members and items get ", " between them, none before the first or after a key.
TEST(JsonWriterTest, PlacesSeparators) {
    JsonWriter j;
    j.begin_object().field("a", 1).key("b").begin_array().value(2).value(3).end_array();
    j.key("c").begin_object().end_object().key("d").begin_array().end_array().end_object();
    EXPECT_EQ(j.str(), R"({"a": 1, "b": [2, 3], "c": {}, "d": []})");
}

// Keys and values are escaped: quote, backslash, control characters; UTF-8 passes.
TEST(JsonWriterTest, EscapesNamesAndStrings) {
    JsonWriter j;
    j.begin_object().field("g\"q", "a\\b\tc\x01\xc3\xa9").end_object();
    EXPECT_EQ(j.str(), "{\"g\\\"q\": \"a\\\\b\\tc\\u0001\xc3\xa9\"}");
}

// A double is written in the shortest form that reads back to the same double.
TEST(JsonWriterTest, DoublesRoundTrip) {
    for (double d : {0.1, 1.0 / 3.0, 184229.65377777777, 1e-300, 123456789012345.67}) {
        JsonWriter j;
        j.value(d);
        EXPECT_EQ(std::strtod(j.str().c_str(), nullptr), d) << j.str();
    }
}

// The largest counters are exact, and booleans are JSON's words.
TEST(JsonWriterTest, IntegersExactBooleansWords) {
    JsonWriter j;
    j.begin_array().value(std::numeric_limits<uint64_t>::max()).value(int64_t(-5));
    j.value(true).value(false).end_array();
    EXPECT_EQ(j.str(), "[18446744073709551615, -5, true, false]");
}

// JSON has no NaN or infinity: they are written as null, so the file still parses.
TEST(JsonWriterTest, NonFiniteIsNull) {
    JsonWriter j;
    j.begin_array().value(std::nan("")).value(HUGE_VAL).end_array();
    EXPECT_EQ(j.str(), "[null, null]");
}

}  // namespace
}  // namespace mdsplit
