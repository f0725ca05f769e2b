#include "config/config_loader.h"

#include <sys/stat.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <utility>

#include "base/units.h"
#include "config/size_parse.h"
#include "config/storage_probe.h"
#include "embedded_models.h"

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

// A stack file is a few dozen lines; a larger one is a mistake (a data file
// named by accident), refused before parsing.
constexpr size_t kMaxStackFileBytes = 1 << 20;
constexpr std::string_view kEmbeddedModelsLabel = "jobs/models.toml (embedded)";

template <typename Enum, size_t N>
std::string allowed_names(const EnumName<Enum> (&names)[N], size_t count = N) {
    std::string text;
    for (size_t i = 0; i < count; ++i) {
        if (i > 0) {
            text += " | ";
        }
        text += '"';
        text += names[i].name;
        text += '"';
    }
    return text;
}

// ---------------------------------------------------------------------------
// Helpers for messages

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string text;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) {
            text.append(separator);
        }
        text.append(items[i]);
    }
    return text;
}

std::string one_line(std::string_view text) {
    std::string result(text);
    std::replace(result.begin(), result.end(), '\n', ' ');
    std::replace(result.begin(), result.end(), '\r', ' ');
    while (!result.empty() && result.back() == ' ') {
        result.pop_back();
    }
    return result;
}

// "a string "x"", "integer 5", "a table", ... for "expected X, got Y".
std::string describe(const toml::node& node) {
    std::ostringstream text;
    switch (node.type()) {
        case toml::node_type::string:
            text << "string " << in_quotes(node.as_string()->get());
            break;
        case toml::node_type::integer:
            text << "integer " << node.as_integer()->get();
            break;
        case toml::node_type::floating_point:
            text << "float " << node.as_floating_point()->get();
            break;
        case toml::node_type::boolean:
            text << "boolean " << (node.as_boolean()->get() ? "true" : "false");
            break;
        case toml::node_type::table:
            text << "a table";
            break;
        case toml::node_type::array:
            text << "an array";
            break;
        case toml::node_type::date:
        case toml::node_type::time:
        case toml::node_type::date_time:
            text << "a date/time";
            break;
        case toml::node_type::none:
            text << "nothing";
            break;
    }
    return text.str();
}

std::string key_path(const std::string& parent, std::string_view key) {
    if (parent.empty()) {
        return std::string(key);
    }
    return parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, size_t index) {
    return parent + "[" + std::to_string(index) + "]";
}

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// ---------------------------------------------------------------------------
// Reading typed values with messages that name the key

class Reader {
public:
    // `probe` answers for member paths (member tables need one).
    explicit Reader(std::string label, const StorageProbe* probe = nullptr)
        : label_(std::move(label)), probe_(probe) {}

    const std::string& label() const { return label_; }
    const StorageProbe& probe() const { return *probe_; }

    [[noreturn]] void fail(std::string_view key, std::string_view problem,
                           std::string_view allowed = {}) const {
        throw make_config_error(label_, key, problem, allowed);
    }

    // Every key of `table` must be in `allowed`.
    void check_keys(const toml::table& table, const std::string& path,
                    std::initializer_list<std::string_view> allowed) const {
        check_keys(table, path, std::vector<std::string_view>(allowed));
    }
    void check_keys(const toml::table& table, const std::string& path,
                    const std::vector<std::string_view>& allowed) const {
        for (auto&& [key, node] : table) {
            (void)node;
            if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
                std::vector<std::string> names(allowed.begin(), allowed.end());
                fail(key_path(path, key.str()), "unknown key", join(names, ", "));
            }
        }
    }

    const toml::table* table(const toml::table& parent, std::string_view key,
                             const std::string& path) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return nullptr;
        }
        if (!node->is_table()) {
            fail(key_path(path, key), "expected a table, got " + describe(*node),
                 "a [" + key_path(path, key) + "] table");
        }
        return node->as_table();
    }

    std::optional<std::string> string(const toml::table& parent, std::string_view key,
                                      const std::string& path,
                                      std::string_view allowed = "a string") const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        if (!node->is_string()) {
            fail(key_path(path, key), "expected a string, got " + describe(*node), allowed);
        }
        return node->as_string()->get();
    }

    std::optional<bool> boolean(const toml::table& parent, std::string_view key,
                                const std::string& path) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        if (!node->is_boolean()) {
            fail(key_path(path, key), "expected a boolean, got " + describe(*node), "true | false");
        }
        return node->as_boolean()->get();
    }

    // A TOML integer in [minimum, maximum].
    std::optional<uint64_t> integer(const toml::table& parent, std::string_view key,
                                    const std::string& path, uint64_t minimum,
                                    uint64_t maximum) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        std::string range =
            "an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum);
        if (!node->is_integer()) {
            fail(key_path(path, key), "expected an integer, got " + describe(*node), range);
        }
        int64_t value = node->as_integer()->get();
        if (value < 0 || uint64_t(value) < minimum || uint64_t(value) > maximum) {
            fail(key_path(path, key), std::to_string(value) + " is out of range", range);
        }
        return uint64_t(value);
    }

    // A number (integer or float) within [minimum, maximum].
    std::optional<double> number(const toml::table& parent, std::string_view key,
                                 const std::string& path, double minimum, double maximum) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        std::string range =
            "a number from " + std::to_string(minimum) + " to " + std::to_string(maximum);
        double value = 0;
        if (node->is_integer()) {
            value = double(node->as_integer()->get());
        } else if (node->is_floating_point()) {
            value = node->as_floating_point()->get();
        } else {
            fail(key_path(path, key), "expected a number, got " + describe(*node), range);
        }
        if (!(value >= minimum && value <= maximum)) {
            fail(key_path(path, key), describe(*node) + " is out of range", range);
        }
        return value;
    }

    // A size: a TOML integer of bytes or a string with a suffix.
    std::optional<uint64_t> size(const toml::table& parent, std::string_view key,
                                 const std::string& path) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        std::string full_key = key_path(path, key);
        if (node->is_integer()) {
            int64_t value = node->as_integer()->get();
            if (value < 0) {
                fail(full_key, std::to_string(value) + " is negative", kSizeSyntax);
            }
            return uint64_t(value);
        }
        if (!node->is_string()) {
            fail(full_key, "expected a size, got " + describe(*node), kSizeSyntax);
        }
        try {
            return parse_size(node->as_string()->get(), full_key);
        } catch (const ConfigError& error) {
            throw ConfigError(label_ + ": " + error.what());
        }
    }

    // A size that must be a power of two of at least a page (a chunk, an
    // alignment); `examples` name two allowed values.
    std::optional<uint64_t> page_power_of_two(const toml::table& parent, std::string_view key,
                                              const std::string& path,
                                              const std::string& examples) const {
        auto value = size(parent, key, path);
        if (value && (!is_power_of_two(*value) || *value < kPageSize))
            fail(key_path(path, key),
                 std::to_string(*value) + " bytes is not a power of two of at least 4k",
                 "a power of two >= 4k, like " + examples);
        return value;
    }

    // A duration: a string with a unit, or the TOML integer 0.
    std::optional<uint64_t> duration(const toml::table& parent, std::string_view key,
                                     const std::string& path) const {
        const toml::node* node = parent.get(key);
        if (node == nullptr) {
            return std::nullopt;
        }
        std::string full_key = key_path(path, key);
        if (node->is_integer()) {
            if (node->as_integer()->get() == 0) {
                return 0;
            }
            fail(full_key, describe(*node) + " has no unit", kDurationSyntax);
        }
        if (!node->is_string()) {
            fail(full_key, "expected a duration, got " + describe(*node), kDurationSyntax);
        }
        uint64_t ns;
        try {
            ns = parse_duration_ns(node->as_string()->get(), full_key);
        } catch (const ConfigError& error) {
            throw ConfigError(label_ + ": " + error.what());
        }
        // A day at most: times time_scale (up to 1000) and added to the
        // clock, a longer one could wrap 64 bits of nanoseconds.
        constexpr uint64_t kMaxDurationNs = 86'400'000'000'000ull;
        if (ns > kMaxDurationNs)
            fail(full_key, describe(*node) + " is longer than a day",
                 "a duration from 0 to \"86400s\", like \"8ms\"");
        return ns;
    }

    template <typename Enum, size_t N>
    std::optional<Enum> enumeration(const toml::table& parent, std::string_view key,
                                    const std::string& path, std::string_view what,
                                    const EnumName<Enum> (&names)[N], size_t name_count = N) const {
        std::string allowed = allowed_names(names, name_count);
        std::optional<std::string> text = string(parent, key, path, allowed);
        if (!text) {
            return std::nullopt;
        }
        for (size_t i = 0; i < name_count; ++i) {
            if (names[i].name == *text) {
                return names[i].value;
            }
        }
        fail(key_path(path, key), in_quotes(*text) + " is not " + std::string(what), allowed);
    }

