// The sidecar's file I/O (mdsplit_stats): where it may go, and writing it
// there. A regular file is replaced whole through a private temporary file
// beside it (a reader never sees half a document, forked jobs writing at
// the same moment never share a temporary); a stream (a character device,
// a FIFO, an open descriptor) gets one document appended per job. No fio
// types: the fio glue and harness simulate (through the bindings) both
// check and write sidecars with this code, with the same lines.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mdsplit {

// `path` and each target of the symbolic links of its last component,
// absolute, to the file they end at (at most 40 links, as the kernel).
std::vector<std::filesystem::path> link_chain(const std::string& path);

// A sidecar path that is a stream (a character device, a FIFO, or an open
// descriptor: /dev/stderr, /dev/fd/N, /proc/self/fd/N, through any link):
// each job appends its document; any other sidecar is replaced whole.
bool sidecar_is_stream(const std::string& path);

// What a path names, whichever name it goes by: a block device's number
// ("dev:RDEV"), a file's device and inode ("file:DEV:INO"), or (not there
// yet) its absolute path ("path:...").
std::string file_identity(const std::string& path);

// What the open descriptor `fd` writes to, as file_identity() names files
// ("file:DEV:INO", "dev:RDEV"), or "" for a terminal or another character
// device (which may show a report and a sidecar both) or a closed one.
std::string descriptor_identity(int fd);

// A temporary name beside `path` that no other writer uses (the process
// and a serial number in its name).
std::string private_temporary(const std::string& path);

// A new file beside `target` named private_temporary(), opened for writing
// with O_EXCL and O_NOFOLLOW (a file or link already at that name, in a
// directory others write, is never followed or truncated); its name in
// `tmp`. -1 with errno when none could be made.
int create_temporary_beside(const std::string& target, std::string& tmp);

// `text` appended to the stream at `path`. A FIFO is opened without
// waiting: with no reader the write fails instead of hanging. False with
// errno on failure.
bool write_stream(const std::string& path, const std::string& text);

// `text` as the whole file at `path` (symbolic links followed: a link is
// never replaced; its directory made): written to create_temporary_beside()
// and renamed over it. False with errno on failure.
bool replace_file(const std::string& path, const std::string& text);

// Why the sidecar `path` (shown as `shown`, the job's mdsplit_stats) cannot
// be written, as the engine's one line, "" when it can: a block device, a
// directory or a socket; the file `report` names (fio's report, as
// file_identity() or descriptor_identity() names it; "" none); a stream that is not writable; a
// file whose directory cannot be made or written (a probe file is created beside its target and
// removed).
std::string sidecar_target_refusal(const std::string& shown, const std::string& path,
                                   const std::string& report);

// `text` written to the sidecar `path` (appended to a stream, else the
// whole file replaced), shown as `shown`: "" when written, else the line.
std::string write_sidecar(const std::string& shown, const std::string& path,
                          const std::string& text);

}  // namespace mdsplit
