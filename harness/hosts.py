"""Several machines: a job file run through fio's own client/server mode.

    fio --server=ip:ADDR,PORT            on each host (no authentication: fio's
                                         server runs any job it is sent, so it
                                         must listen only on a trusted network)
    python3 -m harness run JOB.fio --hosts ip:ADDR1,PORT ip:ADDR2,PORT ...

run_hosts() writes one copy of the job file per host, in which
  - mdsplit_config= becomes an absolute path (the TOML, the engine and the
    members' paths must exist at the same path on every server), and
  - mdsplit_stats= / mdsplit_trace= move to RESULTS/<host>/<their value>
    (read from the job's directory, `..` taken out; one outside it under its
    whole path), where RESULTS (default: `hosts/` beside the job file, or
    --results-dir) is a directory the hosts share (e.g. NFS at the same
    path), so that each host's sidecars land apart and the harness can read
    them;
  - `include FILE` lines are replaced by FILE's lines (fio's server parses
    an include's file name as job text);
and runs `fio --client=HOST1 JOB.HOST1 --client=HOST2 JOB.HOST2 ...` (the
job file's contents are sent to the servers; each server resolves other
relative paths against its own working directory). fio's JSON groups the
results per host in `client_stats` (with `hostname` and `port`), plus an
"All clients" entry per group; MultiHostResult keeps them per host, with
each host's sidecars, and sums the totals. Extra `--option=value` arguments
that are fio job options are appended to every job section of the copies
(fio's client does not forward job options given on its command line).

The fio servers the tests start on this machine (loopback ports, or two
network namespaces joined by a veth pair) are tests/py/fio_servers.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.fio_runner import FioError, FioResult, json_output_file, launch_fio
from harness.jobfile import JobFileError, inline_includes
from harness.sidecar import expected_sidecars, load_sidecar, snapshot, written_since

DEFAULT_PORT = 8765
# Seconds the fio client gets, after ^C or a timeout, to stop the servers'
# jobs (its SIGINT handler sends each FIO_NET_CMD_QUIT) before it is killed.
QUIT_GRACE = 15.0
# Options of fio's front end (the client itself), kept on its command line.
LOCAL_OPTIONS = {"eta", "eta-newline", "eta-interval", "status-interval", "debug", "terse-version",
                 "append-terse", "minimal", "bandwidth-log", "parse-only", "warnings-fatal",
                 "max-jobs", "aux-path", "trigger-file", "trigger-timeout", "trigger",
                 "trigger-remote", "inflate-log", "merge-blktrace-only", "output-format", "output"}
PATH_KEYS_ABSOLUTE = ("mdsplit_config",)
PATH_KEYS_PER_HOST = ("mdsplit_stats", "mdsplit_trace")


class HostsUsageError(FioError):
    """A bad argument of run_hosts (job file, hosts, results directory,
    section): the command line's fault, `run` exits 2."""

    def __init__(self, message):
        super().__init__(message, 2, "")


# --- host strings -----------------------------------------------------------------

@dataclass
class HostSpec:
    raw: str          # as given (what --client= receives)
    kind: str         # ip | ip6 | sock
    host: str         # address, name or socket path
    port: int         # 0 for sockets

    @property
    def tag(self) -> str:
        """A directory name for this host's results."""
        base = Path(self.host).name if self.kind == "sock" else self.host
        s = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("_") or "host"
        return f"{s}-{self.port}" if self.port else s

    def __str__(self) -> str:
        return self.raw


def parse_host(s: str) -> HostSpec:
    """fio's server strings: HOST, HOST,PORT, ip:HOST,PORT, ip4:..., ip6:ADDR,PORT,
    sock:PATH (the format --server and --client take)."""
    s = s.strip()
    if not s:
        raise ValueError("empty host")
    kind, rest = "ip", s
    m = re.match(r"^(ip|ip4|ip6|sock):(.*)$", s)
    if m:
        kind, rest = ("ip" if m.group(1) == "ip4" else m.group(1)), m.group(2)
    if kind == "sock":
        return HostSpec(s, "sock", rest, 0)
    host, port = rest, DEFAULT_PORT
    if "," in rest:
        host, _, p = rest.rpartition(",")
        if not p.isdigit() or not 0 < int(p) < 65536:
            raise ValueError(f"{s}: bad port {p!r}")
        port = int(p)
    if not host:
        raise ValueError(f"{s}: no host")
    return HostSpec(s, kind, host, port)


