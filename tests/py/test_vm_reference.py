"""The VM reference (harness/vm, docs/vm-reference.md): the pieces on their
own, and the held-out matrix against real kernels in QEMU."""
import subprocess
import sys
from pathlib import Path

import pytest

from harness.blktrace import TraceRecord, read_blktrace, write_blktrace
from harness.vm import diff, groups, guest_trace, machine, matrix, translate

ROOT = Path(__file__).resolve().parents[2]

# tracefs lines as Linux 6.12 prints them (include/trace/events/block.h).
TRACE = """\
# tracer: nop
             fio-231     [000] .....    20.000100: block_bio_queue: 9,0 RS 0 + 8960 [fio]
             fio-231     [000] .....    20.000200: block_split: 9,0 RS 0 / 128 [fio]
             fio-231     [000] .....    20.000300: block_bio_remap: 254,1 RS 2048 + 128 <- (9,0) 128
             fio-231     [000] .....    20.000400: block_bio_queue: 254,1 RS 2048 + 128 [fio]
             fio-231     [000] .....    20.000500: block_getrq: 254,1 RS 2048 + 128 [fio]
             fio-231     [000] .....    20.000600: block_rq_insert: 254,1 RS 65536 () 2048 + 128 none,0,0 [fio]
             fio-231     [000] .....    20.000700: block_rq_issue: 254,1 RS 65536 () 2048 + 128 none,0,0 [fio]
          <idle>-0       [000] ..s1.    20.000800: block_rq_complete: 254,1 RS () 2048 + 128 none,0,0 [0]
     md0_raid5-90      [000] .....    20.000850: block_bio_queue: 254,1 WFS 8 + 1 [md0_raid5]
             fio-231     [000] .....    20.000900: block_bio_queue: 254,7 RS 2048 + 8 [fio]
"""
DEVICES = {(254, 1): ("m1", 2048), (9, 0): ("md0", 0)}


def test_guest_trace_parses_612_lines_per_device():
    """tracefs lines become per-device records; unknown devices are dropped."""
    recs = guest_trace.parse(TRACE, DEVICES)
    assert [r.action for r in recs["md0"]] == ["Q", "X"]
    assert [r.action for r in recs["m1"]] == ["A", "Q", "G", "I", "D", "C"]


def test_guest_trace_member_sectors_are_relative_to_md_data_area():
    """A member's sector loses md's data offset (2048 here)."""
    recs = guest_trace.parse(TRACE, DEVICES)
    q = [r for r in recs["m1"] if r.action == "Q"][0]
    assert (q.sector, q.nr_sectors) == (0, 128)


def test_guest_trace_leaves_out_md_metadata_before_the_data_area():
    """A superblock write (sector 8, before the data offset 2048) is counted, not kept."""
    outside = {}
    recs = guest_trace.parse(TRACE, DEVICES, outside)
    assert outside == {"m1": 1} and all(r.op == "R" for r in recs["m1"])


def test_guest_trace_remap_names_md0_and_its_sector():
    """block_bio_remap keeps md0's sector and the emulator's md0 number."""
    a = guest_trace.parse(TRACE, DEVICES)["m1"][0]
    assert (a.from_device, a.from_sector) == (9 << 20, 128)


def test_guest_trace_split_keeps_the_new_sector():
    """block_split's `sector / new_sector` becomes X's payload."""
    x = guest_trace.parse(TRACE, DEVICES)["md0"][1]
    assert (x.sector, x.new_sector) == (0, 128)


def test_blktrace_writer_round_trips(tmp_path):
    """write_blktrace's file reads back the same events (and payloads)."""
    recs = guest_trace.parse(TRACE, DEVICES)
    for name, rs in recs.items():
        write_blktrace(tmp_path / f"{name}.blktrace.0", rs)
        back = read_blktrace(tmp_path / f"{name}.blktrace.0")
        assert [(r.action, r.op, r.sector, r.nr_sectors, r.new_sector, r.from_sector)
                for r in back] == [(r.action, r.op, r.sector, r.nr_sectors, r.new_sector,
                                    r.from_sector) for r in rs]


def _rec(action, sector, n=8):
    return TraceRecord(0, 0, 8 << 20, action, "R", sector, n, n * 512, 1, 0)


def test_diff_identical_sequences():
    """The same Q events in the same order are identical."""
    a = [_rec("Q", s) for s in (0, 8, 16)]
    assert diff.compare(a, list(a), "Q").identical


