"""`harness reference --vm JOB.fio`: a job file run in the emulator
(`simulate`, the virtual clock) and on the real kernel in the VM
(translate.py), both sides' traces as blktrace files and a diff.md.

REPORT/
  kernel/<job>/<dev>.blktrace.0      the guest's tracefs events (guest_trace.py)
  kernel/<job>/                      run.sh, job.fio, out/ (fio.json,
                                     trace.txt, members, dmesg)
  kernel/<kernel>.run.log, .console.log   one boot per kernel, its jobs in turn
  emulator/<job>/<dev>.blktrace.0    simulate's mdsplit_trace
  emulator/<job>.fio, <job>.toml     the job and stack simulate ran
  diff.md                            per job and device (diff.py)

Exit status: 0 when every compared sequence (Q and D of every device) is
identical, 1 otherwise or when a run fails, 2 when the job cannot be
translated (one line naming what).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.blktrace import read_trace_dir
from harness.vm import diff, guest_trace, machine, translate


class VmRunError(RuntimeError):
    """A run failed in the guest; str(e) is one line."""


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def toml_text(doc: dict) -> str:
    """A stack document as TOML (tables, arrays of tables, inline values)."""
    lines = []
    for key, value in doc.items():
        if isinstance(value, dict):
            lines.append(f"[{key}]")
            for k, v in value.items():
                if isinstance(v, dict) and key == "models":
                    lines.append(f"[{key}.{k}]")
                    lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
                else:
                    lines.append(f"{k} = {_toml_value(v)}")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in item.items()]
        else:
            lines.insert(0, f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def emulator_stack(stack: Path, g: translate.GuestJob, out: Path) -> Path:
    """The stack the emulator runs beside the guest: the job's own, its
    members' paths under `out` and [bio] contiguity = { pattern = [...] }
    from the guest's pagemap of fio's buffer (g.pattern, run_kernel), in
    place of the stack's own, so that both sides build bios over the same
    physical layout; md0's Q sequence in diff.md checks that they did."""
    import tomllib
    doc = tomllib.loads(stack.read_text())
    doc.setdefault("bio", {})["contiguity"] = {"pattern": g.pattern}
    for i, m in enumerate(doc.get("members", [])):
        m["path"] = str((out / f"member{i}.img").resolve())
    path = out / f"{g.section}.toml"
    path.write_text(toml_text(doc))
    return path


def _emulator_job(job, stack: Path, out: Path) -> str:
    lines = [f"[{job.section}]"]
    for k, v in job.options.items():
        if k in ("mdsplit_config", "mdsplit_trace", "mdsplit_stats"):
            continue
        lines.append(f"{k}={v}")
    lines += [f"mdsplit_config={stack.resolve()}",
              f"mdsplit_trace={(out / job.section).resolve()}",
              f"mdsplit_stats={(out / (job.section + '.stats.json')).resolve()}"]
    return "\n".join(lines) + "\n"


def run_emulator(pairs, guests, out: Path) -> dict:
    """{section: {dev: records}} of simulate's run of the jobs."""
    from harness import simulate
    out.mkdir(parents=True, exist_ok=True)
    # One job file per job: fio seeds a job's random generators from its
    # number in the run (init.c: FIO_RANDSEED * thread_number), and the
    # guest runs each job alone.
    result = {}
    for (job, stack), g in zip(pairs, guests):
        jf = out / f"{job.section}.fio"
        jf.write_text(_emulator_job(job, emulator_stack(stack, g, out), out))
        simulate.simulate_job(jf, data=False)
        result[job.section] = read_trace_dir(out / job.section)
    return result


def _overruns(stats: str) -> int:
    return sum(int(line.split(":")[1]) for line in stats.splitlines()
               if line.startswith("overrun:"))


def boot_error(what: str, kernel: str, boot: machine.Boot, log: Path) -> VmRunError:
    """One line for a boot whose script failed: the script's last line, or
    for a boot that never reached it the console's panic line (or its last)."""
    console = boot.console.strip().splitlines()
    panic = [line for line in console if "Kernel panic" in line]
    tail = (boot.log.strip().splitlines() or panic or console or ["(no output)"])[-1]
    return VmRunError(f"{what} failed in the VM ({kernel}, exit {boot.rc}): {tail} (log: {log})")


