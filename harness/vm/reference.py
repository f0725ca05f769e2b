"""`harness reference --vm JOB.fio`: a job file run in the emulator
(`simulate`, the virtual clock) and on the real kernel in the VM
(translate.py), both sides' traces as blktrace files and a diff.md.

REPORT/
  kernel/<job>/<dev>.blktrace.0      the guest's tracefs events (guest_trace.py)
  kernel/<job>/run/                  run.sh, job.fio, run.log, console.log,
                                     out/ (fio.json, trace.txt, members)
  emulator/<job>/<dev>.blktrace.0    simulate's mdsplit_trace
  emulator/job.fio                   the job file simulate ran
  diff.md                            per job and device (diff.py)

Exit status: 0 when every compared sequence (Q and D of every device) is
identical, 1 otherwise or when a run fails, 2 when the job cannot be
translated (one line naming what).
"""
from __future__ import annotations

import json
import os
import sys
import time
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
    members' paths under `out` and the dio buffer as physically contiguous
    as the guest's (THP always: one run of the block's pages, [bio]
    contiguity = { pattern = [pages] }); md0's Q sequence in diff.md checks
    that both sides built the same bios."""
    import tomllib
    doc = tomllib.loads(stack.read_text())
    doc.setdefault("bio", {})["contiguity"] = {"pattern": [max(g.warmup_bs // 4096, 1)]}
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
    text = "".join(_emulator_job(job, emulator_stack(stack, g, out), out) + "stonewall\n"
                   for (job, stack), g in zip(pairs, guests))
    jf = out / "job.fio"
    jf.write_text(text)
    simulate.simulate_job(jf, data=False)
    return {job.section: read_trace_dir(out / job.section) for job, _ in pairs}


def _overruns(stats: str) -> int:
    return sum(int(line.split(":")[1]) for line in stats.splitlines()
               if line.startswith("overrun:"))


def run_kernel(g: translate.GuestJob, out: Path, progress=None) -> tuple:
    """({dev: records}, seconds) of the job on the real kernel."""
    share = out / "run"
    (share / "out").mkdir(parents=True, exist_ok=True)
    (share / "run.sh").write_text(translate.guest_script(g))
    (share / "job.fio").write_text(translate.guest_job_file(g))
    boot = machine.boot(g.kernel, share)
    if boot.rc != 0:
        tail = (boot.log.strip().splitlines() or ["(no output)"])[-1]
        raise VmRunError(f"job {g.section} failed in the VM ({g.kernel}, exit {boot.rc}): "
                         f"{tail} (log: {share / 'run.log'})")
    stats = (share / "out/trace.stats").read_text()
    if _overruns(stats):
        raise VmRunError(f"job {g.section}: the guest's trace buffer overran "
                         f"({_overruns(stats)} events lost); the job is too long for one "
                         "trace")
    devices = guest_trace.read_members(share / "out/members")
    records = guest_trace.parse((share / "out/trace.txt").read_text(), devices)
    guest_trace.write_dir(records, out)
    return records, boot.seconds


def _header(g: translate.GuestJob, seconds: float, fio_json: Path) -> list:
    lines = [f"- kernel: **{g.kernel}** ({machine.KERNELS[g.kernel]}), chosen by "
             f"{g.kernel_why}; {seconds:.1f} s of wall time for boot + job under TCG "
             "(this machine)",
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


def run(job_file: Path, report: Path, kernel: str = None, sections=None,
        progress=None) -> int:
    say = progress or (lambda s: None)
    try:
        pairs = translate.jobs_of(job_file, sections)
        guests = [translate.translate(job, stack, kernel) for job, stack in pairs]
    except translate.Untranslatable as e:
        print(f"reference --vm: {e}", file=sys.stderr)
        return 2
    try:
        spent = machine.prepare(sorted({g.kernel for g in guests}), say)
        if spent:
            say(f"mdsplit vm: prepared in {spent:.0f} s")
        report.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        say(f"reference --vm: the emulator (simulate) on {job_file}")
        emulated = run_emulator(pairs, guests, report / "emulator")
        say(f"reference --vm: simulate took {time.monotonic() - t0:.1f} s")
        sections_md = []
        identical = True
        for g in guests:
            say(f"reference --vm: job {g.section} on the {g.kernel} kernel (QEMU TCG)")
            out = report / "kernel" / g.section
            records, seconds = run_kernel(g, out, say)
            say(f"reference --vm: job {g.section}: {seconds:.1f} s in the VM")
            devices = diff.diff_devices(records, emulated[g.section])
            identical &= all(d.q.identical and d.d.identical for d in devices)
            sections_md.append(diff.markdown(
                f"job {g.section}", _header(g, seconds, out / "run/out/fio.json"), devices))
    except (machine.VmUnavailable, VmRunError) as e:
        print(f"reference --vm: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # simulate's own refusals
        from harness.simulate import SimulateError
        if isinstance(e, SimulateError):
            print(f"reference --vm: {e}", file=sys.stderr)
            return 1
        raise
    (report / "diff.md").write_text("\n".join(sections_md))
    say(f"reference --vm: {report / 'diff.md'}")
    print(f"reference --vm: {'identical' if identical else 'differences'}: "
          f"{report / 'diff.md'}")
    return 0 if identical else 1
