#include "backends/io_uring_backend.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace mdsplit {

namespace {
std::runtime_error open_error(const std::string& path, const char* what) {
    return std::runtime_error("mdsplit: member " + path + ": " + what + ": " + strerror(errno));
}
}  // namespace

IoUringBackend::IoUringBackend(IoUringRing& ring, const std::string& path, uint64_t size,
                               bool direct, bool writable)
    : ring_(ring) {
    int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | (direct ? O_DIRECT : 0);
    struct stat st;
    bool exists = stat(path.c_str(), &st) == 0;
    if (!exists) {
        if (!size)
            throw std::runtime_error("mdsplit: member " + path + " does not exist and has no size");
        std::error_code ec;  // a member in a directory that does not exist yet: create it
        std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
        fd_ = open(path.c_str(), flags | O_CREAT | O_RDWR, 0644);
        if (fd_ < 0) throw open_error(path, "cannot create");
        if (ftruncate(fd_, off_t(size)) < 0) {
            close(fd_);
            throw open_error(path, "cannot size");
        }
        size_ = size;
        return;
    }
    fd_ = open(path.c_str(), flags);
    if (fd_ < 0) throw open_error(path, "cannot open");
    if (S_ISBLK(st.st_mode)) {
        uint64_t bytes = 0;
        if (ioctl(fd_, BLKGETSIZE64, &bytes) < 0) {
            close(fd_);
            throw open_error(path, "BLKGETSIZE64");
        }
        if (size && size > bytes) {
            close(fd_);
            throw std::runtime_error("mdsplit: member " + path + ": size " + std::to_string(size) +
                                     " is larger than the device (" + std::to_string(bytes) + ")");
        }
        size_ = size ? size : bytes;
    } else {
        uint64_t have = uint64_t(st.st_size);
        if (size > have && writable && ftruncate(fd_, off_t(size)) < 0) {
            close(fd_);
            throw open_error(path, "cannot extend");
        }
        size_ = size ? size : have;
    }
}

IoUringBackend::~IoUringBackend() {
    if (fd_ >= 0) close(fd_);
}

void IoUringBackend::submit(Request* rq) {
    io_uring_sqe* sqe = ring_.get_sqe();
    uint64_t offset = rq->sector << kSectorShift;
    bool write = rq->op == Op::Write;
    if (rq->iov.size() == 1) {
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

void IoUringBackend::on_cqe(Request* rq, int res) { complete(rq, res); }

}  // namespace mdsplit
