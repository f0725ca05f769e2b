"""Runs fio on a job file and gathers fio's JSON and the engine's sidecars
into one result object."""
import json
import os
import re
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.sidecar import load_sidecar


class FioError(RuntimeError):
    def __init__(self, message, returncode, stderr):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


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
        return [l for l in self.stderr.splitlines() if l.startswith("mdsplit:")]

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


def _sidecar_paths(job_file: Path, extra_args) -> list:
    """mdsplit_stats= values named in the job file or on the command line."""
    text = job_file.read_text() + "\n" + "\n".join(extra_args)
    return re.findall(r"mdsplit_stats\s*=\s*(\S+)", text)


def fio_environment() -> dict:
    """fio's environment: ours, plus LD_PRELOAD=$MDSPLIT_FIO_PRELOAD when set
    (a sanitizer runtime, e.g. libtsan.so, for an instrumented engine loaded
    by Debian's uninstrumented fio; it must not go into Python itself)."""
    env = dict(os.environ)
    if env.get("MDSPLIT_FIO_PRELOAD"):
        env["LD_PRELOAD"] = env["MDSPLIT_FIO_PRELOAD"]
    return env


def run_fio(job_file, args=(), cwd=None, check=True, timeout=None,
            fio="fio", hosts=None, prefix=(), sidecars=True) -> FioResult:
    """The one place the harness starts fio (`run`, `run --hosts`,
    `reference`, the experiments): `[prefix] fio --output-format=json [args]
    job_file` in the job file's directory (job files use relative paths),
    fio's JSON plus every sidecar it wrote (sidecars=False: none looked for,
    for fio's own engines). prefix: a command that execs fio (e.g. the
    kernel reference's cgroup wrapper). With hosts, fio's client/server mode
    (--client=HOST each, harness/hosts.py builds the per-host job copies).
    A failed fio (check) or a timeout raises FioError with fio's first
    error line."""
    if hosts:
        from harness.hosts import run_hosts
        return run_hosts(job_file, hosts, args=args, cwd=cwd, timeout=timeout, fio=fio,
                         check=check)
    job_file = Path(job_file).resolve()
    cwd = Path(cwd) if cwd else job_file.parent
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
        _gather_sidecars(result, job_file, args, cwd)
    return result


@contextmanager
def json_output_file():
    """A new empty tmpXXXX.json in the temp directory for fio's --output,
    removed when the block ends, however it ends: normally, on an error or
    a timeout, on ^C (and on SIGTERM where the caller turns it into
    KeyboardInterrupt, as the kernel references do). launch_fio's
    subprocess.run has killed fio (SIGKILL) by then, so fio cannot write
    it again."""
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    path = Path(name)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def launch_fio(cmd, cwd=None, timeout=None) -> subprocess.CompletedProcess:
    """The fio process itself, for every caller (run_fio above, the
    client/server mode of harness/hosts.py, one-off probes): captured
    output, fio_environment()."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=fio_environment())


def _gather_sidecars(result, job_file, args, cwd):
    """The sidecars the run wrote. A file under a sidecar's name that is no
    sidecar is passed over when fio failed (the engine refused to replace
    it: a refused output is not the run's), and is an error otherwise."""
    for rel in _sidecar_paths(job_file, args):
        base = (cwd / rel)
        for p in sorted(base.parent.glob(base.name + "*")) if base.parent.exists() else []:
            if p.suffix == ".json" or re.search(r"\.json\.\d+$", p.name):
                try:
                    sidecar = load_sidecar(p)
                except (ValueError, KeyError, TypeError) as e:
                    if result.returncode != 0:
                        continue
                    raise RuntimeError(f"{p}: not an mdsplit sidecar ({type(e).__name__}: {e})") \
                        from None
                result.sidecars[str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p)] = \
                    sidecar


def run_simulated(job_file, sections=None, seed=None, env=None, data=True) -> FioResult:
    """The job file on the virtual clock (harness/simulate.py), as a
    FioResult like run_fio's: fio's JSON shape plus the sidecars it wrote."""
    from harness.simulate import simulate_job
    job_file = Path(job_file).resolve()
    fio_json = simulate_job(job_file, sections=sections, seed=seed, env=env, data=data)
    result = FioResult(str(job_file), 0, fio_json, "")
    _gather_sidecars(result, job_file, [], job_file.parent)
    return result