def test_diff_reports_first_divergence_and_edit_distance():
    """A swapped pair diverges at its first event; distance 2 (one move)."""
    a = [_rec("Q", s) for s in (0, 8, 16, 24)]
    b = [_rec("Q", s) for s in (0, 16, 8, 24)]
    d = diff.compare(a, b, "Q")
    assert (d.first, d.distance) == (1, 2)
    assert d.kernel_next[0] == ("R", 8, 8) and d.emulator_next[0] == ("R", 16, 8)


def test_seek_histogram_buckets():
    """Sequential, backward and far issues land in their buckets."""
    recs = [_rec("D", s) for s in (0, 8, 0, 4096)]
    assert diff.seek_histogram(recs) == {"0": 1, "backward": 1, ">=2048": 1}


def _job(tmp_path, stack_text, options="rw=read\nbs=64k\nsize=1m\n"):
    (tmp_path / "s.toml").write_text(stack_text)
    jf = tmp_path / "j.fio"
    jf.write_text(f"[j]\nfilename=md0\ndirect=1\n{options}mdsplit_config=s.toml\n")
    return jf


def test_passthrough_stack_is_refused_with_one_line(tmp_path):
    """kind = passthrough has no counterpart in the reference kernel: exit 2, one line."""
    jf = _job(tmp_path, '[device]\nkind = "passthrough"\n[[members]]\npath = "a"\nsize = "16m"\n')
    r = subprocess.run([sys.executable, "-m", "harness", "reference", "--vm", str(jf),
                        "--report-dir", str(tmp_path / "rep")], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        'reference --vm: device.kind = "passthrough": the VM reference translates kind = '
        '"raid5" only (the reference kernel has no dm-linear for a passthrough stack)']
    assert not (tmp_path / "rep").exists()


def test_bfq_groups_are_refused_with_one_line(tmp_path):
    """mdsplit_group names BFQ groups, not translated: the option is named."""
    stack = matrix.raid5_stack(3, "64k", "left-symmetric", "legacy", 16 << 20)
    jf = _job(tmp_path, stack, "rw=read\nbs=64k\nsize=1m\nmdsplit_group=a\n")
    job, path = translate.jobs_of(jf)[0]
    with pytest.raises(translate.Untranslatable, match=r"^mdsplit_group=a: BFQ groups"):
        translate.translate(job, path)


def test_bio_policy_other_than_original_is_refused(tmp_path):
    """6.12 builds bios the original way; seed 001's align policy has no kernel here."""
    stack = matrix.raid5_stack(3, "64k", "left-symmetric", "legacy", 16 << 20, "align")
    job, path = translate.jobs_of(_job(tmp_path, stack))[0]
    with pytest.raises(translate.Untranslatable, match=r'^bio.policy = "align": seed 001'):
        translate.translate(job, path)


def test_bfq_members_get_the_emulators_tunables(tmp_path):
    """A bfq stack's tunables reach the guest's iosched files (low_latency off as modelled)."""
    stack = matrix.raid5_stack(3, "64k", "left-symmetric", "legacy", 16 << 20,
                               scheduler="bfq") + '[bfq]\nslice_idle = "2ms"\n'
    job, path = translate.jobs_of(_job(tmp_path, stack))[0]
    script = translate.guest_script(translate.translate(job, path), "/share/j")
    assert "echo 0 > /sys/block/m2/queue/iosched/low_latency" in script
    assert "echo 2000 > /sys/block/m0/queue/iosched/slice_idle_us" in script
    assert "echo 0 > /sys/block/m1/queue/iosched/max_budget" in script  # autotuned in both


def test_split_order_chooses_the_kernel(tmp_path):
    """legacy -> Debian's 6.12 (stock code), fixed -> the patched build."""
    for order, kernel in (("legacy", "debian-6.12"), ("fixed", "fixed")):
        jf = _job(tmp_path, matrix.raid5_stack(4, "64k", "left-symmetric", order, 16 << 20))
        job, path = translate.jobs_of(jf)[0]
        assert translate.translate(job, path).kernel == kernel


def test_guest_script_sets_member_limits_and_assume_clean(tmp_path):
    """Each member's max_sectors is written explicitly; md0 is created --assume-clean."""
    jf = _job(tmp_path, matrix.raid5_stack(3, "128k", "right-asymmetric", "legacy", 16 << 20))
    job, path = translate.jobs_of(jf)[0]
    script = translate.guest_script(translate.translate(job, path), "/share/j")
    assert "echo 1024 > $C/m2/max_sectors" in script
    assert ("--raid-devices=3 --chunk=128 --layout=right-asymmetric --assume-clean "
            "/dev/m0 /dev/m1 /dev/m2") in script