private:
    std::string label_;
    const StorageProbe* probe_;
};

// ---------------------------------------------------------------------------
// Sections

// prefetch_window: a size, or "request" (the previous request's size).
uint64_t read_prefetch_window(const Reader& reader, const toml::table& table,
                              const std::string& path) {
    const std::string allowed = std::string(kSizeSyntax) + R"(, or "request")";
    const toml::node* node = table.get("prefetch_window");
    if (const auto* text = node->as_string()) {
        if (text->get() == "request") return TimingModelConfig::kPrefetchWindowRequest;
        try {
            return parse_size(text->get(), "prefetch_window");
        } catch (const ConfigError&) {
            reader.fail(key_path(path, "prefetch_window"),
                        in_quotes(text->get()) + " is not a size", allowed);
        }
    }
    if (!node->is_integer() || node->as_integer()->get() < 0)
        reader.fail(key_path(path, "prefetch_window"), "expected a size, got " + describe(*node),
                    allowed);
    return uint64_t(node->as_integer()->get());
}

// Bytes per second, 0 for none (no transfer time); at least 1k, so that no
// request's transfer time (up to 4 GiB at 1k/s, times time_scale) wraps.
uint64_t read_bandwidth(const Reader& reader, const toml::table& table, std::string_view key,
                        const std::string& path) {
    uint64_t bps = reader.size(table, key, path).value_or(0);
    if (bps && bps < 1024)
        reader.fail(key_path(path, key), std::to_string(bps) + " bytes per second is below 1k",
                    "0 (no transfer time), or a size per second of at least \"1k\", like "
                    "\"500m\"");
    return bps;
}

TimingModelConfig read_model(const Reader& reader, const toml::table& table,
                             const std::string& path, const std::string& name) {
    reader.check_keys(
        table, path,
        {"command", "bandwidth", "random_penalty", "random_command", "prefetch_threshold",
         "prefetch_window", "parallelism", "write_command", "write_bandwidth",
         "write_random_penalty", "jitter", "jitter_seed", "die_stripe", "description"});
    TimingModelConfig model;
    model.name = name;
    model.command_ns = reader.duration(table, "command", path).value_or(0);
    model.bandwidth_bps = read_bandwidth(reader, table, "bandwidth", path);
    model.random_penalty_ns = reader.duration(table, "random_penalty", path).value_or(0);
    model.random_command_ns = reader.duration(table, "random_command", path).value_or(0);
    if (table.get("prefetch_threshold"))
        model.prefetch_threshold_bytes = reader.size(table, "prefetch_threshold", path).value_or(0);
    if (table.get("prefetch_window"))
        model.prefetch_window_bytes = read_prefetch_window(reader, table, path);
    model.parallelism = uint32_t(reader.integer(table, "parallelism", path, 1, 65536).value_or(1));
    model.write_command_ns = reader.duration(table, "write_command", path).value_or(0);
    model.write_bandwidth_bps = read_bandwidth(reader, table, "write_bandwidth", path);
    model.write_random_penalty_ns =
        reader.duration(table, "write_random_penalty", path).value_or(model.random_penalty_ns);
    model.jitter_ns = reader.duration(table, "jitter", path).value_or(0);
    model.jitter_seed = reader.integer(table, "jitter_seed", path, 0, 1'000'000).value_or(0);
    model.die_stripe_bytes = reader.size(table, "die_stripe", path).value_or(0);
    model.description = reader.string(table, "description", path).value_or("");
    return model;
}

std::map<std::string, TimingModelConfig> read_models(const Reader& reader,
                                                     const toml::table& models_table,
                                                     const std::string& path) {
    std::map<std::string, TimingModelConfig> models;
    for (auto&& [key, node] : models_table) {
        std::string name(key.str());
        std::string model_path = key_path(path, name);
        if (name.empty()) {
            reader.fail(model_path, "a model needs a name", "[models.NAME] with a non-empty NAME");
        }
        if (!node.is_table()) {
            reader.fail(model_path, "expected a table, got " + describe(node),
                        "a [" + model_path + "] table");
        }
        models.emplace(name, read_model(reader, *node.as_table(), model_path, name));
    }
    return models;
}

// A request's size is 32 bits (struct request's __data_len, a bio's
// bi_size): max_sectors stops at the largest multiple of 512 below 4 GiB.
void check_max_sectors_fits(const Reader& reader, const std::string& key, uint64_t bytes) {
    constexpr uint64_t kMaxRequestBytes = (uint64_t(UINT32_MAX) >> kSectorShift) << kSectorShift;
    if (bytes > kMaxRequestBytes)
        reader.fail(key,
                    std::to_string(bytes) + " bytes is more than one request holds (" +
                        std::to_string(kMaxRequestBytes) + " bytes: a request's size is 32 bits)",
                    "a multiple of 512 bytes from 4k to 4g - 512, like \"1m\"");
}

