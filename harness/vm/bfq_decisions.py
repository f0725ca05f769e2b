"""BFQ's idling and injection decisions on the real 6.12 kernel beside the
emulator's, counted per second of the same groups case (issue 39 item 4).

6.12's bfq logs no message when it arms the idle timer or injects
(block/bfq-iosched.c: bfq_arm_slice_timer() and
bfq_choose_bfqq_for_injection() have no bfq_log_bfqq()), and both are
static functions the compiler inlines (the debian-6.12 build cannot place
a kprobe on either: the run lists them in probes.missing). So the guest
traces what they do, with the tracepoints and kprobes of the cached
debian-6.12 build (CONFIG_KPROBE_EVENTS=y):

  arm        timer:hrtimer_start of bfq_idle_slice_timer: the only start of
             bfqd->idle_slice_timer is bfq_arm_slice_timer(), called from
             bfq_completed_request() when the in-service queue must idle
  idle_fire  timer:hrtimer_expire_entry of that timer (and a kprobe on
             bfq_idle_slice_timer): the queue sent nothing in time
  inject     block:block_rq_issue of another job's request while the
             in-service queue idles: bfq_select_queue() injecting
             (bfq_choose_bfqq_for_injection()). Each job reads a region
             of its own, so a sector names its job; the in-service job is
             the one whose completion armed the timer, and the idle ends
             at its next request, the timer's expiry or an expiration
             (the guest prints timer pointers hashed as ____ptrval____
             under TCG, so hrtimer_cancel cannot be matched)
  expire     kprobe bfq_bfqq_expire reason=$arg4: each expiration with its
             reason (enum bfqq_expiration: 0 too idle, 1 budget timeout,
             2 budget exhausted, 3 no more requests, 4 preempted)
  issue      block:block_rq_issue: every request the device gets
  waker      bfq_check_waker()'s bfq_log_bfqq() "set waker" messages
             through the blk tracer: queues bfq_select_queue() may inject
             from outside bfq_choose_bfqq_for_injection()
  out of turn  every request of another job than the queue in service
             (service_split(), bfq's own "set_in_service_queue" /
             "expire" messages): injection also while the in-service
             queue's own request is in flight, which `inject` cannot see

The emulator's side is the same case (harness/vm/groups.py's stack and
job) with the engine's bfq sidecar (engine/core/block/bfq_stats.cpp:
idle_periods, idle_timeouts, injected, dispatches, expirations). Timing
under TCG is not the device's (groups.py), so the comparison is of which
decisions happen and their rates per request, not of absolute rates.
"""
from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.vm import groups, machine, reference

# (name, kprobe_events line)
PROBES = [
    ("bfq_arm_slice_timer", "p:bfqarm bfq_arm_slice_timer"),
    ("bfq_choose_bfqq_for_injection", "r:bfqinj bfq_choose_bfqq_for_injection ret=$retval"),
    ("bfq_idle_slice_timer", "p:bfqidle bfq_idle_slice_timer"),
    ("bfq_bfqq_expire", "p:bfqexp bfq_bfqq_expire reason=$arg4:s32"),
]
EVENTS = ["block/block_rq_issue", "block/block_rq_complete", "timer/hrtimer_start",
          "timer/hrtimer_cancel", "timer/hrtimer_expire_entry"]
EXPIRATIONS = ["too_idle", "budget_timeout", "budget_exhausted", "no_more_requests",
               "preempted"]

CASES = [
    # Asymmetric: two groups of unequal weights with pending requests
    # (bfq_asymmetric_scenario(): num_groups_with_pending_reqs > 1), so
    # bfq_better_to_idle() idles for service guarantees. The readers start
    # 250 ms apart as seed 004's writers did: started together, bfq
    # merges each group's queues into one at creation
    # (bfq_do_or_sched_stable_merge() -> bfq_do_early_stable_merge(),
    # queues created within bfq_burst_interval, 180 ms), which the
    # emulator does not model and the thread's set-up avoided.
    groups.GroupCase("bfq-2groups-100x2-400x2",
                     (("g100", 100), ("g100", 100), ("g400", 400), ("g400", 400)),
                     stagger_ms=250),
    # Symmetric: seed 004's non-root shape under the fixed counting (6.12),
    # one non-root group of equal-weight readers: one group with pending
    # requests, no asymmetric scenario.
    groups.GroupCase("bfq-1group-200x4",
                     (("g200", 200), ("g200", 200), ("g200", 200), ("g200", 200)),
                     stagger_ms=250),
]