FIO_OUT = """fio: set debug option mem
mem      81    io_u alloc 0x559b3a7123c0, index 0
mem      81    io_u 0x559b3a7123c0, mem 0x7f80b4655000
j : Saving output of postrun in j.postrun.txt
{
  "fio version" : "fio-3.33",
  "jobs" : []
}
mem      81    free malloc mem 0x7f80b4654010
"""


def test_fio_output_splits_into_json_and_buffer_addresses():
    """--debug=mem lines give the io_u buffers; the JSON is what lies between braces."""
    text, addrs = translate.split_fio_output(FIO_OUT)
    assert addrs == [0x7f80b4655000]
    assert text.startswith("{") and '"jobs"' in text and "mem " not in text


def test_buffer_runs_follow_consecutive_page_frames():
    """Runs break where the next page's frame does not follow; absent pages stand alone."""
    pagemap = ("map 7f0000000000 7f0000010000\n"
               "run 7f0000000000 1 900\n"          # before the buffer
               "run 7f0000001000 3 100\n"          # pages 0-2
               "run 7f0000004000 1 103\n"          # page 3 continues the run
               "run 7f0000005000 2 0\n"            # pages 4-5 absent
               "run 7f0000007000 2 50\n")          # pages 6-7
    assert translate.buffer_runs(pagemap, 0x7f0000001000, 8 * 4096) == [4, 1, 1, 2]


def test_runs_pattern_groups_equal_neighbours():
    """[1, 1, 1, 512, 4, 4] -> [[1, 3], 512, [4, 2]] (the stack's pattern syntax)."""
    assert translate.runs_pattern([1, 1, 1, 512, 4, 4]) == [[1, 3], 512, [4, 2]]


def test_pagemap_tool_reports_a_host_fio_buffer(tmp_path):
    """mdsplit-pagemap as fio's exec_postrun reports the buffer fio's --debug=mem names."""
    import os
    import shutil
    if os.geteuid() != 0 or not shutil.which("gcc") or not shutil.which("fio"):
        pytest.skip("needs root (pagemap's frame numbers), gcc and fio")
    tool = tmp_path / "mdsplit-pagemap"
    subprocess.run(["gcc", "-O2", "-static", "-o", str(tool),
                    str(ROOT / "harness/vm/pagemap.c")], check=True)
    r = subprocess.run(["fio", "--name=j", f"--filename={tmp_path / 'f'}", "--size=1m",
                        "--bs=256k", "--rw=read", "--debug=mem",
                        f"--exec_postrun={tool} {tmp_path / 'pagemap'} 262144"],
                       cwd=tmp_path, capture_output=True, text=True, check=True)
    _, addrs = translate.split_fio_output(r.stdout)
    runs = translate.buffer_runs((tmp_path / "pagemap").read_text(), addrs[0], 256 << 10)
    assert len(addrs) == 1 and sum(runs) == 64


def test_missing_qemu_is_one_line(tmp_path, monkeypatch):
    """Without QEMU a boot fails with one line naming the binary and its package."""
    monkeypatch.setattr(machine, "QEMU", "qemu-system-x86_64-absent")
    with pytest.raises(machine.VmUnavailable) as e:
        machine.boot("stock", tmp_path)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("qemu-system-x86_64-absent is not installed")


def test_boot_that_never_ran_its_script_names_the_panic(tmp_path):
    """A boot that panicked before /init's script: the console's panic line, one line."""
    from harness.vm import reference
    console = ("[    0.04] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\n"
               "[    0.06] Kernel panic - not syncing: IO-APIC + timer doesn't work!\n"
               "[    0.06] Call Trace:\n")
    e = reference.boot_error("the jobs", "debian-6.12", machine.Boot(None, "", console, 1.0),
                             tmp_path / "run.log")
    assert "\n" not in str(e) and "Kernel panic - not syncing: IO-APIC" in str(e)