void read_device(const Reader& reader, const toml::table& table, DeviceConfig& device) {
    const std::string path = "device";
    reader.check_keys(
        table, path,
        {"kind", "chunk", "layout", "max_sectors", "split_order", "plug_order", "scheduler",
         "time_scale", "devices_handle_discard_safely", "stripe_cache_size"});
    device.kind = reader.enumeration(table, "kind", path, "a device kind", kDeviceKinds)
                      .value_or(device.kind);
    if (auto chunk = reader.page_power_of_two(table, "chunk", path, "\"64k\", \"512k\""))
        device.chunk_bytes = *chunk;
    device.layout = reader.enumeration(table, "layout", path, "a RAID5 layout", kRaid5Layouts)
                        .value_or(device.layout);
    if (auto max_sectors = reader.size(table, "max_sectors", path)) {
        if (*max_sectors % kSectorSize != 0 || *max_sectors < kPageSize) {
            reader.fail(
                key_path(path, "max_sectors"),
                std::to_string(*max_sectors) + " bytes is not a multiple of 512 of at least 4k",
                "a multiple of 512 bytes >= 4k, like \"1m\"");
        }
        check_max_sectors_fits(reader, key_path(path, "max_sectors"), *max_sectors);
        device.max_sectors_bytes = *max_sectors;
    }
    device.split_order =
        reader.enumeration(table, "split_order", path, "a split order", kSplitOrders)
            .value_or(device.split_order);
    device.plug_order = reader.enumeration(table, "plug_order", path, "a plug order", kPlugOrders)
                            .value_or(device.plug_order);
    // "auto": the fio engine calibrates it at setup (stack/time_scale_auto.h);
    // until then, and on the virtual clock, which always keeps up, 1.
    if (const toml::node* k = table.get("time_scale"); k && k->is_string()) {
        if (k->as_string()->get() != "auto")
            reader.fail(key_path(path, "time_scale"),
                        "\"" + k->as_string()->get() + "\" is not a time scale",
                        "a number from 0.001 to 1000, or \"auto\"");
        device.time_scale_auto = true;
    } else {
        device.time_scale = reader.number(table, "time_scale", path, 0.001, 1000).value_or(1.0);
    }
    device.devices_handle_discard_safely =
        reader.boolean(table, "devices_handle_discard_safely", path)
            .value_or(device.devices_handle_discard_safely);
    // raid5_set_cache_size(): md refuses fewer than 17 or more than 32768.
    device.stripe_cache_size = uint32_t(reader.integer(table, "stripe_cache_size", path, 17, 32768)
                                            .value_or(device.stripe_cache_size));
    device.scheduler = reader.enumeration(table, "scheduler", path, "a scheduler", kSchedulers)
                           .value_or(device.scheduler);
    // The passthrough device (dm-linear's twin) takes every limit from its
    // member and has no stripes: md's keys there would be read and unused.
    if (device.kind == DeviceKind::Passthrough) {
        for (const char* key : {"chunk", "layout", "max_sectors", "stripe_cache_size",
                                "devices_handle_discard_safely"}) {
            if (table.contains(key))
                reader.fail(key_path(path, key),
                            "is a raid5 key; a passthrough device takes its limits from its "
                            "member",
                            std::string("kind = \"raid5\", or no device.") + key +
                                " (members[0].max_sectors limits a passthrough's requests)");
        }
    }
}

// What stat() says about a member's path.
struct PathFacts {
    bool exists = false;
    struct stat status {};
    // A block device's size (BLKGETSIZE64), when it could be opened.
    std::optional<uint64_t> device_bytes;
};

// A missing member under /dev is a device that is not there (a typo, an
// unplugged disk): creating a regular file in its place would write where
// the user did not point.
void check_not_device_directory(const Reader& reader, const std::string& key,
                                const std::string& path, const fs::path& existing_dir) {
    std::error_code ec;
    fs::path dir = fs::canonical(existing_dir, ec);
    if (ec) dir = existing_dir;
    std::string d = dir.string();
    bool under_dev = d == "/dev" || d.rfind("/dev/", 0) == 0 ||
                     fs::path(path).lexically_normal().string().rfind("/dev/", 0) == 0;
    if (under_dev || reader.probe().fs_type(d) == "devtmpfs")
        reader.fail(key,
                    in_quotes(path) +
                        " does not exist, and no file is created in a device "
                        "directory (" +
                        in_quotes(d) + ")",
                    "an existing block device, or a regular file outside /dev");
}

// A missing member file is created (with its missing directories): the
// nearest existing ancestor must be a writable directory on a writable
// file system, and not a device directory.
void check_creatable(const Reader& reader, const std::string& key, const std::string& path) {
    const std::string allowed =
        "a path whose directory exists or can be created, on a writable file system";
    fs::path dir = fs::path(path).parent_path();
    struct stat st {};
    int err = 0;
    while (!dir.empty() && (err = reader.probe().stat(dir.string(), st)) != 0) {
        if (err != ENOENT)
            reader.fail(key,
                        "cannot create " + in_quotes(path) + ": " + in_quotes(dir.string()) + ": " +
                            std::strerror(err),
                        allowed);
        if (dir == dir.parent_path()) break;
        dir = dir.parent_path();
    }
    if (!S_ISDIR(st.st_mode))
        reader.fail(key,
                    "cannot create " + in_quotes(path) + ": " + in_quotes(dir.string()) +
                        " is not a directory",
                    allowed);
    check_not_device_directory(reader, key, path, dir);
    if (!reader.probe().writable_directory(dir.string()))
        reader.fail(key,
                    "cannot create " + in_quotes(path) + ": " + in_quotes(dir.string()) +
                        " is not writable",
                    allowed);
}

PathFacts inspect_path(const Reader& reader, const std::string& key, const std::string& path) {
    PathFacts facts;
    int err = reader.probe().stat(path, facts.status);
    if (err == 0) {
        facts.exists = true;
        return facts;
    }
    if (err != ENOENT) {
        reader.fail(key, "cannot stat " + in_quotes(path) + ": " + std::strerror(err),
                    "a regular file or a block device");
    }
    return facts;
}

// Absolute, with "." parts and repeated slashes dropped; ".." stays, since
// the kernel resolves it after the symlink before it ("lnk/.." is the
// parent of lnk's target, not the directory holding lnk).
std::string member_path_from(const std::string& base_dir, const std::string& path) {
    fs::path member_path(path);
    if (member_path.is_relative()) {
        member_path = fs::path(base_dir) / member_path;
    }
    fs::path out;
    for (const fs::path& part : member_path)
        if (!part.empty() && part != ".") out /= part;
    return out.string();
}

