"""harness/blktrace.py against files written here with struct, in the kernel's
format (include/uapi/linux/blktrace_api.h, kernel/trace/blktrace.c).
Self-contained: needs neither the C++ build nor the harness package."""

import importlib.util
import os
import shutil
import struct
import subprocess
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_MODULE_PATH = os.path.join(_HERE, "..", "..", "harness", "blktrace.py")


def _load_reader():
    # Load by path: harness/__init__.py (owned elsewhere) may pull in the
    # compiled module, which this test must not depend on.
    name = "mdsplit_harness_blktrace_under_test"
    spec = importlib.util.spec_from_file_location(name, _MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


bt = _load_reader()

MAGIC = 0x65617400 | 0x07
TC_SHIFT = 16
TC_READ, TC_WRITE, TC_FLUSH, TC_SYNC = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TC_QUEUE, TC_ISSUE, TC_COMPLETE, TC_FS = 1 << 4, 1 << 6, 1 << 7, 1 << 8
TC_NOTIFY = 1 << 10
TA = {"Q": 1, "M": 2, "F": 3, "G": 4, "D": 7, "C": 8, "P": 9, "U": 10, "I": 12,
      "X": 13, "A": 15}
TA_REQUEUE = 6
TN_PROCESS = TC_NOTIFY << TC_SHIFT
CATEGORY = {"Q": TC_QUEUE, "M": TC_QUEUE, "F": TC_QUEUE, "G": TC_QUEUE, "P": TC_QUEUE,
            "U": TC_QUEUE, "I": TC_QUEUE | TC_FS, "D": TC_ISSUE | TC_FS,
            "C": TC_COMPLETE | TC_FS, "X": 0, "A": TC_QUEUE}

MD0 = (9 << 20) | 0
SDB = (8 << 20) | 16


def action_word(letter, write=False, sync=False, flush=False):
    """BLK_TA_* | category, plus what __blk_add_trace() ORs in."""
    tc = CATEGORY[letter] | (TC_WRITE if write else TC_READ)
    if sync:
        tc |= TC_SYNC
    if flush:
        tc |= TC_FLUSH
    return TA[letter] | (tc << TC_SHIFT)


def record(seq, time_ns, sector, nbytes, action, pid, device, error=0, pdu=b"",
           endian="<"):
    """struct blk_io_trace + payload."""
    head = struct.pack(endian + "IIQQIIIIIHH", MAGIC, seq, time_ns, sector, nbytes, action,
                       pid, device, 0, error & 0xFFFF, len(pdu))
    assert len(head) == 48
    return head + pdu


def process_note(pid, device, comm=b"fio", endian="<"):
    """trace_note_tsk(): BLK_TN_PROCESS, comm[TASK_COMM_LEN]."""
    return record(0, 0, 0, 0, TN_PROCESS, pid, device, pdu=comm.ljust(16, b"\0"),
                  endian=endian)


def sample_trace(endian="<", device=SDB):
    """A note, one event of each kind, and a requeue the reader skips."""
    out = [process_note(4242, device, endian=endian)]
    seq = iter(range(1, 100))

    def add(letter, sector, nbytes, pdu=b"", error=0, **flags):
        n = next(seq)
        out.append(record(n, n * 1000, sector, nbytes, action_word(letter, **flags), 4242,
                          device, error=error, pdu=pdu, endian=endian))

    add("Q", 2048, 8192, sync=True)
    add("X", 2048, 4096, pdu=struct.pack(">Q", 2056), sync=True)
    add("A", 1024, 4096, pdu=struct.pack(">IIQ", MD0, device, 0x123456789), write=True)
    add("G", 1024, 4096, write=True)
    add("P", 0, 0)
    add("M", 1032, 4096, write=True)
    add("F", 1016, 4096, write=True)
    add("U", 0, 0, pdu=struct.pack(">Q", 3))
    add("I", 1016, 12288, write=True)
    add("D", 1016, 12288, write=True)
    out.append(record(99, 99000, 1016, 12288, TA_REQUEUE, 4242, device, endian=endian))
    add("C", 1016, 12288, error=-5, write=True)
    add("Q", 0, 0, write=True, sync=True, flush=True)
    return b"".join(out)


def check_sample(records, device=SDB):
    assert [r.action for r in records] == list("QXAGPMFUIDCQ")
    assert [r.sequence for r in records] == list(range(1, 13))
    assert all(r.device == device and r.pid == 4242 for r in records)
    q, x, a, g, p, m, f, u, i, d, c, fl = records
    assert (q.op, q.sync, q.sector, q.nr_sectors, q.bytes, q.time_ns) == ("R", True, 2048, 16,
                                                                         8192, 1000)
    assert q.rwbs == "RS"
    assert (x.new_sector, x.nr_sectors) == (2056, 8)
    assert (a.op, a.from_device, a.from_sector, a.sector) == ("W", MD0, 0x123456789, 1024)
    assert (g.op, m.op, f.op) == ("W", "W", "W")
    assert (p.op, p.rwbs, p.bytes) == ("R", "N", 0)
    assert u.depth == 3
    assert (i.bytes, d.nr_sectors) == (12288, 24)
    assert (c.error, c.op, c.end_sector) == (-5, "W", 1040)
    assert q.error == 0
    assert (fl.flush, fl.op, fl.sync, fl.rwbs) == (True, "W", True, "FWS")
    assert (c.major, c.minor) == (device >> 20, device & 0xFFFFF)


def test_reads_every_action(tmp_path):
    path = tmp_path / "sdb.blktrace.0"
    path.write_bytes(sample_trace())
    records = bt.read_blktrace(path)
    check_sample(records)
    assert (records[0].major, records[0].minor) == (8, 16)
    check_sample(bt.read_blktrace(str(path)))


def test_reads_big_endian_hosts(tmp_path):
    path = tmp_path / "sdb.blktrace.0"
    path.write_bytes(sample_trace(endian=">"))
    check_sample(bt.read_blktrace(path))


def test_skips_cgroup_id_in_payload(tmp_path):
    cgroup = 1 << 8  # __BLK_TA_CGROUP: a u64 cgroup id leads the pdu
    pdu = struct.pack("<Q", 77) + struct.pack(">Q", 4096)
    data = record(1, 10, 0, 4096, action_word("X") | cgroup, 1, SDB, pdu=pdu)
    path = tmp_path / "sdb.blktrace.0"
    path.write_bytes(data)
    (x,) = bt.read_blktrace(path)
    assert (x.action, x.new_sector) == ("X", 4096)


def test_read_trace_dir(tmp_path):
    (tmp_path / "md0.blktrace.0").write_bytes(sample_trace(device=MD0))
    (tmp_path / "m0.blktrace.0").write_bytes(sample_trace())
    (tmp_path / "m1.blktrace.0").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a trace")
    (tmp_path / "m2.blktrace").write_bytes(b"junk")
    traces = bt.read_trace_dir(tmp_path)
    assert sorted(traces) == ["m0", "m1", "md0"]
    check_sample(traces["md0"], device=MD0)
    check_sample(traces["m0"])
    assert traces["m1"] == []


def test_read_trace_dir_merges_cpus(tmp_path):
    a = record(1, 100, 8, 4096, action_word("Q"), 1, SDB)
    b = record(1, 50, 16, 4096, action_word("Q"), 1, SDB)
    (tmp_path / "sdb.blktrace.0").write_bytes(a)
    (tmp_path / "sdb.blktrace.1").write_bytes(b)
    traces = bt.read_trace_dir(tmp_path)
    assert [r.sector for r in traces["sdb"]] == [16, 8]


@pytest.mark.parametrize("damage", ["truncated", "payload", "magic", "version"])
def test_rejects_damaged_files(tmp_path, damage):
    data = bytearray(sample_trace())
    if damage == "truncated":
        data = data[:-10]
    elif damage == "payload":
        # end 3 bytes into U's payload: note, Q, X, A, G, P, M, F, then U's header
        data = data[: (48 + 16) + 48 + (48 + 8) + (48 + 16) + 48 * 4 + 48 + 3]
    elif damage == "magic":
        data[0:4] = b"\0\0\0\0"
    else:
        data[0:4] = struct.pack("<I", 0x65617406)
    path = tmp_path / "bad.blktrace.0"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        bt.read_blktrace(path)


def test_missing_file(tmp_path):
    with pytest.raises(OSError):
        bt.read_blktrace(tmp_path / "nope.blktrace.0")


@pytest.mark.skipif(shutil.which("blkparse") is None, reason="blkparse is not installed")
def test_blkparse_agrees_with_this_encoder(tmp_path):
    """Checks the test's own encoder against blkparse, so the fixtures above
    are the kernel's format and not merely what the reader expects."""
    (tmp_path / "sdb.blktrace.0").write_bytes(sample_trace())
    out = subprocess.run(["blkparse", "-i", str(tmp_path / "sdb")], capture_output=True,
                         text=True, check=True).stdout
    assert " A   W 1024 + 8 <- (9,0) 4886718345" in out
    assert " X  RS 2048 / 2056 [fio]" in out
    assert " U   N [fio] 3" in out
    assert " C   W 1016 + 24 [65531]" in out
    assert " Q FWS [fio]" in out
