"""Runs fio on a job file and gathers fio's JSON and the engine's sidecars
into one result object."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.sidecar import expected_sidecars, load_sidecar, snapshot, written_since


class FioError(RuntimeError):
    def __init__(self, message, returncode, stderr):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


# engine/stack/host_lag.cpp: host_lag_verdict() and TimeScaleCalibration::line().
ENGINE_NOTICE = re.compile(r'mdsplit: [^:]+: (host-bound: |time_scale = "auto": )')

@dataclass
class FioResult:
    job_file: str
    returncode: int
    fio: dict                       # fio's --output-format=json
    stderr: str
    sidecars: dict = field(default_factory=dict)   # path -> Sidecar

    @property
    def jobs(self) -> list:
        return self.fio.get("jobs", [])

    def job(self, name: str) -> dict:
        for j in self.jobs:
            if j["jobname"] == name:
                return j
        raise KeyError(f"no job {name!r} in {self.job_file}")

    def total_ios(self, job: dict) -> int:
        return sum(job[d]["total_ios"] for d in ("read", "write", "trim"))

    def mdsplit_errors(self) -> list:
        """The engine's lines on stderr, less its notices (mdsplit_notices)."""
        return [l for l in self.stderr.splitlines()
                if l.startswith("mdsplit:") and not ENGINE_NOTICE.match(l)]

    def mdsplit_notices(self) -> list:
        """The engine's notices of how this machine kept up with the model:
        the host-bound verdict and the time_scale = "auto" calibration
        (docs/sidecar-lag.md). They describe the run; they are not errors."""
        return [l for l in self.stderr.splitlines() if ENGINE_NOTICE.match(l)]

    @property
    def simulated(self) -> bool:
        """True for a virtual-clock run (`harness simulate`), not real fio."""
        return "mdsplit-simulate" in self.fio


def parse_fio_json(text: str) -> dict:
    """fio's --output-format=json (anything fio printed before the object is
    skipped) or `harness simulate --output-format json`: the same shape, with
    "mdsplit-simulate" in place of "fio version"."""
    start = text.find("{")
    data = json.loads(text[start:]) if start >= 0 else {}
    if data and "jobs" not in data:
        raise ValueError("not fio JSON: no \"jobs\"")
    return data


def sidecar_targets(job_file: Path, args, cwd: Path, env=None) -> dict:
    """A snapshot (harness/sidecar.py) of the sidecars a run of job_file
    with fio arguments args, in cwd, writes: the exact names, as they are
    before the run."""
    sections = [a.split("=", 1)[1] for a in args if a.startswith("--section=")] or None
    return snapshot(cwd / n for n in expected_sidecars(job_file, sections, args, cwd, env))


def fio_environment() -> dict:
    """fio's environment: ours, plus LD_PRELOAD=$MDSPLIT_FIO_PRELOAD when set
    (a sanitizer runtime, e.g. libtsan.so, for an instrumented engine loaded
    by Debian's uninstrumented fio; it must not go into Python itself)."""
    env = dict(os.environ)
    if env.get("MDSPLIT_FIO_PRELOAD"):
        env["LD_PRELOAD"] = env["MDSPLIT_FIO_PRELOAD"]
    return env