// [members.faults] (backends/fault_injector.h). member_size: bytes, 0 when
// not known yet (an existing block device).
FaultConfig read_faults(const Reader& reader, const toml::table& member_table,
                        const std::string& member_path, uint64_t member_size) {
    const std::string path = key_path(member_path, "faults");
    const toml::table* table = reader.table(member_table, "faults", member_path);
    reader.check_keys(
        *table, path,
        {"fail_nth", "fail_sectors", "fail_probability", "seed", "latency_spike", "fail_at"});
    FaultConfig faults;
    constexpr int64_t kMax = int64_t(1) << 62;
    if (const toml::node* nth = table->get("fail_nth")) {
        const std::string key = key_path(path, "fail_nth");
        const std::string allowed = "an array of request numbers >= 1, like [100, 250]";
        if (!nth->is_array()) reader.fail(key, "expected an array, got " + describe(*nth), allowed);
        const toml::array& items = *nth->as_array();
        for (size_t i = 0; i < items.size(); ++i) {
            if (!items[i].is_integer() || items[i].as_integer()->get() < 1 ||
                items[i].as_integer()->get() > kMax)
                reader.fail(index_path(key, i), describe(items[i]) + " is not a request number",
                            allowed);
            faults.fail_nth.push_back(uint64_t(items[i].as_integer()->get()));
        }
    }
    if (const toml::node* ranges = table->get("fail_sectors")) {
        const std::string key = key_path(path, "fail_sectors");
        const std::string allowed =
            "an array of [start, end] member sector ranges (512-byte sectors, start < end), "
            "like [[2048, 2056]]";
        if (!ranges->is_array())
            reader.fail(key, "expected an array, got " + describe(*ranges), allowed);
        const toml::array& items = *ranges->as_array();
        for (size_t i = 0; i < items.size(); ++i) {
            const std::string entry = index_path(key, i);
            const toml::array* pair = items[i].as_array();
            if (pair == nullptr || pair->size() != 2 || !(*pair)[0].is_integer() ||
                !(*pair)[1].is_integer())
                reader.fail(entry, "expected [start, end], got " + describe(items[i]), allowed);
            int64_t start = (*pair)[0].as_integer()->get();
            int64_t end = (*pair)[1].as_integer()->get();
            if (start < 0 || end > kMax || start >= end)
                reader.fail(entry,
                            "[" + std::to_string(start) + ", " + std::to_string(end) +
                                "] is not a sector range",
                            allowed);
            if (member_size && uint64_t(end) > (member_size >> kSectorShift))
                reader.fail(entry,
                            "[" + std::to_string(start) + ", " + std::to_string(end) +
                                "] ends past the member's last sector (" +
                                std::to_string(member_size >> kSectorShift) + " sectors)",
                            "ranges inside the member");
            faults.fail_sectors.emplace_back(uint64_t(start), uint64_t(end));
        }
    }
    faults.fail_probability = reader.number(*table, "fail_probability", path, 0, 1).value_or(0);
    faults.seed = reader.integer(*table, "seed", path, 0, uint64_t(kMax)).value_or(1);
    if (const toml::node* spike = table->get("latency_spike")) {
        const std::string key = key_path(path, "latency_spike");
        const std::string allowed = R"({ every = N, extra = "20ms" }, N >= 1, extra > 0)";
        if (!spike->is_table())
            reader.fail(key, "expected a table, got " + describe(*spike), allowed);
        const toml::table& t = *spike->as_table();
        reader.check_keys(t, key, {"every", "extra"});
        auto every = reader.integer(t, "every", key, 1, uint64_t(kMax));
        auto extra = reader.duration(t, "extra", key);
        if (!every) reader.fail(key_path(key, "every"), "missing", allowed);
        if (!extra || *extra == 0)
            reader.fail(key_path(key, "extra"), extra ? "a spike cannot be 0" : "missing", allowed);
        faults.spike_every = *every;
        faults.spike_extra_ns = *extra;
    }
    if (table->get("fail_at")) faults.fail_at_ns = reader.duration(*table, "fail_at", path);
    return faults;
}

// A block device member has the device's logical block size
// (queue/logical_block_size, BLKSSZGET): I/O the device cannot take would
// fail with EINVAL at the member, not be refused at the top as on a kernel
// stack over that device. Without the key the member takes it; a key below
// it is refused (a larger one is emulated: every I/O is a multiple). Its size
// (BLKGETSIZE64) goes into `facts` for the RAID5 one-chunk check, and a device
// of 0 bytes (a loop device over an empty file) is refused: fio would run
// nothing on it and report success.
void take_block_device_facts(const Reader& reader, const toml::table& table,
                             const std::string& path, MemberConfig& member, PathFacts& facts) {
    BlockDeviceFacts device = reader.probe().block_device(member.path);
    if (!device.opened) return;  // the member's own open reports it
    facts.device_bytes = device.bytes;
    if (facts.device_bytes == 0u && member.size == 0)
        reader.fail(key_path(path, "path"),
                    in_quotes(member.path) + " is a block device of 0 bytes",
                    "a block device with room for data");
    const int device_lbs = int(device.logical_block_size);
    if (device_lbs <= 0) return;
    std::string sizes = "512 | 1024 | 2048 | 4096";
    if (!table.get("logical_block_size")) {
        if (device_lbs > 4096)
            reader.fail(key_path(path, "path"),
                        in_quotes(member.path) + " has a logical block size of " +
                            std::to_string(device_lbs) + " bytes",
                        "a block device whose logical block size is " + sizes);
        member.logical_block_size = uint32_t(device_lbs);
    } else if (member.logical_block_size < uint32_t(device_lbs)) {
        std::vector<std::string> large_enough;
        for (int lbs = device_lbs; lbs <= 4096; lbs *= 2)
            large_enough.push_back(std::to_string(lbs));
        reader.fail(key_path(path, "logical_block_size"),
                    std::to_string(member.logical_block_size) + " is smaller than " +
                        in_quotes(member.path) + "'s logical block size (" +
                        std::to_string(device_lbs) + ")",
                    join(large_enough, " | ") + ", or no logical_block_size (the device's)");
    }
}