def trace_setup(out: str) -> list:
    T = "/sys/kernel/tracing"
    s = [f"T={T}", "echo 0 > $T/tracing_on", "echo 16384 > $T/buffer_size_kb",
         f": > {out}/probes.missing"]
    for name, line in PROBES:
        s.append(f"echo '{line}' >> $T/kprobe_events || echo {name} >> {out}/probes.missing")
    s += ["echo 1 > $T/events/kprobes/enable",
          ] + [f"echo 1 > $T/events/{e}/enable" for e in EVENTS] + [
          # bfq's own bfq_log_bfqq() messages ("set waker ...") through the
          # blk tracer (CONFIG_BLK_DEV_IO_TRACE)
          "echo blk > $T/current_tracer", "echo 1 > /sys/block/m0/trace/enable",
          "echo > $T/trace", "echo 1 > $T/tracing_on"]
    return s


def trace_collect(out: str) -> list:
    return ["echo 0 > $T/tracing_on", f"cat $T/trace > {out}/trace.txt",
            "echo 0 > /sys/block/m0/trace/enable", "echo nop > $T/current_tracer",
            f"cat $T/per_cpu/cpu0/stats > {out}/trace.stats",
            "echo 0 > $T/events/kprobes/enable",
            ] + [f"echo 0 > $T/events/{e}/enable" for e in EVENTS] + [
            "echo > $T/kprobe_events"]


def guest_script(case: groups.GroupCase, root: str) -> str:
    """groups.guest_script with the probes around fio (after the scheduler
    is set, so bfq's module is loaded)."""
    out = f"{root}/out"
    lines = groups.guest_script(case, root).splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("fio "))
    lines[i:i + 1] = trace_setup(out) + [lines[i]] + trace_collect(out)
    return "\n".join(lines) + "\n"


_EVENT = re.compile(r"\s(\d+\.\d+): (\w+): (.*)$")
_SECTOR = re.compile(r"\) (\d+) \+ \d+")


def _job(rest: str, region_sectors: int):
    m = _SECTOR.search(rest)
    return int(m.group(1)) // region_sectors if m else None


def count_trace(text: str, region_bytes: int) -> dict:
    """Counts of each decision in a guest trace and the traced span in
    seconds. region_bytes: each job's region (its sectors name it)."""
    region = region_bytes // 512
    n = {k: 0 for k in ("arm", "idle_fire", "inject", "issue", "probe_idle_fire")}
    n["expirations"] = {e: 0 for e in EXPIRATIONS}
    # bfq_check_waker()'s messages (blk tracer lines, not events)
    n["waker_set"] = len(re.findall(r" set waker ", text))
    n["waker_tentative"] = len(re.findall(r" set tentative waker ", text))
    armed_for = None        # the in-service job while the timer is armed
    last_done = None        # the job of the last completed request
    first = last = None
    for line in text.splitlines():
        m = _EVENT.search(line)
        if not m:
            continue
        t, event, rest = float(m.group(1)), m.group(2), m.group(3)
        if event == "hrtimer_start" and "function=bfq_idle_slice_timer" in rest:
            n["arm"] += 1
            armed_for = last_done
        elif event == "hrtimer_expire_entry" and "function=bfq_idle_slice_timer" in rest:
            n["idle_fire"] += 1
            armed_for = None
        elif event == "block_rq_complete":
            last_done = _job(rest, region)
        elif event == "block_rq_issue":
            n["issue"] += 1
            job = _job(rest, region)
            if armed_for is not None and job != armed_for:
                n["inject"] += 1
            elif job == armed_for:   # its next request: bfq_rq_enqueued() ends the idle
                armed_for = None
        elif event == "bfqidle":
            n["probe_idle_fire"] += 1
        elif event == "bfqexp":
            armed_for = None
            r = int(re.search(r"reason=(-?\d+)", rest).group(1))
            name = EXPIRATIONS[r] if 0 <= r < len(EXPIRATIONS) else str(r)
            n["expirations"][name] = n["expirations"].get(name, 0) + 1
        else:
            continue
        first = t if first is None else first
        last = t
    n["seconds"] = (last - first) if first is not None else 0.0
    return n


_BFQQ = re.compile(r"\s(\d+\.\d+): .* m   N bfq(\d+|SHARED-)[SA] (set_in_service_queue|expire \()")
_COMM = re.compile(r"^\s*\S+-(\d+)\s+\[")