def run_kernel(kernel: str, guests: list, out: Path) -> tuple:
    """({section: {dev: records}}, seconds) of the jobs on one kernel, in
    one boot (each job builds its members and md0 and tears them down)."""
    (out).mkdir(parents=True, exist_ok=True)
    lines = ["set -e"]
    for g in guests:
        d = out / g.section
        (d / "out").mkdir(parents=True, exist_ok=True)
        (d / "run.sh").write_text(translate.guest_script(g, f"/share/{g.section}"))
        (d / "job.fio").write_text(translate.guest_job_file(g, f"/share/{g.section}"))
        # Each job's time in the guest (its members, md0, warm-up, fio,
        # teardown), from the guest's uptime.
        lines += ["read t0 _ < /proc/uptime", f"sh /share/{g.section}/run.sh",
                  "read t1 _ < /proc/uptime", f"echo {g.section} $t0 $t1 >> /share/job.seconds"]
    (out / "run.sh").write_text("\n".join(lines) + "\n")
    (out / "job.seconds").unlink(missing_ok=True)
    boot = machine.boot(kernel, out)
    for f in ("run.sh", "run.log", "run.rc", "console.log", "job.seconds"):
        if (out / f).exists():
            (out / f).replace(out / f"{kernel}.{f}")
    if boot.rc != 0:
        raise boot_error("the jobs", kernel, boot, out / f"{kernel}.run.log")
    result = {}
    for g in guests:
        d = out / g.section
        stats = (d / "out/trace.stats").read_text()
        if _overruns(stats):
            raise VmRunError(f"job {g.section}: the guest's trace buffer overran "
                             f"({_overruns(stats)} events lost); the job is too long for one "
                             "trace")
        g.pattern = _buffer_pattern(g, d / "out")
        devices = guest_trace.read_members(d / "out/members")
        outside = {}
        result[g.section] = guest_trace.parse((d / "out/trace.txt").read_text(), devices,
                                              outside)
        g.notes.append("md metadata I/O before the data area (superblock updates), left out: "
                       + (", ".join(f"{k} {v} events" for k, v in sorted(outside.items()))
                          or "none"))
        guest_trace.write_dir(result[g.section], d)
    return result, boot.seconds


def job_seconds(kernel_dir: Path, kernel: str) -> dict:
    """{section: seconds in the guest} of one kernel's boot (run_kernel)."""
    path = kernel_dir / f"{kernel}.job.seconds"
    out = {}
    for line in (path.read_text().splitlines() if path.exists() else []):
        parts = line.split()
        if len(parts) == 3:
            out[parts[0]] = float(parts[2]) - float(parts[1])
    return out


def _buffer_pattern(g: translate.GuestJob, out: Path) -> list:
    """The guest's fio buffer layout as a contiguity pattern (io_u 0's
    buffer: every I/O of an iodepth=1 job uses it); writes out/fio.json."""
    text = (out / "fio.out").read_text(errors="replace")
    fio_json, addrs = translate.split_fio_output(text)
    (out / "fio.json").write_text(fio_json)
    pagemap = out / "pagemap"
    if not addrs or not pagemap.exists():
        raise VmRunError(f"job {g.section}: the guest did not report fio's buffer layout "
                         f"(fio --debug=mem buffer lines: {len(addrs)}; {pagemap} "
                         f"{'present' if pagemap.exists() else 'missing'})")
    text = pagemap.read_text()
    runs = [translate.buffer_runs(text, a, g.max_bs) for a in addrs]
    g.notes.append(
        f"bio.contiguity: fio's buffer in the guest, from its /proc/PID/pagemap "
        f"(harness/vm/pagemap.c): {len(runs[0])} physically contiguous run(s) over "
        f"{sum(runs[0])} pages, longest {max(runs[0])}; the emulator runs with it as "
        "contiguity = { pattern = [...] } in place of the stack's")
    if any(r != runs[0] for r in runs[1:]):
        g.notes.append(f"the guest's {len(runs)} io_u buffers differ in layout; the emulator "
                       "lays every buffer out as io_u 0's")
    return translate.runs_pattern(runs[0])