# --- job file copies ----------------------------------------------------------------

def _is_job_option(key: str) -> bool:
    return key not in LOCAL_OPTIONS


def split_args(args) -> tuple:
    """(front-end args, {job option: value}) from extra fio arguments."""
    local, job_opts = [], {}
    for a in args:
        m = re.match(r"^--([A-Za-z0-9_-]+)(?:=(.*))?$", a)
        if m and _is_job_option(m.group(1)) and m.group(2) is not None:
            job_opts[m.group(1)] = m.group(2)
        else:
            local.append(a)
    return local, job_opts


def _host_relative(p: Path, job_dir: Path) -> Path:
    """Where a sidecar or trace path goes below a host's results directory:
    the path (relative ones from the job's directory, `..` taken out as the
    path is read, lexically) relative to the job's directory when it is
    below it, else from the root. It never starts with `..`, so a host's
    copy always stays below that host's directory."""
    job_dir = Path(os.path.normpath(Path(job_dir).resolve()))
    full = Path(os.path.normpath(job_dir / p))
    if full.is_relative_to(job_dir):
        return full.relative_to(job_dir)
    return full.relative_to("/")


def rewrite_job(text: str, job_dir: Path, host_dir: Path, extra: dict = None) -> str:
    """The job file for one host: mdsplit_config absolute, sidecars and
    traces under host_dir, `extra` options appended to every job section."""
    out, sections = [], []
    job_dir, host_dir = Path(job_dir), Path(host_dir)

    def rewrite(line: str) -> str:
        m = re.match(r"^(\s*)([A-Za-z0-9_]+)\s*=\s*(\S+)(.*)$", line)
        if m and m.group(2) in PATH_KEYS_ABSOLUTE + PATH_KEYS_PER_HOST:
            key, val = m.group(2), m.group(3)
            p = Path(val)
            if key in PATH_KEYS_ABSOLUTE:
                new = p if p.is_absolute() else (job_dir / p).resolve()
            else:
                new = host_dir / _host_relative(p, job_dir)
            return f"{m.group(1)}{key}={new}{m.group(4)}"
        return line

    def close_section():
        if sections and sections[-1] != "global" and extra:
            out.extend(rewrite(f"{k}={v}") for k, v in extra.items())

    for line in text.splitlines():
        stripped = line.strip()
        sec = re.match(r"^\[([^\]]+)\]", stripped)
        if sec:
            close_section()
            sections.append(sec.group(1).strip())
            out.append(line)
            continue
        out.append(rewrite(line))
    close_section()
    return "\n".join(out) + "\n"


# --- the result ---------------------------------------------------------------------

@dataclass
class HostResult:
    host: str                 # as given
    tag: str                  # its results directory name
    job_file: str             # the copy run on it
    jobs: list = field(default_factory=list)        # its client_stats entries
    sidecars: dict = field(default_factory=dict)    # relative path -> Sidecar
    missing_sidecars: list = field(default_factory=list)

    def job(self, name: str) -> dict:
        for j in self.jobs:
            if j["jobname"] == name:
                return j
        raise KeyError(f"no job {name!r} from host {self.host}")