MemberConfig read_member(const Reader& reader, const toml::table& table, const std::string& path,
                         const std::string& base_dir,
                         const std::map<std::string, TimingModelConfig>& file_models,
                         PathFacts& facts) {
    reader.check_keys(table, path,
                      {"path", "size", "backend", "model", "max_sectors", "queue_depth",
                       "logical_block_size", "failed", "direct", "grow", "force", "faults"});
    MemberConfig member;
    member.backend =
        reader.enumeration(table, "backend", path, "a backend", kBackends).value_or(member.backend);

    if (auto lbs = reader.size(table, "logical_block_size", path)) {
        if (*lbs != 512 && *lbs != 1024 && *lbs != 2048 && *lbs != 4096) {
            reader.fail(key_path(path, "logical_block_size"),
                        std::to_string(*lbs) + " is not a logical block size",
                        "512 | 1024 | 2048 | 4096");
        }
        member.logical_block_size = uint32_t(*lbs);
    }

    if (auto size = reader.size(table, "size", path)) {
        if (*size == 0) {
            reader.fail(key_path(path, "size"), "a member cannot be empty",
                        "a size > 0, like \"2g\"");
        }
        member.size = *size;
    }
    std::optional<uint64_t> max_sectors = reader.size(table, "max_sectors", path);

    member.queue_depth =
        uint32_t(reader.integer(table, "queue_depth", path, 1, 4096).value_or(member.queue_depth));
    member.failed = reader.boolean(table, "failed", path).value_or(member.failed);
    // What opening a file decides; ram and null members open none (a path
    // given to them is only measured).
    if (member.backend != BackendKind::IoUring)
        for (const char* key : {"direct", "grow", "force"})
            if (table.contains(key))
                reader.fail(key_path(path, key), "is read by io_uring members only",
                            std::string("backend = \"io_uring\" with it, or no ") + key);
    member.direct = reader.boolean(table, "direct", path).value_or(member.direct);
    member.grow = reader.boolean(table, "grow", path).value_or(member.grow);
    member.force = reader.boolean(table, "force", path).value_or(member.force);

    // path: required for io_uring; optional for ram/null, which touch no file.
    std::string path_key = key_path(path, "path");
    std::optional<std::string> member_path =
        reader.string(table, "path", path, "a file or block device path");
    if (member_path && member_path->empty()) {
        reader.fail(path_key, "the path is empty", "a file or block device path");
    }
    // The kernel would take the path up to the NUL: another file than named.
    if (member_path && member_path->find('\0') != std::string::npos) {
        reader.fail(path_key, "the path holds a NUL character",
                    "a file or block device path without NUL");
    }
    if (!member_path && member.backend == BackendKind::IoUring) {
        reader.fail(path_key, "missing: an io_uring member needs a file",
                    "a regular file or a block device path");
    }
    if (member_path) {
        member.path = member_path_from(base_dir, *member_path);
        facts = inspect_path(reader, path_key, member.path);
        if (facts.exists) {
            mode_t type = facts.status.st_mode & S_IFMT;
            if (type == S_IFDIR) {
                reader.fail(path_key, in_quotes(member.path) + " is a directory",
                            "a regular file or a block device");
            }
            if (type != S_IFREG && type != S_IFBLK) {
                reader.fail(
                    path_key,
                    in_quotes(member.path) + " is neither a regular file " + "nor a block device",
                    "a regular file or a block device");
            }
            if (type == S_IFREG && facts.status.st_size == 0 && member.size == 0) {
                reader.fail(key_path(path, "size"),
                            "missing, and " + in_quotes(member.path) + " is empty",
                            "a size like \"2g\" (the file is extended to it)");
            }
            if (type == S_IFREG && member.size > uint64_t(facts.status.st_size) && !member.grow) {
                reader.fail(key_path(path, "size"),
                            std::to_string(member.size) + " bytes is more than " +
                                in_quotes(member.path) + " holds (" +
                                std::to_string(facts.status.st_size) + " bytes)",
                            "at most the file's size, or grow = true to extend the file");
            }
            if (type == S_IFREG && member.size == 0 &&
                uint64_t(facts.status.st_size) % member.logical_block_size != 0) {
                reader.fail(path_key,
                            in_quotes(member.path) + " holds " +
                                std::to_string(facts.status.st_size) +
                                " bytes, not a multiple of the logical block size (" +
                                std::to_string(member.logical_block_size) + ")",
                            "a file whose size is a multiple of logical_block_size, or a size "
                            "that is");
            }
        } else {
            if (member.size == 0) {
                reader.fail(key_path(path, "size"),
                            "missing, and " + in_quotes(member.path) + " does not exist",
                            "a size like \"2g\" (the file is created sparse at that size)");
            }
            if (member.backend == BackendKind::IoUring) {
                check_creatable(reader, path_key, member.path);
            }
        }
        if (facts.exists && S_ISBLK(facts.status.st_mode))
            take_block_device_facts(reader, table, path, member, facts);
    } else if (member.size == 0) {
        reader.fail(key_path(path, "size"),
                    std::string("missing: a ") + backend_name(member.backend) +
                        " member without a path needs a size",
                    "a size like \"2g\"");
    }

    // With the logical block size final (the key, else a block device's own).
    if (member.size % member.logical_block_size != 0) {
        reader.fail(key_path(path, "size"),
                    std::to_string(member.size) + " bytes is not a multiple of the logical " +
                        "block size (" + std::to_string(member.logical_block_size) + ")",
                    "a multiple of logical_block_size");
    }
    if (max_sectors) {
        if (*max_sectors % kSectorSize != 0 || *max_sectors < kPageSize ||
            *max_sectors % member.logical_block_size != 0) {
            reader.fail(key_path(path, "max_sectors"),
                        std::to_string(*max_sectors) +
                            " bytes is not a multiple of 512 (and of logical_block_size) "
                            "of at least 4k",
                        "a multiple of 512 bytes >= 4k, like \"512k\"");
        }
        check_max_sectors_fits(reader, key_path(path, "max_sectors"), *max_sectors);
        member.max_sectors_bytes = *max_sectors;
    }

    if (table.get("faults")) {
        uint64_t known_size = member.size;
        if (!known_size && facts.exists && (facts.status.st_mode & S_IFMT) == S_IFREG)
            known_size = uint64_t(facts.status.st_size);
        member.faults = read_faults(reader, table, path, known_size);
        if (member.failed)
            reader.fail(key_path(path, "faults"), "a failed member receives no I/O to fail",
                        "faults on a member without failed = true");
    }

    // model: a name, or an inline table of model fields.
    if (const toml::node* model_node = table.get("model")) {
        std::string model_key = key_path(path, "model");
        if (model_node->is_table()) {
            member.model = read_model(reader, *model_node->as_table(), model_key, model_key);
        } else if (model_node->is_string()) {
            std::string name = model_node->as_string()->get();
            if (auto own = file_models.find(name); own != file_models.end()) {
                member.model = own->second;
            } else if (auto preset = preset_models().find(name); preset != preset_models().end()) {
                member.model = preset->second;
            } else {
                std::vector<std::string> known;
                for (const auto& [known_name, model] : file_models) {
                    known.push_back(in_quotes(known_name));
                }
                for (const std::string& preset_name : preset_model_names()) {
                    if (file_models.count(preset_name) == 0) {
                        known.push_back(in_quotes(preset_name));
                    }
                }
                reader.fail(model_key,
                            in_quotes(name) + " is neither a [models." + name +
                                "] table of this file nor a preset",
                            join(known, " | ") + " or an inline table");
            }
        } else {
            reader.fail(model_key, "expected a model name or a table, got " + describe(*model_node),
                        "a [models.NAME] name, a preset name or an inline table");
        }
    }
    return member;
}

// known_sizes: each member's size in bytes as far as known now (the
// configured size, else an existing regular file's; 0 for a block device).
std::vector<MemberConfig> read_members(const Reader& reader, const toml::table& root,
                                       const std::string& base_dir,
                                       const std::map<std::string, TimingModelConfig>& models,
                                       std::vector<uint64_t>& known_sizes) {
    const std::string path = "members";
    const toml::node* node = root.get(path);
    if (node == nullptr) {
        reader.fail(path, "no members", "at least one [[members]] table");
    }
    if (node->is_array() && node->as_array()->empty()) {
        reader.fail(path, "no members", "at least one [[members]] table");
    }
    if (!node->is_array_of_tables()) {
        reader.fail(path, "expected an array of tables, got " + describe(*node),
                    "[[members]] tables");
    }
    const toml::array& array = *node->as_array();
    std::vector<MemberConfig> members;
    std::vector<PathFacts> facts(array.size());
    for (size_t i = 0; i < array.size(); ++i) {
        std::string member_path = index_path(path, i);
        members.push_back(
            read_member(reader, *array[i].as_table(), member_path, base_dir, models, facts[i]));
        uint64_t known = members[i].size;
        if (!known && facts[i].exists && S_ISREG(facts[i].status.st_mode))
            known = uint64_t(facts[i].status.st_size);
        if (!known && facts[i].device_bytes) known = *facts[i].device_bytes;
        known_sizes.push_back(known);
        // Two members on one file would overwrite each other's data.
        for (size_t j = 0; j < i; ++j) {
            if (members[i].path.empty() || members[j].path.empty()) {
                continue;
            }
            bool same = false;
            if (facts[i].exists && facts[j].exists) {
                same = facts[i].status.st_dev == facts[j].status.st_dev &&
                       facts[i].status.st_ino == facts[j].status.st_ino;
                // Two device nodes of one block device.
                if (S_ISBLK(facts[i].status.st_mode) && S_ISBLK(facts[j].status.st_mode) &&
                    facts[i].status.st_rdev == facts[j].status.st_rdev)
                    same = true;
            } else {
                same = reader.probe().resolved(members[i].path) ==
                       reader.probe().resolved(members[j].path);
            }
            if (same) {
                bool device = facts[i].exists && S_ISBLK(facts[i].status.st_mode);
                reader.fail(key_path(member_path, "path"),
                            in_quotes(members[i].path) + " is the same " +
                                (device ? "block device" : "file") + " as " + index_path(path, j) +
                                ".path",
                            "one member per file or block device");
            }
        }
    }
    return members;
}