def _header(g: translate.GuestJob, seconds: float, fio_json: Path) -> list:
    lines = [f"- kernel: **{g.kernel}** ({machine.KERNELS[g.kernel]}), chosen by "
             f"{g.kernel_why}; {seconds:.1f} s of wall time for the boot and its jobs "
             "under TCG (this machine)",
             f"- members: {len(g.members)} null_blk devices "
             f"({g.members[0].size_mb} MiB, max_sectors {g.members[0].max_sectors}, "
             f"blocksize {g.members[0].logical_block_size}, hw_queue_depth "
             f"{g.members[0].queue_depth}), elevator {g.scheduler}; md0: raid5 "
             f"chunk {g.chunk_kb}k, {g.layout}, --assume-clean"]
    lines += [f"- {n}" for n in g.notes]
    try:
        r = json.loads(fio_json.read_text())["jobs"][0]["read"]
        lines.append(f"- guest fio: read {r['io_bytes'] >> 20} MiB in {r['total_ios']} I/Os")
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return lines


@dataclass
class Outcome:
    rc: int                                   # the exit status
    devices: dict = field(default_factory=dict)   # section -> [diff.DeviceDiff]
    seconds: dict = field(default_factory=dict)   # kernel -> wall seconds of its boot
    job_seconds: dict = field(default_factory=dict)   # section -> seconds in the guest

    def identical(self, section: str) -> bool:
        return all(d.q.identical and d.d.identical for d in self.devices[section])


def compare_jobs(job_file: Path, report: Path, kernel: str = None, sections=None,
                 progress=None, thp: str = "always") -> Outcome:
    """Runs the job file on both sides; writes the traces and diff.md.
    `thp`: the guest's transparent_hugepage/enabled (always, madvise or
    never: how physically contiguous fio's buffer comes out)."""
    say = progress or (lambda s: None)
    if kernel is not None and kernel not in machine.KERNELS:
        print(f"reference --vm: --kernel {kernel}: allowed: {', '.join(machine.KERNELS)}",
              file=sys.stderr)
        return Outcome(2)
    try:
        pairs = translate.jobs_of(job_file, sections)
        guests = [translate.translate(job, stack, kernel) for job, stack in pairs]
        for g in guests:
            g.thp = thp
    except translate.Untranslatable as e:
        print(f"reference --vm: {e}", file=sys.stderr)
        return Outcome(2)
    out = Outcome(0)
    try:
        spent = machine.prepare(sorted({g.kernel for g in guests}), say)
        if spent:
            say(f"mdsplit vm: prepared in {spent:.0f} s")
        report.mkdir(parents=True, exist_ok=True)
        kernel_records = {}
        for k in dict.fromkeys(g.kernel for g in guests):
            mine = [g for g in guests if g.kernel == k]
            say(f"reference --vm: {len(mine)} job(s) on the {k} kernel (QEMU TCG)")
            records, out.seconds[k] = run_kernel(k, mine, report / "kernel")
            out.job_seconds.update(job_seconds(report / "kernel", k))
            kernel_records.update(records)
            say(f"reference --vm: {out.seconds[k]:.1f} s in the VM ({k}: boot and "
                f"{len(mine)} job(s))")
        # The emulator after the kernel: it takes the guest's buffer layout.
        t0 = time.monotonic()
        say(f"reference --vm: the emulator (simulate) on {job_file}")
        emulated = run_emulator(pairs, guests, report / "emulator")
        say(f"reference --vm: simulate took {time.monotonic() - t0:.1f} s")
        sections_md = []
        for g in guests:
            out.devices[g.section] = diff.diff_devices(kernel_records[g.section],
                                                       emulated[g.section])
            sections_md.append(diff.markdown(
                f"job {g.section}",
                _header(g, out.seconds[g.kernel],
                        report / "kernel" / g.section / "out/fio.json"),
                out.devices[g.section]))
    except (machine.VmUnavailable, VmRunError) as e:
        print(f"reference --vm: {e}", file=sys.stderr)
        return Outcome(1)
    except Exception as e:  # simulate's own refusals
        from harness.simulate import SimulateError
        if isinstance(e, SimulateError):
            print(f"reference --vm: {e}", file=sys.stderr)
            return Outcome(1)
        raise
    (report / "diff.md").write_text("\n".join(sections_md))
    identical = all(out.identical(s) for s in out.devices)
    out.rc = 0 if identical else 1
    return out


def run(job_file: Path, report: Path, kernel: str = None, sections=None,
        progress=None) -> int:
    """`harness reference --vm`: the exit status (0 identical, 1 differences
    or a failed run, 2 untranslatable)."""
    out = compare_jobs(job_file, report, kernel, sections, progress)
    if out.rc == 2 or not out.devices:
        return out.rc
    print(f"reference --vm: {'identical' if out.rc == 0 else 'differences'}: "
          f"{report / 'diff.md'}")
    return out.rc
