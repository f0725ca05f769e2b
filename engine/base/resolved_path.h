// The file a path will name once it is created (a member, a sidecar, a trace
// file), as open(2) with O_CREAT reaches it: every symlink followed, the last
// one too when its target does not exist yet (a dangling link is where the
// file gets created). Two paths that resolve alike name one file, existing or
// not; std::filesystem::weakly_canonical() alone stops at a dangling link.
// Trailing slashes name the same file or directory ("tr/" is "tr"), as
// open(2) and mkdir(2) take them.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace mdsplit {

/**
 * resolved_path() - the absolute path open(2) would create or open
 * @path: any path, relative to the working directory
 *
 * Follows at most 40 links (the kernel's MAXSYMLINKS); returns @path as given
 * when it cannot be made absolute.
 */
inline std::string resolved_path(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    if (ec) return path;
    // "tr/" has an empty last component: the directory is its parent_path().
    while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
    for (int hops = 0; hops < 40; hops++) {
        fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
        if (ec) return p.lexically_normal().string();
        fs::path at = dir / p.filename();
        if (!fs::is_symlink(fs::symlink_status(at, ec))) {
            fs::path whole = fs::weakly_canonical(at, ec);
            return (ec ? at : whole).string();
        }
        fs::path target = fs::read_symlink(at, ec);
        if (ec) return at.string();
        p = target.is_absolute() ? target : dir / target;
    }
    return p.lexically_normal().string();
}

}  // namespace mdsplit