void read_bio(const Reader& reader, const toml::table& table, BioConfig& bio) {
    const std::string path = "bio";
    reader.check_keys(table, path, {"policy", "align", "contiguity"});
    bio.policy = reader.enumeration(table, "policy", path, "a bio policy", kBioPolicies)
                     .value_or(bio.policy);
    if (auto align = reader.page_power_of_two(table, "align", path, "\"128k\", \"256k\"")) {
        // Only the align policy (Ming Lei's patch) cuts bios at it.
        if (bio.policy != BioPolicy::Align)
            reader.fail(key_path(path, "align"), "is read by policy = \"align\" only",
                        "policy = \"align\" with it, or no bio.align");
        bio.align_bytes = *align;
    }

    const std::string contiguity_key = key_path(path, "contiguity");
    const std::string contiguity_allowed =
        R"("none" | "pagemap" | { runs = [[pages, weight], ...], seed = N } | { pattern = [pages, ...] })";
    const toml::node* contiguity = table.get("contiguity");
    if (contiguity == nullptr) {
        return;
    }
    if (contiguity->is_string()) {
        // Only the two names; a distribution is spelled as a table.
        const std::string& text = contiguity->as_string()->get();
        if (text != kContiguityNames[0].name && text != kContiguityNames[1].name)
            reader.fail(contiguity_key, in_quotes(text) + " is not a contiguity",
                        contiguity_allowed);
        bio.contiguity = text == kContiguityNames[0].name ? kContiguityNames[0].value
                                                          : kContiguityNames[1].value;
        bio.run_pages.clear();
        return;
    }
    if (!contiguity->is_table()) {
        reader.fail(contiguity_key, "expected a string or a table, got " + describe(*contiguity),
                    contiguity_allowed);
    }
    const toml::table& distribution = *contiguity->as_table();
    reader.check_keys(distribution, contiguity_key, {"runs", "pattern", "seed"});
    if (const toml::node* pattern = distribution.get("pattern")) {
        // Run lengths repeated in order from the buffer's first page.
        const std::string pattern_key = key_path(contiguity_key, "pattern");
        const std::string pattern_allowed =
            "a non-empty array of run lengths in pages (1..1048576) or [pages, times] pairs "
            "(times 1..1048576)";
        if (distribution.get("runs"))
            reader.fail(
                contiguity_key, "has both runs and pattern",
                "{ runs = [[pages, weight], ...] } or { pattern = [pages, ...] }, not both");
        if (distribution.get("seed"))
            reader.fail(key_path(contiguity_key, "seed"), "is for runs, not a pattern",
                        "seed only beside runs = [[pages, weight], ...]");
        if (!pattern->is_array() || pattern->as_array()->empty())
            reader.fail(pattern_key, "expected a non-empty array, got " + describe(*pattern),
                        pattern_allowed);
        const toml::array& items = *pattern->as_array();
        auto count = [](const toml::node& n) -> int64_t {
            return n.is_integer() && n.as_integer()->get() >= 1 &&
                           n.as_integer()->get() <= (1 << 20)
                       ? n.as_integer()->get()
                       : 0;
        };
        for (size_t i = 0; i < items.size(); ++i) {
            // A run length, or [run length, times]: that run repeated.
            const toml::array* pair = items[i].as_array();
            int64_t pages = pair ? (pair->size() == 2 ? count((*pair)[0]) : 0) : count(items[i]);
            int64_t times = pair ? (pair->size() == 2 ? count((*pair)[1]) : 0) : 1;
            if (!pages || !times || bio.run_pattern.size() + size_t(times) > (1u << 20))
                reader.fail(index_path(pattern_key, i),
                            pair ? "is not a [pages, times] pair in range"
                                 : describe(items[i]) + " is not a page count",
                            pattern_allowed);
            bio.run_pattern.insert(bio.run_pattern.end(), size_t(times), uint32_t(pages));
        }
        bio.contiguity = Contiguity::Pattern;
        return;
    }
    const std::string runs_key = key_path(contiguity_key, "runs");
    const std::string runs_allowed =
        "a non-empty array of [pages, weight] pairs, pages an integer >= 1, weight > 0";
    const toml::node* runs = distribution.get("runs");
    if (runs == nullptr) {
        reader.fail(runs_key, "missing", runs_allowed);
    }
    if (!runs->is_array() || runs->as_array()->empty()) {
        reader.fail(runs_key, "expected a non-empty array, got " + describe(*runs), runs_allowed);
    }
    std::vector<std::pair<uint32_t, double>> run_pages;
    double total_weight = 0;
    const toml::array& runs_array = *runs->as_array();
    for (size_t i = 0; i < runs_array.size(); ++i) {
        std::string entry_key = index_path(runs_key, i);
        const toml::array* pair = runs_array[i].as_array();
        if (pair == nullptr || pair->size() != 2) {
            reader.fail(entry_key, "expected [pages, weight], got " + describe(runs_array[i]),
                        runs_allowed);
        }
        const toml::node& pages = (*pair)[0];
        const toml::node& weight = (*pair)[1];
        if (!pages.is_integer() || pages.as_integer()->get() < 1 ||
            pages.as_integer()->get() > (1 << 20)) {
            reader.fail(index_path(entry_key, 0),
                        "run length " + describe(pages) + " is not a page count",
                        "an integer from 1 to 1048576 (pages of 4k)");
        }
        double weight_value = 0;
        if (weight.is_integer()) {
            weight_value = double(weight.as_integer()->get());
        } else if (weight.is_floating_point()) {
            weight_value = weight.as_floating_point()->get();
        } else {
            reader.fail(index_path(entry_key, 1), "expected a number, got " + describe(weight),
                        "a weight > 0");
        }
        if (!(weight_value > 0) || !std::isfinite(weight_value)) {
            reader.fail(index_path(entry_key, 1), describe(weight) + " is not a weight",
                        "a weight > 0");
        }
        run_pages.emplace_back(uint32_t(pages.as_integer()->get()), weight_value);
        total_weight += weight_value;
    }
    for (auto& [pages, weight] : run_pages) {
        (void)pages;
        weight /= total_weight;  // the weights come back as probabilities
    }
    bio.contiguity = Contiguity::Distribution;
    bio.run_pages = std::move(run_pages);
    // The layout's generator seed: the same runs on every machine.
    bio.run_seed =
        reader.integer(distribution, "seed", contiguity_key, 0, uint64_t(1) << 62).value_or(1);
}

void read_bfq(const Reader& reader, const toml::table& table, BfqConfig& bfq) {
    const std::string path = "bfq";
    reader.check_keys(table, path,
                      {"group_counting", "slice_idle", "low_latency", "strict_guarantees",
                       "max_budget", "timeout_sync"});
    bfq.group_counting =
        reader.enumeration(table, "group_counting", path, "a group counting", kGroupCountings)
            .value_or(bfq.group_counting);
    bfq.slice_idle_ns = reader.duration(table, "slice_idle", path).value_or(bfq.slice_idle_ns);
    bfq.low_latency = reader.boolean(table, "low_latency", path).value_or(bfq.low_latency);
    // Weight raising is left out (bfq_scheduler.h): true would be accepted
    // and silently behave as false.
    if (bfq.low_latency)
        reader.fail(key_path(path, "low_latency"),
                    "true is not modelled (bfq's weight raising is left out)", "false");
    bfq.strict_guarantees =
        reader.boolean(table, "strict_guarantees", path).value_or(bfq.strict_guarantees);
    bfq.max_budget_sectors = uint32_t(
        reader.integer(table, "max_budget", path, 0, 1u << 24).value_or(bfq.max_budget_sectors));
    if (auto timeout = reader.duration(table, "timeout_sync", path)) {
        if (*timeout == 0) {
            reader.fail(key_path(path, "timeout_sync"), "a budget timeout cannot be 0",
                        "a duration > 0, like \"125ms\"");
        }
        bfq.timeout_sync_ns = *timeout;
    }
}