@dataclass
class MultiHostResult(FioResult):
    hosts: dict = field(default_factory=dict)       # host (as given) -> HostResult
    totals: list = field(default_factory=list)      # fio's "All clients" entries
    results_dir: str = ""

    @property
    def jobs(self) -> list:
        """Every host's job entries (each carries `hostname` and `port`)."""
        return [j for h in self.hosts.values() for j in h.jobs]

    def job(self, name: str, host: str = None) -> dict:
        if host is not None:
            return self.hosts[host].job(name)
        return super().job(name)

    def total(self, name: str) -> dict:
        """One job summed over the hosts: IOPS, bandwidth, I/Os, errors."""
        entries = [j for j in self.jobs if j["jobname"] == name]
        if not entries:
            raise KeyError(f"no job {name!r} in {self.job_file}")
        out = {"jobname": name, "hosts": len(entries), "error": sum(j["error"] for j in entries)}
        for d in ("read", "write", "trim"):
            out[d] = {k: sum(j[d][k] for j in entries)
                      for k in ("iops", "bw", "bw_bytes", "io_bytes", "total_ios")}
        return out


def _client_json(text: str) -> dict:
    """fio's JSON from a client run (text lines of the servers come first)."""
    m = re.search(r"^\{", text, re.M)
    return json.loads(text[m.start():]) if m else {}


def _match_host(entry: dict, specs) -> HostSpec | None:
    name, port = entry.get("hostname"), entry.get("port")
    for s in specs:
        if s.host == name and (s.port == port or s.kind == "sock"):
            return s
    same = [s for s in specs if s.host == name]
    return same[0] if len(same) == 1 else None