def test_kernel_download_failure_names_the_package(tmp_path):
    """prepare.sh with apt-get failing ends with one line naming what it could not get."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "apt-get").write_text("#!/bin/sh\nexit 100\n")
    (stub / "apt-get").chmod(0o755)
    import os
    env = dict(os.environ, PATH=f"{stub}:{os.environ['PATH']}",
               MDSPLIT_VM_CACHE=str(tmp_path / "cache"))
    r = subprocess.run(["sh", str(ROOT / "harness/vm/prepare.sh"), "debian-6.12"], env=env,
                       capture_output=True, text=True, timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1
    pins = machine.pins()
    assert (f"cannot download {pins['LINUX_SOURCE_PACKAGE']}={pins['LINUX_SOURCE_VERSION']}"
            in last or last.startswith("mdsplit vm: apt-get failed installing")), last


# --- against the real kernel --------------------------------------------------

def _need_vm():
    if why := machine.can_run_qemu():
        pytest.skip(f"this machine cannot run the VM reference: {why}")


def test_raid5_matrix_against_the_kernel(tmp_path, mdsplit_module):
    """RAID5 reads (3-8 members, 4k-512k chunks, md's four layouts, aligned
    and unaligned, 4k to several stripes), writes (rmw, rcw, full stripe)
    and the original bio policy over the guest's pagemap-reported buffer,
    on the stock and patched kernels: every case identical, or a known
    difference (matrix.KNOWN) with its kernel function."""
    _need_vm()
    result = matrix.run(matrix.CASES, tmp_path)
    print(result.summary())
    ran = result.identical + result.explained + result.differing
    assert len(ran) == len(matrix.CASES), result.summary()
    assert not result.differing, result.summary()


def test_unknown_kernel_is_refused_with_one_line(tmp_path):
    """--kernel names one of the prepared kernels; anything else: exit 2, one line."""
    jf = _job(tmp_path, matrix.raid5_stack(3, "64k", "left-symmetric", "legacy", 16 << 20))
    r = subprocess.run([sys.executable, "-m", "harness", "reference", "--vm", str(jf),
                        "--kernel", "5.9"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "reference --vm: --kernel 5.9: allowed: stock, fixed, debian-6.12"]


def test_bfq_group_shares_against_the_kernel(tmp_path, mdsplit_module):
    """BFQ groups of weights 100/200/400 (io.bfq.weight) on a slow null_blk: each
    job's share of the bytes read, kernel over emulator, within groups.TOLERANCE
    or a known difference (groups.KNOWN)."""
    _need_vm()
    result = groups.run(groups.CASES, tmp_path)
    print(result.summary())
    assert len(result.outcomes) == len(groups.CASES), result.summary()
    assert not result.differing(), result.summary()


def _group_readback(rios=(679, 1185, 1167), weights=("default 100", "default 200", "default 400")):
    return "\n".join(f"{g} {w} 254:0 rbytes=0 wbytes=0 rios={n} wios=0"
                     for g, w, n in zip(("g100", "g200", "g400"), weights, rios))


_GROUP_FIO = {"jobs": [{"jobname": f"j{i}", "read": {"total_ios": n}}
                       for i, n in enumerate((604, 977, 985))]}


def test_bfq_group_setup_readback_that_took_has_no_errors():
    """Weights read back as set and every group's io.stat covering its jobs: no set-up error."""
    assert groups.setup_errors(groups.CASES[0], _group_readback(), _GROUP_FIO) == []


def test_bfq_group_setup_flags_a_job_outside_its_group():
    """A group whose io.stat counts fewer reads than its jobs did: a job did not join it."""
    errors = groups.setup_errors(groups.CASES[0], _group_readback(rios=(5, 1185, 1167)), _GROUP_FIO)
    assert errors == ["g100: io.stat counts 5 reads, its jobs 604 (a job did not join the group)"]


def test_bfq_group_setup_flags_a_weight_not_applied():
    """A weight that does not read back as "default N" is a set-up error."""
    text = _group_readback(weights=("default 100", "default 100", "default 400"))
    assert groups.setup_errors(groups.CASES[0], text, _GROUP_FIO) == [
        "g200: io.bfq.weight reads 'default 100', not 'default 200'"]


def test_bfq_group_guest_script_weights_and_joins(tmp_path):
    """Each group gets its io.bfq.weight; each job joins its group from exec_prerun."""
    case = groups.CASES[0]
    script = groups.guest_script(case, "/share/x")
    assert "echo 400 > /sys/fs/cgroup/g400/io.bfq.weight" in script
    assert "echo 2 > /sys/kernel/config/nullb/m0/irqmode" in script
    assert "exec_prerun=/bin/mdsplit-pagemap --join /sys/fs/cgroup/g200" in groups.guest_job(case)