void read_page_cache(const Reader& reader, const toml::table& table, PageCacheConfig& cache) {
    const std::string path = "page_cache";
    reader.check_keys(table, path, {"size", "ra_kb", "folio_kb", "rasync", "variant"});
    if (auto size = reader.size(table, "size", path)) {
        if (*size == 0 || *size % kPageSize != 0) {
            reader.fail(key_path(path, "size"),
                        std::to_string(*size) + " bytes is not a whole number of pages",
                        "a multiple of 4k > 0, like \"1g\"");
        }
        cache.size_bytes = *size;
    }
    if (auto ra_kb = reader.integer(table, "ra_kb", path, 0, 1u << 20)) {
        if (*ra_kb % (kPageSize / 1024) != 0) {
            reader.fail(key_path(path, "ra_kb"),
                        std::to_string(*ra_kb) + " KiB is not a whole number of pages",
                        "a multiple of 4 (0 turns readahead off)");
        }
        cache.ra_kb = uint32_t(*ra_kb);
    }
    if (auto folio_kb = reader.integer(table, "folio_kb", path, 4, 256)) {
        if ((*folio_kb & (*folio_kb - 1)) != 0) {
            reader.fail(key_path(path, "folio_kb"),
                        std::to_string(*folio_kb) + " is not a power of two",
                        "a power of two from 4 to 256");
        }
        cache.folio_kb = uint32_t(*folio_kb);
    }
    cache.rasync = reader.boolean(table, "rasync", path).value_or(cache.rasync);
    cache.variant =
        reader.enumeration(table, "variant", path, "a buffered-read variant", kBufferedVariants)
            .value_or(cache.variant);
}

// [cpu.buffered]: BufferedCosts, each step a duration, and cpus.
void read_buffered_costs(const Reader& reader, const toml::table& table, BufferedCosts& costs) {
    const std::string path = "cpu.buffered";
    std::vector<std::string_view> keys = {"cpus"};
    for (const BufferedCostKey& k : kBufferedCostKeys) keys.push_back(k.key);
    reader.check_keys(table, path, keys);
    for (const BufferedCostKey& k : kBufferedCostKeys) {
        auto ns = reader.duration(table, k.key, path);
        if (!ns) continue;
        if (*ns > kMaxBufferedCostNs) {
            reader.fail(key_path(path, k.key),
                        in_quotes(table[k.key].value_or(std::string())) + " is out of range",
                        "a duration from 0 to \"1ms\", like \"1900ns\"");
        }
        costs.*(k.field) = *ns;
    }
    costs.cpus =
        uint32_t(reader.integer(table, "cpus", path, 1, kMaxBufferedCpus).value_or(costs.cpus));
}

void read_cpu(const Reader& reader, const toml::table& table, CpuConfig& cpu) {
    const std::string path = "cpu";
    reader.check_keys(table, path, {"submit_bio", "dispatch", "buffered"});
    if (const toml::table* buffered = reader.table(table, "buffered", path))
        read_buffered_costs(reader, *buffered, cpu.buffered);
    auto read_cost = [&](const char* key, uint64_t& out) {
        if (auto ns = reader.duration(table, key, path)) {
            if (*ns > kMaxSubmitBioNs) {
                reader.fail(key_path(path, key),
                            in_quotes(table[key].value_or(std::string())) + " is out of range",
                            "a duration from 0 to \"100us\", like \"2us\"");
            }
            out = *ns;
        }
    };
    read_cost("submit_bio", cpu.submit_bio_ns);
    read_cost("dispatch", cpu.dispatch_ns);
}

// Cross-checks between sections.
void check_stack(const Reader& reader, const StackConfig& config,
                 const std::vector<uint64_t>& known_sizes) {
    size_t member_count = config.members.size();
    if (config.device.kind == DeviceKind::Passthrough && member_count != 1) {
        reader.fail(
            "members",
            "kind = \"passthrough\" takes exactly 1 member, got " + std::to_string(member_count),
            "1 member for \"passthrough\", 3 or more for \"raid5\"");
    }
    if (config.device.kind == DeviceKind::Raid5 && member_count < 3) {
        reader.fail(
            "members",
            "kind = \"raid5\" needs at least 3 members, got " + std::to_string(member_count),
            "3 or more members for \"raid5\"");
    }
    size_t failed_count = 0;
    for (size_t i = 0; i < member_count; ++i) {
        const MemberConfig& member = config.members[i];
        std::string member_path = index_path("members", i);
        if (!member.failed) {
            continue;
        }
        if (config.device.kind != DeviceKind::Raid5) {
            reader.fail(key_path(member_path, "failed"), "only a raid5 member can be failed",
                        "false, or kind = \"raid5\" with one failed member");
        }
        if (++failed_count > 1) {
            reader.fail(key_path(member_path, "failed"),
                        "a second failed member: RAID5 survives one failure",
                        "at most one member with failed = true");
        }
    }
    // The virtual device's requests are split at device.max_sectors: each
    // piece must stay a whole number of every member's logical blocks.
    for (size_t i = 0; i < member_count; ++i) {
        uint32_t lbs = config.members[i].logical_block_size;
        if (config.device.max_sectors_bytes % lbs != 0) {
            reader.fail("device.max_sectors",
                        std::to_string(config.device.max_sectors_bytes) +
                            " bytes is not a multiple of " + index_path("members", i) +
                            ".logical_block_size (" + std::to_string(lbs) + ")",
                        "a multiple of every member's logical_block_size");
        }
    }
    if (config.device.kind == DeviceKind::Raid5) {
        for (size_t i = 0; i < member_count; ++i) {
            const MemberConfig& member = config.members[i];
            if (member.size != 0 && member.size < config.device.chunk_bytes) {
                reader.fail(key_path(index_path("members", i), "size"),
                            std::to_string(member.size) + " bytes is smaller than one chunk (" +
                                std::to_string(config.device.chunk_bytes) + " bytes)",
                            "at least device.chunk");
            }
            if (member.size == 0 && i < known_sizes.size() && known_sizes[i] != 0 &&
                known_sizes[i] < config.device.chunk_bytes) {
                reader.fail(key_path(index_path("members", i), "path"),
                            in_quotes(member.path) + " holds " + std::to_string(known_sizes[i]) +
                                " bytes, less than one chunk (" +
                                std::to_string(config.device.chunk_bytes) + " bytes)",
                            "members of at least device.chunk");
            }
        }
    }
}

// toml++ follows a dotted key (a.b.c = 1, [a.b.c]) by recursion, one level
// a part, and overflows the stack on tens of thousands of parts before its
// own nesting limit applies (that limit covers inline arrays and tables).
// Refused here, before parsing: a key of more than kMaxKeyParts dotted parts
// (ours have at most four), counted outside strings.
void check_dotted_key_depth(std::string_view text, const std::string& label) {
    constexpr size_t kMaxKeyParts = 64;
    size_t line = 1, dots = 0;
    char quote = 0;          // inside a "..." or '...' string
    bool multiline = false;  // inside a """...""" or '''...''' string
    for (size_t i = 0; i < text.size(); i++) {
        char c = text[i];
        if (c == '\n') line++;
        if (quote) {
            if (c == '\\' && quote == '"') {
                i++;
            } else if (c == quote && (!multiline || text.substr(i, 3) == std::string(3, quote))) {
                if (multiline) i += 2;
                quote = 0;
                multiline = false;
            } else if (c == '\n' && !multiline) {
                quote = 0;  // an unterminated string: the parser says so
            }
            continue;
        }
        if (c == '"' || c == '\'') {
            quote = c;
            multiline = text.substr(i, 3) == std::string(3, c);
            if (multiline) i += 2;
        } else if (c == '.') {
            if (++dots >= kMaxKeyParts)
                throw ConfigError(label + ":" + std::to_string(line) +
                                  ": a dotted key of more than " + std::to_string(kMaxKeyParts) +
                                  " parts; allowed: the keys of docs/stack-toml.md, at "
                                  "most four parts");
        } else if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                     c == ' ' || c == '\t')) {
            dots = 0;
        }
    }
}