def service_split(text: str, region_bytes: int) -> dict:
    """Whose requests the device got while which queue was in service, from
    bfq's own messages through the blk tracer: "set_in_service_queue"
    (bfq_set_in_service_queue()) starts a queue's service, "expire (R, ..."
    (bfq_bfqq_expire()) ends it. A sync queue is named by its process's pid
    (bfqPIDS); the process's job is the one whose sectors it issues most in
    its own context; queues bfq merged (bfq_merge_bfqqs()) are all "shared"
    (bfqSHARED-S names none of them apart). Returns {"seconds": {job: seconds in service},
    "issued": {in-service job: {job: requests issued}}} (in-service job
    None: no queue in service)."""
    region = region_bytes // 512
    own = {}                 # pid -> {job: issues in that pid's context}
    spans, issues = [], []   # (pid, start, end); (job, in-service pid)
    cur = start = None
    for line in text.splitlines():
        if b := _BFQQ.search(line):
            t, pid, what = float(b.group(1)), b.group(2), b.group(3)
            if what == "set_in_service_queue":
                cur, start = pid, t
            elif pid == cur:
                spans.append((cur, start, t))
                cur = None
        elif (m := _EVENT.search(line)) and m.group(2) == "block_rq_issue":
            job = _job(m.group(3), region)
            issues.append((job, cur))
            if c := _COMM.search(line):
                d = own.setdefault(c.group(1), {})
                d[job] = d.get(job, 0) + 1
    job_of = {pid: max(d, key=d.get) for pid, d in own.items()}
    job_of["SHARED-"] = "shared"
    seconds, issued = {}, {}
    for pid, a, b in spans:
        j = job_of.get(pid, f"pid {pid}")
        seconds[j] = seconds.get(j, 0.0) + (b - a)
    for job, pid in issues:
        d = issued.setdefault(None if pid is None else job_of.get(pid, f"pid {pid}"), {})
        d[job] = d.get(job, 0) + 1
    return {"seconds": seconds, "issued": issued}


