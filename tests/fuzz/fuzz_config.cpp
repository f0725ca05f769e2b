// libFuzzer target: the stack TOML loader (load_stack_text). Any input must
// either load or throw ConfigError with a one-line message; nothing else may
// escape, crash or trip a sanitizer. Paths are resolved against a private
// empty directory; the loader only stats paths, it never creates them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

#include "config/config_loader.h"
#include "stack/storage_probe.h"

namespace {
// The private directory, removed when the fuzzer exits (it stays empty).
struct PrivateDir {
    std::string path;
    PrivateDir() {
        char tmpl[] = "/tmp/mdsplit-fuzz-config-XXXXXX";
        const char* d = mkdtemp(tmpl);
        if (!d) {
            perror("mkdtemp /tmp/mdsplit-fuzz-config-XXXXXX");
            abort();
        }
        path = d;
    }
    ~PrivateDir() { rmdir(path.c_str()); }
};

const std::string& base_dir() {
    static const PrivateDir dir;
    return dir.path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        mdsplit::StackConfig config = mdsplit::load_stack_text(text, base_dir(), "fuzz.toml");
        // A loaded stack is consistent with what the loader promises.
        if (config.members.empty()) abort();
        for (const mdsplit::MemberConfig& m : config.members) {
            if (m.size % m.logical_block_size) abort();
            if (m.max_sectors_bytes % m.logical_block_size || m.max_sectors_bytes < 4096) abort();
            if (m.queue_depth < 1) abort();
        }
        if (config.device.kind == mdsplit::DeviceKind::Raid5 &&
            (config.members.size() < 3 ||
             (config.device.chunk_bytes & (config.device.chunk_bytes - 1))))
            abort();
    } catch (const mdsplit::ConfigError& e) {
        std::string_view what = e.what();
        if (what.empty() || what.find('\n') != std::string_view::npos) {
            fprintf(stderr, "multi-line or empty ConfigError: [%s]\n", e.what());
            abort();
        }
    }
    return 0;
}