toml::table parse_toml(std::string_view text, const std::string& label) {
    check_dotted_key_depth(text, label);
#if TOML_EXCEPTIONS
    try {
        return toml::parse(text, label);
    } catch (const toml::parse_error& error) {
        const toml::source_position& begin = error.source().begin;
        throw ConfigError(label + ":" + std::to_string(begin.line) + ":" +
                          std::to_string(begin.column) + ": " + one_line(error.description()));
    }
#else
    toml::parse_result result = toml::parse(text, label);
    if (!result) {
        const toml::parse_error& error = result.error();
        const toml::source_position& begin = error.source().begin;
        throw ConfigError(label + ":" + std::to_string(begin.line) + ":" +
                          std::to_string(begin.column) + ": " + one_line(error.description()));
    }
    return std::move(result).table();
#endif
}

std::map<std::string, TimingModelConfig> load_presets() {
    const std::string label(kEmbeddedModelsLabel);
    toml::table root = parse_toml(kEmbeddedModelsToml, label);
    Reader reader(label);
    reader.check_keys(root, "", {"models"});
    const toml::table* models = reader.table(root, "models", "");
    if (models == nullptr) {
        return {};
    }
    return read_models(reader, *models, "models");
}

}  // namespace

const std::map<std::string, TimingModelConfig>& preset_models() {
    static const std::map<std::string, TimingModelConfig> presets = load_presets();
    return presets;
}

std::vector<std::string> preset_model_names() {
    std::vector<std::string> names;
    for (const auto& [name, model] : preset_models()) {
        names.push_back(name);
    }
    return names;  // std::map keeps them sorted
}

TimingModelConfig find_model(const StackConfig& config, const std::string& name) {
    if (auto own = config.models.find(name); own != config.models.end()) {
        return own->second;
    }
    if (auto preset = preset_models().find(name); preset != preset_models().end()) {
        return preset->second;
    }
    std::vector<std::string> known;
    for (const auto& [known_name, model] : config.models) {
        known.push_back(in_quotes(known_name));
    }
    for (const std::string& preset_name : preset_model_names()) {
        if (config.models.count(preset_name) == 0) {
            known.push_back(in_quotes(preset_name));
        }
    }
    throw make_config_error(config.source, "model", in_quotes(name) + " is not a known model",
                            join(known, " | "));
}

StackConfig read_stack_text(std::string_view toml_text, const std::string& base_dir,
                            const std::string& label, const StorageProbe& probe) {
    std::string absolute_base;
    if (base_dir.empty()) {
        absolute_base = fs::current_path().string();
    } else {
        absolute_base = fs::absolute(base_dir).lexically_normal().string();
    }

    if (toml_text.size() > kMaxStackFileBytes)
        throw make_config_error(
            label, {},
            "is " + std::to_string(toml_text.size()) + " bytes, more than a stack file may hold",
            "a TOML file of at most 1 MiB");
    toml::table root = parse_toml(toml_text, label);
    Reader reader(label, &probe);
    reader.check_keys(root, "", {"device", "members", "bio", "bfq", "page_cache", "cpu", "models"});

    StackConfig config;
    config.source = label;
    if (const toml::table* models = reader.table(root, "models", "")) {
        config.models = read_models(reader, *models, "models");
    }
    if (const toml::table* device = reader.table(root, "device", "")) {
        read_device(reader, *device, config.device);
    }
    std::vector<uint64_t> known_sizes;
    config.members = read_members(reader, root, absolute_base, config.models, known_sizes);
    if (const toml::table* bio = reader.table(root, "bio", "")) {
        read_bio(reader, *bio, config.bio);
    }
    if (const toml::table* bfq = reader.table(root, "bfq", "")) {
        read_bfq(reader, *bfq, config.bfq);
        // Tunables of a scheduler the members do not run would be unused.
        if (config.device.scheduler != SchedulerKind::Bfq)
            reader.fail("bfq", "is read by device.scheduler = \"bfq\" only",
                        "device.scheduler = \"bfq\" with it, or no [bfq] table");
    }
    if (const toml::table* page_cache = reader.table(root, "page_cache", "")) {
        read_page_cache(reader, *page_cache, config.page_cache);
    }
    if (const toml::table* cpu = reader.table(root, "cpu", "")) {
        read_cpu(reader, *cpu, config.cpu);
    }
    check_stack(reader, config, known_sizes);
    return config;
}

StackConfig read_stack_file(const std::string& path, const StorageProbe& probe) {
    std::error_code error;
    if (path.find('\0') != std::string::npos)  // open(2) would take the part before it
        throw make_config_error(path.substr(0, path.find('\0')), {},
                                "the path holds a NUL character", "a stack file's path");
    if (fs::is_directory(path, error)) {
        throw make_config_error(path, {}, "is a directory", "a TOML file");
    }
    // A device or FIFO would be read without end (/dev/zero) or block (a
    // FIFO without a writer), and every job of the run reads its stack file
    // again (input_at), which a pipe could not give twice.
    if (struct stat st; stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw make_config_error(path, {},
                                S_ISFIFO(st.st_mode)  ? "is a FIFO"
                                : S_ISCHR(st.st_mode) ? "is a character device"
                                : S_ISBLK(st.st_mode) ? "is a block device"
                                                      : "is not a regular file",
                                "a regular TOML file");
    // Refused before reading: a huge file would take minutes to parse.
    if (uintmax_t bytes = fs::file_size(path, error); !error && bytes > kMaxStackFileBytes)
        throw make_config_error(
            path, {}, "is " + std::to_string(bytes) + " bytes, more than a stack file may hold",
            "a TOML file of at most 1 MiB");
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        throw make_config_error(path, {},
                                std::string("cannot read the file: ") + std::strerror(errno),
                                "a readable TOML file");
    }
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) {
        throw make_config_error(path, {}, "cannot read the file", "a readable TOML file");
    }
    std::string base_dir = fs::absolute(fs::path(path)).parent_path().string();
    StackConfig config = read_stack_text(text.str(), base_dir, path, probe);
    // A member on the stack file itself: the first write would destroy it.
    struct stat self;
    if (stat(path.c_str(), &self) == 0) {
        for (size_t i = 0; i < config.members.size(); ++i) {
            struct stat st;
            const std::string& member = config.members[i].path;
            if (!member.empty() && probe.stat(member, st) == 0 && st.st_dev == self.st_dev &&
                st.st_ino == self.st_ino)
                throw make_config_error(path, "members[" + std::to_string(i) + "].path",
                                        in_quotes(member) + " is this stack file",
                                        "a member file other than the stack file");
        }
    }
    return config;
}

}  // namespace mdsplit
