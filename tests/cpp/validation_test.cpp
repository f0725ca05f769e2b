// Validation messages stay one line whatever the input (found by
// tests/fuzz/fuzz_config.cpp: a path written with a TOML "\n" escape).
#include <gtest/gtest.h>

#include <string>

#include "config/config_loader.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

std::string message_of(const std::string& toml) {
    try {
        load_stack_text(toml, "/tmp/mdsplit-no-such-dir-for-tests", "s.toml");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(accepted)";
}

TEST(ValidationMessageTest, ControlCharactersFromTheInputAreEscaped) {
    std::string m = message_of("[[members]]\npath = \"a\\nb\\u0001c\"\n");
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find("a\\nb\\x01c"), std::string::npos) << m;
    m = message_of(
        "[device]\nkind = \"raid\\r\\t5\"\n[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n");
    EXPECT_EQ(m,
              "s.toml: device.kind: \"raid\\r\\t5\" is not a device kind; allowed: "
              "\"passthrough\" | \"raid5\"");
}

TEST(ValidationMessageTest, OneLineMessageLeavesPrintableTextAlone) {
    EXPECT_EQ(one_line_message("plain: text; allowed: \"x\" | \"y\" (\\n stays)"),
              "plain: text; allowed: \"x\" | \"y\" (\\n stays)");
    EXPECT_EQ(one_line_message(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(one_line_message("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

}  // namespace
}  // namespace mdsplit
