#include "core/md/raid5_resync.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mdsplit {
namespace {

// The members opened for the resync, closed (after fsync) at the end.
class MemberFiles {
public:
    MemberFiles(const std::vector<std::string>& paths, int flags) : paths_(paths) {
        for (const std::string& p : paths) {
            int fd = ::open(p.c_str(), flags | O_CLOEXEC);
            if (fd < 0) fail(fds_.size(), "open");
            fds_.push_back(fd);
        }
    }
    ~MemberFiles() {
        for (int fd : fds_) ::close(fd);
    }
    MemberFiles(const MemberFiles&) = delete;
    MemberFiles& operator=(const MemberFiles&) = delete;

    size_t size() const { return fds_.size(); }

    void read(size_t i, uint64_t offset, uint8_t* buf, uint64_t len) {
        uint64_t done = 0;
        while (done < len) {
            ssize_t n = ::pread(fds_[i], buf + done, len - done, off_t(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail(i, "read");
            if (n == 0) {  // past the end of a short file: zeros, as a hole
                std::memset(buf + done, 0, len - done);
                return;
            }
            done += uint64_t(n);
        }
    }
    void write(size_t i, uint64_t offset, const uint8_t* buf, uint64_t len) {
        uint64_t done = 0;
        while (done < len) {
            ssize_t n = ::pwrite(fds_[i], buf + done, len - done, off_t(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) fail(i, "write");
            done += uint64_t(n);
        }
    }
    // The first offset >= `from` where any member has data, or `end`.
    uint64_t next_data(uint64_t from, uint64_t end) const {
        uint64_t next = end;
        for (int fd : fds_) {
            off_t at = ::lseek(fd, off_t(from), SEEK_DATA);
            if (at < 0) continue;  // ENXIO: no data at or after `from`
            next = std::min(next, uint64_t(at));
        }
        return next;
    }
    void sync() {
        for (size_t i = 0; i < fds_.size(); i++)
            if (::fdatasync(fds_[i]) != 0) fail(i, "fdatasync");
    }

private:
    [[noreturn]] void fail(size_t i, const char* what) const {
        throw std::runtime_error("mdsplit: raid5 assembly: members[" + std::to_string(i) + "] (" +
                                 paths_[i] + "): " + what + ": " + std::strerror(errno));
    }
    const std::vector<std::string>& paths_;
    std::vector<int> fds_;
};

void xor_into(uint8_t* dst, const uint8_t* src, uint64_t len) {
    for (uint64_t k = 0; k < len; k++) dst[k] ^= src[k];
}

// The XOR of row `row`'s chunks on every member but `skip`, into `out`
// (`scratch`: a chunk to read into): the parity of the data when `skip`
// holds the parity, else the chunk `skip` holds (compute_block_1).
void xor_row_except(MemberFiles& files, uint64_t row, uint64_t chunk, size_t skip,
                    std::vector<uint8_t>& out, std::vector<uint8_t>& scratch) {
    std::fill(out.begin(), out.end(), 0);
    for (size_t i = 0; i < files.size(); i++) {
        if (i == skip) continue;
        files.read(i, row * chunk, scratch.data(), chunk);
        xor_into(out.data(), scratch.data(), chunk);
    }
}

// Calls row_fn(row) for each chunk row where some member holds data.
template <typename RowFn>
void for_each_row_with_data(const MemberFiles& files, uint64_t chunk, uint64_t member_bytes,
                            RowFn row_fn) {
    uint64_t offset = 0;
    while (offset < member_bytes) {
        uint64_t next = files.next_data(offset, member_bytes);
        if (next >= member_bytes) return;
        uint64_t row = next / chunk;
        row_fn(row);
        offset = (row + 1) * chunk;
    }
}

}  // namespace

bool raid5_members_hold_data(const std::vector<std::string>& paths, uint64_t member_bytes) {
    MemberFiles files(paths, O_RDONLY);
    return files.next_data(0, member_bytes) < member_bytes;
}

uint64_t raid5_resync(const std::vector<std::string>& paths, const Raid5Geometry& geometry,
                      uint64_t member_bytes) {
    MemberFiles files(paths, O_RDWR);
    const uint64_t chunk = uint64_t(geometry.chunk_sectors()) << kSectorShift;
    std::vector<uint8_t> parity(chunk), have(chunk), data(chunk);
    uint64_t rewritten = 0;
    for_each_row_with_data(files, chunk, member_bytes, [&](uint64_t row) {
        const uint32_t pd = geometry.parity_disk(row);
        xor_row_except(files, row, chunk, pd, parity, data);
        files.read(pd, row * chunk, have.data(), chunk);
        if (have != parity) {
            files.write(pd, row * chunk, parity.data(), chunk);
            rewritten++;
        }
    });
    files.sync();
    return rewritten;
}

uint64_t raid5_recover(const std::vector<std::string>& paths, const Raid5Geometry& geometry,
                       uint64_t member_bytes, uint32_t target) {
    MemberFiles files(paths, O_RDWR);
    const uint64_t chunk = uint64_t(geometry.chunk_sectors()) << kSectorShift;
    std::vector<uint8_t> rebuilt(chunk), data(chunk);
    uint64_t written = 0;
    for_each_row_with_data(files, chunk, member_bytes, [&](uint64_t row) {
        xor_row_except(files, row, chunk, target, rebuilt, data);
        files.write(target, row * chunk, rebuilt.data(), chunk);
        written++;
    });
    files.sync();
    return written;
}

}  // namespace mdsplit
