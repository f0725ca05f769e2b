// /proc/self/mountinfo, read once into entries (proc(5)): the loader asks
// which file system holds a directory (no member is created on devtmpfs), the
// device-safety check asks whether a device is mounted. One reader serves both.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mdsplit {

struct MountEntry {
    std::string dev;    // field 3, "major:minor" of the mounted file system
    std::string root;   // field 4, unescaped
    std::string point;  // field 5, the mount point, unescaped
    std::string type;   // the file-system type, after the "-" separator
};

/**
 * unescape_octal() - @s with mountinfo's (and /proc/swaps') \\NNN escapes
 * (\\040 for a blank, \\011 a tab, \\012 a newline, \\134 a backslash) undone.
 */
inline std::string unescape_octal(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        auto octal = [&](size_t k) { return s[k] >= '0' && s[k] <= '7'; };
        if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

/** read_mountinfo() - every well-formed line of @path; none when it cannot be read. */
inline std::vector<MountEntry> read_mountinfo(const std::string& path = "/proc/self/mountinfo") {
    std::vector<MountEntry> entries;
    std::ifstream mounts(path);
    std::string line;
    while (std::getline(mounts, line)) {
        std::istringstream in(line);
        std::string id, parent, options, field;
        MountEntry e;
        if (!(in >> id >> parent >> e.dev >> e.root >> e.point >> options)) continue;
        while (in >> field && field != "-") {
        }
        in >> e.type;
        e.root = unescape_octal(e.root);
        e.point = unescape_octal(e.point);
        entries.push_back(std::move(e));
    }
    return entries;
}

/**
 * fs_type_of() - the type of the file system that holds the absolute,
 * canonical @dir: the mount with the longest mount point at or above it (the
 * last such line, as the kernel stacks later mounts on top). Empty when none.
 */
inline std::string fs_type_of(const std::string& dir, const std::vector<MountEntry>& mounts) {
    std::string best_point, best_type;
    for (const MountEntry& m : mounts) {
        const std::string& p = m.point;
        bool above = dir == p || p == "/" ||
                     (dir.rfind(p, 0) == 0 && dir.size() > p.size() && dir[p.size()] == '/');
        if (above && p.size() >= best_point.size()) {
            best_point = p;
            best_type = m.type;
        }
    }
    return best_type;
}

}  // namespace mdsplit