def guest_think_us(text: str, region_bytes: int) -> int:
    """The guest's think time: the 10th percentile of the time from a job's
    completion to its next issue (the rest waited in bfq behind another
    queue; TCG runs fio's loop at about 0.4 ms)."""
    region = region_bytes // 512
    done, gaps = {}, []
    for line in text.splitlines():
        m = _EVENT.search(line)
        if not m or m.group(2) not in ("block_rq_complete", "block_rq_issue"):
            continue
        t, job = float(m.group(1)), _job(m.group(3), region)
        if m.group(2) == "block_rq_complete":
            done[job] = t
        elif job in done:
            gaps.append(t - done.pop(job))
    gaps.sort()
    return round(gaps[len(gaps) // 10] * 1e6) if gaps else 0


def out_of_turn(split: dict) -> int:
    """Requests the device got from another job than the one in service
    (service_split()'s "issued"; a merged queue's jobs count as its own)."""
    return sum(n for served, d in split["issued"].items() if served not in (None, "shared")
               for job, n in d.items() if job != served)


def own_queue_issues(split: dict) -> int:
    """Requests the device got while one job's own queue was in service
    (not a queue bfq merged, bfq_merge_bfqqs(), and not with no queue in
    service): what out_of_turn() is a share of."""
    return sum(n for served, d in split["issued"].items() if served not in (None, "shared")
               for n in d.values())


def emulator_counts(bfq: dict, seconds: float, think_us: int = 0) -> dict:
    """The emulator's sidecar bfq totals in count_trace()'s names: inject
    counts what the guest's trace can see (another queue's request while
    the in-service queue idles with its timer armed), out_of_turn every
    request dispatched while another queue was in service (also while the
    in-service queue's own request is in flight: bfq_select_queue()'s
    `dispatched != 0 && bfq_better_to_idle()` branch)."""
    wakers = sum(q.get("wakers_set", 0) for q in bfq.get("queues", []))
    return {"arm": bfq["idle_periods"], "idle_fire": bfq["idle_timeouts"],
            "inject": bfq["injected_idle"], "out_of_turn": bfq["injected"],
            "waker_set": wakers, "waker_injected": bfq["injected_waker"],
            "issue": bfq["dispatches"],
            "expirations": dict(bfq["expirations"]), "seconds": seconds,
            "asymmetric": f'{bfq["asymmetric_true"]}/{bfq["asymmetric_checks"]}',
            "hw_tag": bfq["hw_tag"], "think_us": think_us}


def _split_text(split: dict) -> str:
    """service_split() on a line of its own."""
    def jobs(d):
        return " ".join(f"j{j} {v:.2f}" if isinstance(v, float) else f"j{j} {v}"
                        for j, v in sorted(d.items(), key=str))
    by = "; ".join(f"j{j}: {jobs(d)}" for j, d in sorted(split["issued"].items(), key=str)
                   if j is not None)
    return (f"\n      seconds in service: {jobs(split['seconds'])}; "
            f"requests issued while in service: {by}")


@dataclass
class Decisions:
    case: groups.GroupCase
    kernel: dict
    emulator: dict
    missing: list = field(default_factory=list)

    @staticmethod
    def per_request(c: dict, key: str) -> float:
        return c[key] / c["issue"] if c["issue"] else 0.0

    def line(self) -> str:
        def side(c):
            rate = c["issue"] / c["seconds"] if c["seconds"] else 0.0
            exp = ", ".join(f"{k} {v}" for k, v in c["expirations"].items() if v)
            if "waker_tentative" in c:
                exp += f"; wakers set {c['waker_set']} (tentative {c['waker_tentative']})"
            elif "waker_set" in c:
                exp += (f"; wakers set {c['waker_set']}, dispatched for a waker/woken queue "
                        f"{c['waker_injected']}")
            split = _split_text(c["split"]) if "split" in c else ""
            return (f"think {c.get('think_us', 0)} us, {c['issue']} requests ({rate:.0f}/s), arm idle {c['arm']} "
                    f"({self.per_request(c, 'arm'):.2f}/req), idle timer fired {c['idle_fire']}, "
                    f"injected {c['inject']} ({self.per_request(c, 'inject'):.2f}/req), "
                    f"out of turn {c['out_of_turn']} ({self.per_request(c, 'out_of_turn'):.2f}/req); "
                    f"expirations: {exp or 'none'}{split}")
        miss = f" (kprobes not placed: {', '.join(self.missing)})" if self.missing else ""
        return (f"{self.case.name}:\n    kernel   {side(self.kernel)}{miss}\n"
                f"    emulator {side(self.emulator)}")


def kernel_side(cases, share: Path, kernel: str = "debian-6.12", progress=None) -> dict:
    """Every case in one boot of `kernel`: {case name: count_trace()}, and
    the kprobes the kernel could not place."""
    say = progress or (lambda s: print(s, file=sys.stderr))
    machine.prepare([kernel], say)
    groups.write_share(cases, share, guest_script)
    say(f"bfq decisions: {len(cases)} case(s) on the {kernel} kernel (QEMU TCG, tracepoints)")
    t0 = time.monotonic()
    boot = machine.boot(kernel, share)
    if boot.rc != 0:
        raise reference.boot_error("bfq decisions", kernel, boot, share / "run.log")
    say(f"bfq decisions: VM {time.monotonic() - t0:.0f} s")
    out = {}
    for c in cases:
        text = (share / c.name / "out/trace.txt").read_text()
        region = groups.device_mb(c) * groups.MiB // len(c.jobs)
        counts = count_trace(text, region)
        counts["think_us"] = guest_think_us(text, region)
        counts["split"] = service_split(text, region)
        counts["out_of_turn"] = out_of_turn(counts["split"])
        out[c.name] = (counts, (share / c.name / "out/probes.missing").read_text().split())
    return out


def emulator_side(case: groups.GroupCase, emu: Path, think_us: int = 0) -> dict:
    """The same case on the virtual clock: the bfq sidecar's counts.
    think_us: each job's think time (fio thinktime), the guest's."""
    from harness import simulate
    emu.mkdir(parents=True, exist_ok=True)
    stack = emu / f"{case.name}.toml"
    stack.write_text(groups.stack_text(case, str((emu / f"{case.name}.img").resolve())))
    stats = (emu / f"{case.name}.stats.json").resolve()
    jf = emu / f"{case.name}.fio"
    jf.write_text(groups.emulator_job(case, stack.resolve(), (emu / case.name).resolve())
                  .replace("[global]\n", f"[global]\nmdsplit_stats={stats}\nthinktime={think_us}\n", 1))
    simulate.simulate_job(jf, data=False)
    bfq = next(d["bfq"] for d in json.loads(stats.read_text())["devices"] if "bfq" in d)
    seconds = case.runtime_s + case.ramp_s + (len(case.jobs) - 1) * case.stagger_ms / 1000
    return emulator_counts(bfq, seconds, think_us)


def run(cases, directory: Path, kernel: str = "debian-6.12", progress=None) -> list:
    """Every case in one boot of `kernel` and on the emulator."""
    got = kernel_side(cases, directory / "kernel", kernel, progress)
    return [Decisions(c, got[c.name][0],
                      emulator_side(c, directory / "emulator", got[c.name][0]["think_us"]),
                      got[c.name][1]) for c in cases]


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="harness vm bfq-decisions", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a directory for the run's files")
    ap.add_argument("--kernel", default="debian-6.12")
    named = {c.name: c for c in CASES + groups.CASES}
    ap.add_argument("--case", action="append", choices=sorted(named),
                    help="a case of this module or of groups.CASES (repeatable; default: this "
                         "module's cases)")
    a = ap.parse_args(argv)
    why = machine.can_run_qemu()
    if why:
        print(f"harness vm bfq-decisions: {why}", file=sys.stderr)
        return 2
    for d in run([named[n] for n in a.case] if a.case else CASES, a.out, a.kernel):
        print(d.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
