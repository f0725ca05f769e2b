// Sidecar files (sidecar_file.h): checked before a job runs, written once
// the last job of a device has ended.
#include "stack/sidecar_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/resolved_path.h"

namespace mdsplit {

std::vector<std::filesystem::path> link_chain(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    if (ec) p = path;
    std::vector<fs::path> chain{p};
    for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); hops++) {
        fs::path link = fs::read_symlink(p, ec);
        if (ec) break;
        p = link.is_absolute() ? link : p.parent_path() / link;
        chain.push_back(p);
    }
    return chain;
}

namespace {

// A path that names an open descriptor of the process: /dev/stderr,
// /dev/fd/N, /proc/self/fd/N (through any link).
bool names_descriptor(const std::string& path) {
    for (const auto& hop : link_chain(path)) {
        std::string s = hop.string();
        for (const char* prefix : {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"})
            if (s.rfind(prefix, 0) == 0) return true;
        if (s.rfind("/proc/", 0) != 0) continue;
        size_t digits = s.find_first_not_of("0123456789", 6);  // /proc/PID/fd/
        if (digits != std::string::npos && digits > 6 && s.compare(digits, 4, "/fd/") == 0)
            return true;
    }
    return false;
}

std::string identity_of(const struct stat& st) {
    if (S_ISBLK(st.st_mode)) return "dev:" + std::to_string(st.st_rdev);
    return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// All of `text` to `fd`, through short writes and EINTR.
bool write_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += size_t(n);
    }
    return true;
}

std::string refused(const std::string& shown, const std::string& why, const std::string& allowed) {
    return "mdsplit: mdsplit_stats=" + shown + why + "; allowed: " + allowed;
}

// The file at `target` can be created: its directory is made and a probe
// file created beside it, then removed. False with errno when not.
bool can_create(const std::filesystem::path& target) {
    std::error_code ec;
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
    std::string probe;
    int fd = create_temporary_beside(target.string(), probe);
    if (fd < 0) return false;
    close(fd);
    std::filesystem::remove(probe, ec);
    return true;
}

}  // namespace

bool sidecar_is_stream(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return true;
    return names_descriptor(path);
}

std::string file_identity(const std::string& path) {
    struct stat st;
    if (path.empty()) return "path:";
    if (stat(path.c_str(), &st) != 0) return "path:" + resolved_path(path);
    return identity_of(st);
}

std::string descriptor_identity(int fd) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || S_ISCHR(st.st_mode)) return "";
    return identity_of(st);
}

// Forked jobs of one run each own a copy of the stack and may write the
// same sidecar at the same moment (a shared "path.tmp" was renamed away
// under one of them).
std::string private_temporary(const std::string& path) {
    static std::atomic<unsigned> serial{0};
    return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
}

int create_temporary_beside(const std::string& target, std::string& tmp) {
    for (int attempt = 0; attempt < 100; attempt++) {
        tmp = private_temporary(target);
        int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

bool write_stream(const std::string& path, const std::string& text) {
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    bool ok = write_all(fd, text);
    int saved = errno;
    close(fd);
    errno = saved;
    return ok;
}

bool replace_file(const std::string& path, const std::string& text) {
    std::filesystem::path target = link_chain(path).back();
    std::error_code ec;
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
    std::string tmp;
    int fd = create_temporary_beside(target.string(), tmp);
    if (fd < 0) return false;
    bool ok = write_all(fd, text);
    ok = close(fd) == 0 && ok;
    if (ok) std::filesystem::rename(tmp, target, ec);
    if (!ok || ec) {
        int saved = ec ? ec.value() : errno;
        std::filesystem::remove(tmp, ec);
        errno = saved;
        return false;
    }
    return true;
}

// A sidecar must be writable before the job runs, not found unwritable
// after it. A block device, a directory or a socket is refused: the sidecar
// would overwrite the device, or could not be written at all. fio's own
// report (stdout or --output) in a file or a pipe: the sidecar would replace
// it or break its JSON (a terminal may show both).
std::string sidecar_target_refusal(const std::string& shown, const std::string& path,
                                   const std::string& report) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
        const char* kind = S_ISBLK(st.st_mode)    ? "a block device"
                           : S_ISDIR(st.st_mode)  ? "a directory"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : nullptr;
        if (kind)
            return refused(shown, std::string(" is ") + kind,
                           "a regular file (replaced whole), or a character device or FIFO such "
                           "as /dev/null or /dev/stderr");
    }
    if (!report.empty() && file_identity(path) == report)
        return refused(shown,
                       " is where fio writes its own report (stdout or --output): the "
                       "sidecar would mix into it",
                       "another file or stream, such as /dev/stderr");
    if (sidecar_is_stream(path)) {
        if (access(path.c_str(), W_OK) == 0) return "";
        return refused(shown, std::string(": cannot write it (") + strerror(errno) + ")",
                       "a writable file or stream");
    }
    if (can_create(link_chain(path).back())) return "";
    return refused(shown, std::string(": cannot create it (") + strerror(errno) + ")",
                   "a path in a writable directory");
}

std::string write_sidecar(const std::string& shown, const std::string& path,
                          const std::string& text) {
    if (sidecar_is_stream(path) ? write_stream(path, text) : replace_file(path, text)) return "";
    return refused(shown, std::string(": cannot write it (") + strerror(errno) + ")",
                   "a path in a writable directory, or a writable stream");
}

}  // namespace mdsplit