def run_fio(job_file, args=(), cwd=None, check=True, timeout=None,
            fio="fio", prefix=(), sidecars=True) -> FioResult:
    """The one place the harness starts fio on this machine (`run`,
    `reference`, the experiments; `run --hosts` is harness/hosts.py, which
    imports this module, never the other way): `[prefix] fio
    --output-format=json [args] job_file` in the job file's directory (job
    files use relative paths), fio's JSON plus every sidecar it wrote
    (sidecars=False: none looked for, for fio's own engines). prefix: a
    command that execs fio (e.g. the kernel reference's cgroup wrapper). A failed fio (check) or a timeout raises FioError with fio's first
    error line. The job file is checked first as `run` checks it (a device
    such as /dev/zero, a FIFO, a file that is not UTF-8 or is over 1 MiB:
    fio would read one forever or block): JobFileError, one line."""
    from harness.jobfile import read_input_text
    read_input_text(job_file, prog="run")
    job_file = Path(job_file).resolve()
    cwd = Path(cwd).absolute() if cwd else job_file.parent
    before = sidecar_targets(job_file, args, cwd) if sidecars else {}
    with json_output_file() as out_path:
        cmd = [*prefix, fio, "--output-format=json", f"--output={out_path}", *args, str(job_file)]
        try:
            proc = launch_fio(cmd, cwd, timeout)
        except subprocess.TimeoutExpired:
            raise FioError(f"fio {job_file.name}: no result after {timeout:g} s", -1, "") from None
        text = out_path.read_text() if out_path.exists() else ""
    stderr = proc.stderr
    if check and proc.returncode != 0:
        lines = [l for l in (stderr + proc.stdout).splitlines() if l.strip()]
        raise FioError(f"fio {job_file.name} exited {proc.returncode}: "
                       + (lines[0] if lines else "(no message)"), proc.returncode, stderr)
    result = FioResult(str(job_file), proc.returncode, parse_fio_json(text), stderr)
    if sidecars:
        _gather_sidecars(result, before, cwd)
    return result


@contextmanager
def json_output_file():
    """A new empty tmpXXXX.json in the temp directory for fio's --output,
    removed when the block ends, however it ends: normally, on an error or
    a timeout, on ^C and on SIGTERM (launch_fio turns it into
    KeyboardInterrupt while fio runs). launch_fio has killed fio and every
    process it forked (kill_fio) by then, so none of them can write it
    again."""
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    path = Path(name)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


# fio's environment carries this variable with a value of its own per run:
# every process of the run has it (fio's job processes are forks of fio,
# each in a session of its own: setsid() in fio's thread_main), which is how
# kill_fio finds them, orphaned or not.
RUN_TOKEN = "MDSPLIT_FIO_RUN"


def launch_fio(cmd, cwd=None, timeout=None, quit_grace=0.0) -> subprocess.CompletedProcess:
    """The fio process itself, for every caller (run_fio above, the
    client/server mode of harness/hosts.py, one-off probes): captured
    output, fio_environment(). On a timeout (subprocess.TimeoutExpired),
    on ^C and on SIGTERM or SIGHUP (turned into KeyboardInterrupt while fio
    runs, in the main thread) fio and every process it forked are killed
    (kill_fio) before the exception goes on: no job process is left
    running or writing. fio runs in a session of its own, so a terminal's
    ^C reaches the harness only, which then does that.

    quit_grace: seconds fio gets to end on its own first, after a SIGINT
    (a client's sig_int() sends each server FIO_NET_CMD_QUIT, which stops
    the jobs running there: killing the client alone would leave them
    running to their end). A second ^C meanwhile kills at once."""
    token = uuid.uuid4().hex
    env = fio_environment()
    env[RUN_TOKEN] = token
    proc = None
    with _signals_as_interrupt():
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env,
                                    start_new_session=True)
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            try:
                if proc is not None and quit_grace > 0 and proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    proc.communicate(timeout=quit_grace)
            except BaseException:
                pass                    # no end in time, or a second ^C: killed below
            kill_fio(proc, token)       # also when the signal came before Popen returned
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@contextmanager
def _signals_as_interrupt(signals=(signal.SIGTERM, signal.SIGHUP)):
    """SIGTERM and SIGHUP raise KeyboardInterrupt for the duration (main
    thread only; a signal the process ignores, as under nohup, stays
    ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    old = {}
    try:
        for s in signals:
            if signal.getsignal(s) is not signal.SIG_IGN:
                old[s] = signal.signal(s, handler)
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _pids_of_run(token: str) -> set:
    """The processes whose environment holds RUN_TOKEN=token."""
    needle = b"\0" + f"{RUN_TOKEN}={token}".encode() + b"\0"
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and _has_token(int(d), needle):
            out.add(int(d))
    return out


def _has_token(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def _signal_run_process(pid: int, signum: int, needle: bytes) -> None:
    """signum to pid if it is a process of the run: the process is pinned
    by a pidfd first, then its environment checked, so that a pid reused
    meanwhile by another process is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    try:
        if not _has_token(pid, needle):
            return
        if fd is not None:
            signal.pidfd_send_signal(fd, signum)
        else:
            os.kill(pid, signum)
    except OSError:
        pass
    finally:
        if fd is not None:
            os.close(fd)


