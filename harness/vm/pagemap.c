/* mdsplit-pagemap: the physical layout of fio's buffers in the VM
 * reference's guest (harness/vm/prepare.sh links it statically into the
 * initramfs; translate.py runs it as the guest job's exec_postrun).
 *
 * fio runs exec_postrun through system() from the job's process after the
 * last I/O and before cleanup_io_u() frees the buffers (fio 3.33
 * backend.c thread_main()), so the first "fio.real" ancestor of this
 * process still maps them. For every private writable mapping of that
 * process of at least MIN_BYTES it writes to OUT:
 *   map START END
 *   run VADDR PAGES PFN       one line per run of pages whose page frame
 *                             numbers follow each other (PFN 0: absent)
 * from /proc/PID/pagemap (bits 0-54 the PFN, bit 63 present; root sees
 * the PFNs). The host (translate.buffer_pattern) picks fio's io_u buffers
 * out of it by the addresses fio's --debug=mem prints.
 *
 * Usage: mdsplit-pagemap OUT [MIN_BYTES]
 *        mdsplit-pagemap --join CGROUP_DIR
 * --join (a job's exec_prerun, harness/vm/groups.py): moves the same fio
 * job process into the cgroup v2 group CGROUP_DIR (its cgroup.procs), so
 * that its bios are charged to that group's BFQ weight.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PFN_MASK ((UINT64_C(1) << 55) - 1)

/* The parent of `pid` and its command name from /proc/PID/stat. */
static int parent_of(int pid, char *comm, size_t len) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close) return -1;
    snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
    int ppid = 0;
    char state;
    if (sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
    return ppid;
}

static int fio_ancestor(void) {
    char comm[64];
    for (int pid = getppid(); pid > 1;) {
        int ppid = parent_of(pid, comm, sizeof comm);
        if (ppid < 0) return -1;
        if (strcmp(comm, "fio.real") == 0 || strcmp(comm, "fio") == 0) return pid;
        pid = ppid;
    }
    return -1;
}

static void dump_range(FILE *out, int pagemap, uint64_t start, uint64_t end) {
    uint64_t run_start = start, run_pfn = 0, run_pages = 0;
    for (uint64_t va = start; va < end; va += 4096) {
        uint64_t e = 0;
        if (pread(pagemap, &e, 8, (off_t)(va / 4096 * 8)) != 8) e = 0;
        uint64_t pfn = (e >> 63) ? (e & PFN_MASK) : 0;
        if (run_pages && pfn && run_pfn && pfn == run_pfn + run_pages) {
            run_pages++;
            continue;
        }
        if (run_pages) fprintf(out, "run %" PRIx64 " %" PRIu64 " %" PRIu64 "\n", run_start,
                               run_pages, run_pfn);
        run_start = va, run_pfn = pfn, run_pages = 1;
    }
    if (run_pages)
        fprintf(out, "run %" PRIx64 " %" PRIu64 " %" PRIu64 "\n", run_start, run_pages, run_pfn);
}

static int join(const char *dir) {
    int pid = fio_ancestor();
    char path[512];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "w");
    if (pid < 0 || !f || fprintf(f, "%d\n", pid) < 0 || fclose(f) != 0) {
        fprintf(stderr, "mdsplit-pagemap: cannot move fio's job process into %s\n", dir);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--join") == 0) return join(argv[2]);
    if (argc < 2) {
        fprintf(stderr, "usage: mdsplit-pagemap OUT [MIN_BYTES]\n");
        return 2;
    }
    uint64_t min_bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    int pid = fio_ancestor();
    if (pid < 0) {
        fprintf(stderr, "mdsplit-pagemap: no fio process above this one\n");
        return 1;
    }
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *maps = fopen(path, "r");
    snprintf(path, sizeof path, "/proc/%d/pagemap", pid);
    int pagemap = open(path, O_RDONLY);
    FILE *out = fopen(argv[1], "w");
    if (!maps || pagemap < 0 || !out) {
        fprintf(stderr, "mdsplit-pagemap: cannot open %s or %s\n", path, argv[1]);
        return 1;
    }
    while (fgets(line, sizeof line, maps)) {
        uint64_t start, end;
        char perms[8];
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &start, &end, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || end - start < min_bytes)
            continue;
        fprintf(out, "map %" PRIx64 " %" PRIx64 "\n", start, end);
        dump_range(out, pagemap, start, end);
    }
    fclose(out);
    return 0;
}
