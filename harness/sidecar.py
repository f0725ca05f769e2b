"""The engine's sidecar statistics file (mdsplit_stats=FILE.json), and
which files a run of a job file writes."""
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Sidecar:
    path: str
    elapsed_ns: int
    devices: list = field(default_factory=list)
    time_scale: float = 1.0   # slow motion factor of the stack (DeviceConfig::time_scale)
    # The stack's io_uring ring (setup_flags, registered_buffer_bytes,
    # fixed_buffer_ios); empty when no member uses io_uring.
    io_uring: dict = field(default_factory=dict)
    # How late the host ran against the model (docs/sidecar-lag.md): the
    # thresholds, host_share, host_bound, suggested_time_scale, the
    # calibration of time_scale = "auto" and each job's lag. Empty from an
    # engine without lag accounting.
    host_lag: dict = field(default_factory=dict)
    clock: str = ""   # "real" (fio with the engine) or "virtual" (harness simulate)

    def device(self, name: str) -> dict:
        for d in self.devices:
            if d["name"] == name:
                return d
        raise KeyError(f"{self.path}: no device {name!r}; have "
                       f"{', '.join(d['name'] for d in self.devices)}")

    @property
    def virtual(self) -> dict:
        return next(d for d in self.devices if d["role"] == "virtual")

    @property
    def members(self) -> list:
        return [d for d in self.devices if d["role"] == "member"]

    @property
    def host_bound(self) -> bool:
        """The host, not the model, limited this run (the engine's verdict)."""
        return bool(self.host_lag.get("host_bound"))

    def lag_note(self) -> str:
        """Why a real-clock figure of this run may be far from the model's,
        in a few words: "host-bound (host share 22 %, p99 lag 412 us;
        time_scale 32 keeps up)", "keeps up (host share 1.2 %)", or "" when
        the sidecar has no lag figures."""
        if not self.host_lag:
            return ""
        share = 100 * float(self.host_lag.get("host_share", 0.0))
        if not self.host_bound:
            return f"keeps up (host share {share:.1f} %)"
        p99 = self.virtual.get("lag", {}).get("total", {}).get("p99_ns", 0) / 1e3
        return (f"host-bound (host share {share:.0f} %, p99 lag {p99:.0f} us; time_scale "
                f"{self.host_lag.get('suggested_time_scale', 0):g} keeps up)")


def load_sidecar(path) -> Sidecar:
    data = json.loads(Path(path).read_text())
    return Sidecar(path=str(path), elapsed_ns=data["elapsed_ns"], devices=data["devices"],
                   time_scale=float(data.get("time_scale", 1.0)),
                   io_uring=data.get("io_uring", {}), clock=data.get("clock", ""),
                   host_lag=data.get("host_lag", {}))


def expected_sidecars(job_file, sections=None, extra_args=(), cwd=None, env=None) -> list:
    """The names of the sidecars a run of job_file writes, as the engine
    names them (stats_path_of): each job's mdsplit_stats, with .N for subjob
    N of numjobs, of the jobs `sections` selects (fio's --section); includes
    read (found from fio's working directory cwd), comments skipped, ${VAR}
    substituted from env (default ours). A --mdsplit_stats=FILE among extra_args (fio's command
    line) counts for every job. Relative names are relative to fio's
    working directory. A job file the parser does not take (fio may still
    run it): each mdsplit_stats= value of its text, as written."""
    from harness.jobfile import JobFileError, parse_job_file
    extra = [a.split("=", 1)[1] for a in extra_args if a.startswith("--mdsplit_stats=")]
    try:
        jobs = parse_job_file(job_file, sections=sections, env=env, cwd=cwd).jobs
    except (JobFileError, ValueError, OSError):
        text = Path(job_file).read_text(errors="replace")
        return list(dict.fromkeys(
            re.findall(r"^[ \t]*mdsplit_stats[ \t]*=[ \t]*([^\s;#]+)", text, re.M) + extra))
    names = []
    for j in jobs:
        for value in ([j.options["mdsplit_stats"]] if j.options.get("mdsplit_stats") else []) + extra:
            names.append(value + (f".{j.subjob}" if j.subjob else ""))
    return list(dict.fromkeys(names))


def _identity(path: Path):
    """What tells a regular file from the one there before (a new inode or
    a new modification), or None when no regular file is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def snapshot(paths) -> dict:
    """{path: its identity now}, for written_since after a run."""
    return {Path(p): _identity(Path(p)) for p in paths}


def written_since(before: dict) -> list:
    """The paths of `before` (a snapshot) that are regular files written
    since it: made or replaced, not left from an earlier run."""
    return [p for p, was in before.items() if (now := _identity(p)) is not None and now != was]