def kill_fio(proc, token: str) -> None:
    """Kills fio (proc: its Popen, or None when it was interrupted while
    starting) and every process of its run (RUN_TOKEN=token in its
    environment: fio's job processes, each in a session of its own, also
    once orphaned), then reaps proc and closes its pipes. Each is stopped
    (SIGSTOP) until no new one turns up, so none forks another unseen, then
    all get SIGKILL."""
    needle = b"\0" + f"{RUN_TOKEN}={token}".encode() + b"\0"
    own = {proc.pid} if proc is not None else set()
    if proc is not None:
        try:
            proc.send_signal(signal.SIGSTOP)
        except OSError:
            pass
    seen = set()
    for _ in range(100):
        new = _pids_of_run(token) - seen - own
        if not new:
            break
        for pid in new:
            _signal_run_process(pid, signal.SIGSTOP, needle)
        seen |= new
    for pid in seen:
        _signal_run_process(pid, signal.SIGKILL, needle)
    if proc is None:
        return
    try:
        proc.kill()                     # not reaped yet: its pid is still its own
    except OSError:
        pass
    for f in (proc.stdout, proc.stderr, proc.stdin):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    proc.wait()


def _gather_sidecars(result, before: dict, cwd: Path):
    """The sidecars the run wrote: of the names it writes (sidecar_targets,
    taken before it), the files it made or replaced; one left from an
    earlier run, or a file that merely starts with a sidecar's name, is not
    the run's. A file the run wrote that is no sidecar is passed over when
    fio failed (a refused output is not the run's), and is an error
    otherwise."""
    for p in written_since(before):
        try:
            sidecar = load_sidecar(p)
        except (ValueError, KeyError, TypeError) as e:
            if result.returncode != 0:
                continue
            raise RuntimeError(f"{p}: not an mdsplit sidecar ({type(e).__name__}: {e})") \
                from None
        result.sidecars[str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p)] = sidecar


def run_simulated(job_file, sections=None, seed=None, env=None, data=True,
                  check=True) -> FioResult:
    """The job file on the virtual clock (harness/simulate.py), as a
    FioResult like run_fio's: fio's JSON shape plus the sidecars it wrote.
    A job that ended in error makes the returncode 1, as fio's exit status;
    with check, that raises FioError, one line naming the first such job,
    as run_fio does for a failed fio."""
    from harness.simulate import simulate_job
    job_file = Path(job_file).resolve()
    before = sidecar_targets(job_file, [f"--section={n}" for n in
                                        ([sections] if isinstance(sections, str) else
                                         sections or [])], job_file.parent, env)
    fio_json = simulate_job(job_file, sections=sections, seed=seed, env=env, data=data)
    failed = [j for j in fio_json.get("jobs", []) if j["jobname"] in fio_json["jobs_in_error"]]
    lines = [f"job {j['jobname']}: error={j['error']} ({os.strerror(j['error'])})" for j in failed]
    if check and failed:
        raise FioError(f"simulate {job_file.name}: {lines[0]}", 1, "\n".join(lines))
    result = FioResult(str(job_file), 1 if failed else 0, fio_json, "\n".join(lines))
    _gather_sidecars(result, before, job_file.parent)
    return result
