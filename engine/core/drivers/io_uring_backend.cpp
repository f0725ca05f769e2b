#include "core/drivers/io_uring_backend.h"

#include "config/config_error.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace mdsplit {

namespace {

MemberOpenError open_error(const std::string& key, const std::string& path, const char* what,
                           const std::string& allowed) {
    return MemberOpenError(
        key, "cannot " + std::string(what) + " " + in_quotes(path) + ": " + strerror(errno),
        allowed);
}

const char* kOpenable = "a regular file or block device this process can open";

// The directories create_directories() would make for `file`, outermost first.
std::vector<std::filesystem::path> missing_directories(const std::filesystem::path& file) {
    std::vector<std::filesystem::path> missing;
    std::error_code ec;
    for (auto dir = file.parent_path(); !dir.empty() && !std::filesystem::exists(dir, ec);
         dir = dir.parent_path()) {
        missing.insert(missing.begin(), dir);
        if (dir == dir.parent_path()) break;
    }
    return missing;
}

}  // namespace

IoUringBackend::IoUringBackend(IoUringRing& ring, const std::string& path, uint64_t size,
                               bool direct, bool writable, bool may_create)
    : ring_(ring), writable_(writable) {
    int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | (direct ? O_DIRECT : 0);
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT && !may_create)
            throw MemberOpenError("path",
                                  in_quotes(path) +
                                      " does not exist, and this run creates no files (fio's "
                                      "--readonly or allow_file_create=0)",
                                  "an existing file or block device, or a run that may create it");
        create(path, size, flags);
        return;
    }
    fd_ = open(path.c_str(), flags);
    if (fd_ < 0 && writable && (errno == EROFS || errno == EACCES) && S_ISBLK(st.st_mode))
        throw MemberOpenError("path", in_quotes(path) + " is read-only (" + strerror(errno) + ")",
                              "a writable device, or jobs that only read");
    if (fd_ < 0) throw open_error("path", path, "open", kOpenable);
    if (S_ISBLK(st.st_mode)) {
        block_device_ = true;
        int read_only = 0;
        if (writable && ioctl(fd_, BLKROGET, &read_only) == 0 && read_only) {
            close(fd_);
            throw MemberOpenError("path",
                                  in_quotes(path) + " is a read-only block device (BLKROGET)",
                                  "a writable device, or jobs that only read");
        }
        uint64_t bytes = 0;
        if (ioctl(fd_, BLKGETSIZE64, &bytes) < 0) {
            close(fd_);
            throw open_error("path", path, "size (BLKGETSIZE64)", kOpenable);
        }
        if (size && size > bytes) {
            close(fd_);
            throw MemberOpenError("size",
                                  std::to_string(size) + " bytes is larger than " +
                                      in_quotes(path) + " (" + std::to_string(bytes) + " bytes)",
                                  "at most the device's size, or 0 for all of it");
        }
        size_ = size ? size : bytes;
    } else {
        uint64_t have = uint64_t(st.st_size);
        if (size > have && writable && ftruncate(fd_, off_t(size)) < 0) {
            close(fd_);
            throw open_error("size", path, "extend", "a size the file system can hold");
        }
        if (size > have && writable) grown_from_ = have;
        if (size > have && !writable) file_end_ = have;  // not grown: see on_cqe
        size_ = size ? size : have;
    }
}

// A missing member: created sparse at `size`; on failure, the file and the
// directories made for it are removed again.
void IoUringBackend::create(const std::string& path, uint64_t size, int flags) {
    if (!size)
        throw MemberOpenError("size", in_quotes(path) + " does not exist and has no size",
                              "a size like \"2g\" (the file is created sparse at it)");
    std::vector<std::filesystem::path> made = missing_directories(path);
    auto undo = [&] {
        std::error_code ec;
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
        std::filesystem::remove(path, ec);
        for (auto it = made.rbegin(); it != made.rend(); ++it) std::filesystem::remove(*it, ec);
    };
    path_ = path;
    made_directories_ = made;
    std::error_code ec;
    if (!made.empty()) std::filesystem::create_directories(made.back(), ec);
    fd_ = open(path.c_str(), (flags & ~O_RDONLY & ~O_WRONLY) | O_CREAT | O_EXCL | O_RDWR, 0644);
    if (fd_ < 0 && errno == EEXIST) {
        // Another process of the run (a forked job, a second fio server on
        // a shared directory) created it meanwhile: open it as it is; the
        // loader already checked its size.
        fd_ = open(path.c_str(), flags);
        if (fd_ < 0) throw open_error("path", path, "open", kOpenable);
        size_ = size;
        return;
    }
    if (fd_ < 0) {
        MemberOpenError e = open_error("path", path, "create", kOpenable);
        undo();
        throw e;
    }
    if (ftruncate(fd_, off_t(size)) < 0) {
        MemberOpenError e = open_error("size", path, "size", "a size the file system can hold");
        undo();
        throw e;
    }
    created_ = true;
    size_ = size;
}

void IoUringBackend::undo_open() noexcept {
    std::error_code ec;
    if (created_) {
        std::filesystem::remove(path_, ec);
        for (auto it = made_directories_.rbegin(); it != made_directories_.rend(); ++it)
            std::filesystem::remove(*it, ec);  // only when still empty
    } else if (grown_from_ && fd_ >= 0) {
        // Best effort: the error the caller reports is the stack's own.
        int cut = ftruncate(fd_, off_t(*grown_from_));
        (void)cut;
    }
    created_ = false;
    grown_from_.reset();
}