def _first_error(text: str) -> str:
    """The most telling line: the engine's, else fio's, else the first."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for key in ("mdsplit:", "fio: ", "error"):
        for l in lines:
            if key in l:
                return l
    return lines[0] if lines else "(no message)"


def run_hosts(job_file, hosts, args=(), cwd=None, results_dir=None, timeout=None, fio="fio",
              check=True, client_netns: str = None, sections=None) -> MultiHostResult:
    """Runs job_file on every fio server in `hosts` through fio's
    client/server mode; see the module docstring. client_netns runs the
    client inside that network namespace (`ip netns exec`). sections (and
    any --section= in args): only those jobs, as fio's --section, given to
    each --client (fio's front end would not pass it on). Bad arguments
    raise HostsUsageError."""
    job_file = Path(job_file).resolve()
    if not job_file.is_file():
        raise HostsUsageError(f"{job_file}: no such job file")
    specs = []
    for h in hosts:
        try:
            specs.append(parse_host(h))
        except ValueError as e:
            raise HostsUsageError(f"--hosts: {e}") from None
    if not specs:
        raise HostsUsageError("--hosts: no hosts given")
    section_args = [f"--section={n}" for n in sections or []] + \
        [a for a in args if a.startswith("--section=")]
    args = [a for a in args if not a.startswith("--section=")]
    tags = {}
    for s in specs:
        t, i = s.tag, 2
        while t in tags.values():
            t, i = f"{s.tag}-{i}", i + 1
        tags[s.raw] = t
    cwd = Path(cwd).absolute() if cwd else job_file.parent
    results = Path(results_dir).resolve() if results_dir else job_file.parent / "hosts"
    local, job_opts = split_args(args)
    try:
        # fio's server cannot read an `include` (it parses the file's name
        # as job text): the copies carry them inline, rewritten as the rest.
        text = inline_includes(job_file, cwd)
    except JobFileError as e:
        raise HostsUsageError(str(e).removeprefix("run: ")) from None
    host_jobs, expected = {}, {}
    wanted = [a.split("=", 1)[1] for a in section_args]
    for s in specs:
        d = results / tags[s.raw]
        try:
            d.mkdir(parents=True, exist_ok=True)
            hj = d / job_file.name
            hj.write_text(rewrite_job(text, job_file.parent, d, job_opts))
            # The sidecars this copy writes, by their exact names (below d):
            # one left there by an earlier run is removed, nothing else.
            names = [Path(n) for n in expected_sidecars(hj, wanted or None, cwd=cwd)]
            for p in names:
                if p.is_relative_to(d) and (p.is_symlink() or p.is_file()):
                    p.unlink()
            expected[s.raw] = snapshot(p for p in names if p.is_relative_to(d))
        except OSError as e:
            raise HostsUsageError(
                f"--results-dir {results}: cannot write {e.filename or d} ({e.strerror}); "
                "allowed: a writable directory the hosts share (default hosts/ beside the "
                "job file)") from None
        host_jobs[s.raw] = hj
    with json_output_file() as out_path:
        cmd = (["ip", "netns", "exec", client_netns] if client_netns else []) + \
            [fio, "--output-format=json", f"--output={out_path}", *local]
        for s in specs:
            cmd += [f"--client={s.raw}", *section_args, str(host_jobs[s.raw])]
        try:
            # On ^C or a timeout the client asks the servers to stop their
            # jobs (QUIT_GRACE), which killing it alone would leave running.
            proc = launch_fio(cmd, cwd, timeout, quit_grace=QUIT_GRACE)
        except subprocess.TimeoutExpired:
            raise FioError(f"fio {job_file.name} on {', '.join(map(str, specs))}: no result "
                           f"after {timeout:g} s", -1, "") from None
        except FileNotFoundError as e:
            raise FioError(f"cannot run fio: {e}", 127, "") from None
        raw = out_path.read_text() if out_path.exists() else ""
    stderr = proc.stderr
    try:
        data = _client_json(raw)
    except ValueError:
        data = {}
    entries = data.get("client_stats", [])
    # Server-side messages (fio's, the engine's `mdsplit:` lines) come back as
    # text lines "<hostname> ..." before the JSON.
    jm = re.search(r"^\{", raw, re.M)
    text_part = raw[:jm.start()] if jm else raw
    if check and (proc.returncode != 0 or not entries):
        raise FioError(f"fio {job_file.name} on {', '.join(map(str, specs))} exited "
                       f"{proc.returncode}: {_first_error(stderr + text_part)}",
                       proc.returncode or 1, stderr + text_part)
    result = MultiHostResult(str(job_file), proc.returncode, data, stderr + text_part,
                             results_dir=str(results))
    for s in specs:
        result.hosts[s.raw] = HostResult(s.raw, tags[s.raw], str(host_jobs[s.raw]))
    unmatched = []
    for e in entries:
        if e.get("jobname") == "All clients":
            result.totals.append(e)
            continue
        s = _match_host(e, specs)
        if s is None:
            unmatched.append(e)
        else:
            result.hosts[s.raw].jobs.append(e)
    for e in unmatched:       # same hostname on several ports, no port in the JSON
        for h in result.hosts.values():
            if not h.jobs:
                h.jobs.append(e)
                break
    for s in specs:
        h = result.hosts[s.raw]
        d = results / h.tag
        found = written_since(expected[s.raw])
        h.missing_sidecars = [str(p) for p in expected[s.raw] if p not in found]
        for p in found:
            rel = str(p.relative_to(d))
            h.sidecars[rel] = load_sidecar(p)
            result.sidecars[f"{s.raw}:{rel}"] = h.sidecars[rel]
    return result


def summary(result: MultiHostResult) -> dict:
    """What `python3 -m harness run --hosts` prints: per host and in total."""
    def job_row(j):
        return {"name": j["jobname"], "read_iops": j["read"]["iops"], "write_iops": j["write"]["iops"],
                "read_bw_kib": j["read"]["bw"], "write_bw_kib": j["write"]["bw"], "errors": j["error"]}

    def side(s):
        return {d["name"]: {"r_s": d["r_s"], "w_s": d["w_s"], "pct_util": d["pct_util"]}
                for d in s.devices}
    names = list(dict.fromkeys(j["jobname"] for j in result.jobs))
    return {
        "job_file": result.job_file,
        "results_dir": result.results_dir,
        "hosts": {h.host: {"jobs": [job_row(j) for j in h.jobs],
                           "sidecars": {p: side(s) for p, s in h.sidecars.items()},
                           **({"missing_sidecars": h.missing_sidecars} if h.missing_sidecars else {})}
                  for h in result.hosts.values()},
        "total": [{"name": n, "hosts": t["hosts"], "read_iops": t["read"]["iops"],
                   "write_iops": t["write"]["iops"], "read_bw_kib": t["read"]["bw"],
                   "write_bw_kib": t["write"]["bw"], "errors": t["error"]}
                  for n in names for t in [result.total(n)]],
    }
