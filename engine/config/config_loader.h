// Loads and validates a device-stack TOML file (ARCHITECTURE.md, "Public
// interface") into a StackConfig.
//
// Every key is checked: unknown keys, wrong types and impossible values throw
// ConfigError with a one-line message
//     <file>: <key path>: <what is wrong>; allowed: <allowed values>
// e.g. `stack.toml: members[1].size: "12q" is not a size; allowed: ...`.
// TOML syntax errors become `<file>:<line>:<column>: <description>`.
//
// The loader reads text: what a member's path is (a file, a block device
// and its logical block size, a directory a file may be made in) it asks a
// StorageProbe (storage_probe.h).
//
// Member paths come back absolute (relative ones resolve against the stack
// file's directory); each member's `model` is resolved to its numbers, from
// the file's own [models.NAME] tables first, then from the presets of
// jobs/models.toml (embedded at build time).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_error.h"
#include "config/stack_config.h"
#include "config/storage_probe.h"

namespace mdsplit {

// Reads `path`; messages name the file as `path` was written. `probe`
// answers what the members' paths are (storage_probe.h);
// stack/storage_probe.h's load_stack_file() passes the machine's.
StackConfig read_stack_file(const std::string& path, const StorageProbe& probe);

// Parses TOML text. Relative member paths resolve against `base_dir` (the
// current directory when empty); `label` names the text in messages and is
// stored in StackConfig::source.
StackConfig read_stack_text(std::string_view toml_text, const std::string& base_dir,
                            const std::string& label, const StorageProbe& probe);

// The presets of jobs/models.toml, by name.
const std::map<std::string, TimingModelConfig>& preset_models();
std::vector<std::string> preset_model_names();  // sorted

// A model by name: the stack file's own [models.NAME] first, then a preset.
// Throws ConfigError listing the known names when there is neither.
TimingModelConfig find_model(const StackConfig& config, const std::string& name);

}  // namespace mdsplit