IoUringBackend::~IoUringBackend() {
    if (fd_ >= 0) close(fd_);
}

// A discard: on a file, a hole punched in it (what a file-backed loop
// device does, lo_fallocate); on a block device, the block layer's
// io_uring discard (BLOCK_URING_CMD_DISCARD, Linux 6.12+), BLKDISCARD
// where the kernel lacks it (see on_cqe).
// blkdev_fsync() -> blkdev_issue_flush() as the real storage under the
// member needs it: the file's allocation and the device's write cache.
int IoUringBackend::sync_data() {
    if (!writable_ || fd_ < 0) return 0;
    return fdatasync(fd_) == 0 ? 0 : -errno;
}

void IoUringBackend::prep_discard(io_uring_sqe* sqe, Request* rq) {
    uint64_t offset = rq->sector << kSectorShift;
    if (!block_device_) {
        io_uring_prep_fallocate(sqe, fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(offset),
                                off_t(rq->bytes()));
        return;
    }
    io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd_, nullptr, 0, 0);
    sqe->cmd_op = kBlockUringCmdDiscard;
    sqe->addr = offset;
    sqe->addr3 = rq->bytes();
}

void IoUringBackend::submit(Request* rq) {
    bool wait = discard_in_flight_ || !held_.empty() || (rq->op == Op::Discard && in_flight_);
    if (wait) {
        held_.push_back(rq);
        return;
    }
    issue(rq);
}

// Issues what the barrier held, in order, as far as it now may go.
void IoUringBackend::release_held() {
    while (!held_.empty() && !discard_in_flight_) {
        Request* rq = held_.front();
        if (rq->op == Op::Discard && in_flight_) return;
        held_.pop_front();
        issue(rq);
    }
}

void IoUringBackend::issue(Request* rq) {
    in_flight_++;
    if (rq->op == Op::Discard) discard_in_flight_ = true;
    io_uring_sqe* sqe = ring_.get_sqe();
    uint64_t offset = rq->sector << kSectorShift;
    bool write = rq->op == Op::Write;
    if (rq->op == Op::Discard) {
        prep_discard(sqe, rq);
    } else if (rq->iov.size() == 1) {
        void* base = rq->iov[0].iov_base;
        auto len = unsigned(rq->iov[0].iov_len);
        int fixed = ring_.fixed_buffer_index(base, len);
        if (fixed >= 0) {
            if (write)
                io_uring_prep_write_fixed(sqe, fd_, base, len, offset, fixed);
            else
                io_uring_prep_read_fixed(sqe, fd_, base, len, offset, fixed);
            ring_.note_fixed_buffer_io();
        } else if (write) {
            io_uring_prep_write(sqe, fd_, base, len, offset);
        } else {
            io_uring_prep_read(sqe, fd_, base, len, offset);
        }
    } else if (write) {
        io_uring_prep_writev(sqe, fd_, rq->iov.data(), unsigned(rq->iov.size()), offset);
    } else {
        io_uring_prep_readv(sqe, fd_, rq->iov.data(), unsigned(rq->iov.size()), offset);
    }
    rq->ring_owner = this;
    io_uring_sqe_set_data(sqe, rq);
    ring_.note_prepared();
}

namespace {

// The bytes of @rq's buffers from @from on set to zero.
void zero_fill_from(Request* rq, uint64_t from) {
    for (const iovec& v : rq->iov) {
        if (from >= v.iov_len) {
            from -= v.iov_len;
            continue;
        }
        memset(static_cast<char*>(v.iov_base) + from, 0, v.iov_len - from);
        from = 0;
    }
}

}  // namespace

void IoUringBackend::on_cqe(Request* rq, int res) {
    // A read short of its length: no block device gives one inside its size.
    uint64_t offset = rq->sector << kSectorShift;
    if (rq->op == Op::Read && res >= 0 && uint64_t(res) < rq->bytes()) {
        zero_fill_from(rq, uint64_t(res));  // never the buffer's old bytes
        // A member longer than its file (size with grow = true, opened by a
        // run that only reads, so not grown): past the file's end it reads as
        // the zeros the sparse extension would hold.
        // Any other: the file ended inside the member (cut short while the
        // run used it). A direct-I/O loop device ends such a read in EIO with
        // the rest zero-filled (loop.c lo_complete_rq: the rest retried, and
        // a retry that reads nothing zero-fills the bios and fails): a file
        // read short ends there, so its retry would read nothing.
        res = offset + uint64_t(res) >= file_end_ ? int(rq->bytes()) : -EIO;
    }
    in_flight_--;
    if (rq->op != Op::Discard) {
        release_held();  // before complete(): what it submits comes after them
        complete(rq, res);
        return;
    }
    if (block_device_ && (res == -EOPNOTSUPP || res == -EINVAL)) {  // no io_uring discard
        uint64_t range[2] = {rq->sector << kSectorShift, rq->bytes()};
        res = ioctl(fd_, BLKDISCARD, range) == 0 ? 0 : -errno;
    }
    discard_in_flight_ = false;
    release_held();
    complete(rq, res < 0 ? res : int64_t(rq->bytes()));  // the range, as a transfer
}

}  // namespace mdsplit
