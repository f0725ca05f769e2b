"""Several machines: a job file run through fio's own client/server mode.

    fio --server=ip:ADDR,PORT            on each host (no authentication: fio's
                                         server runs any job it is sent, so it
                                         must listen only on a trusted network)
    python3 -m harness run JOB.fio --hosts ip:ADDR1,PORT ip:ADDR2,PORT ...

run_hosts() writes one copy of the job file per host, in which
  - mdsplit_config= becomes an absolute path (the TOML, the engine and the
    members' paths must exist at the same path on every server), and
  - mdsplit_stats= / mdsplit_trace= move to RESULTS/<host>/<their value>,
    where RESULTS (default: `hosts/` beside the job file, or --results-dir)
    is a directory the hosts share (e.g. NFS at the same path), so that each
    host's sidecars land apart and the harness can read them;
and runs `fio --client=HOST1 JOB.HOST1 --client=HOST2 JOB.HOST2 ...` (the
job file's contents are sent to the servers; each server resolves other
relative paths against its own working directory). fio's JSON groups the
results per host in `client_stats` (with `hostname` and `port`), plus an
"All clients" entry per group; MultiHostResult keeps them per host, with
each host's sidecars, and sums the totals. Extra `--option=value` arguments
that are fio job options are appended to every job section of the copies
(fio's client does not forward job options given on its command line).

start_server() / local_servers() start fio servers on this machine for tests:
on 127.0.0.1 with distinct ports, or (root, `ip netns` permitted) in two
network namespaces joined by a veth pair, each a separate "host".
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.fio_runner import FioError, FioResult
from harness.sidecar import load_sidecar

DEFAULT_PORT = 8765
# Options of fio's front end (the client itself), kept on its command line.
LOCAL_OPTIONS = {"eta", "eta-newline", "eta-interval", "status-interval", "debug", "terse-version",
                 "append-terse", "minimal", "bandwidth-log", "parse-only", "warnings-fatal",
                 "max-jobs", "aux-path", "trigger-file", "trigger-timeout", "trigger",
                 "trigger-remote", "inflate-log", "merge-blktrace-only", "output-format", "output"}
PATH_KEYS_ABSOLUTE = ("mdsplit_config",)
PATH_KEYS_PER_HOST = ("mdsplit_stats", "mdsplit_trace")


class HostsUnavailable(RuntimeError):
    """fio servers cannot be started here; str(e) is the one-line reason."""


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
    """Where a sidecar or trace path goes below a host's results directory."""
    if not p.is_absolute():
        return p
    try:
        return p.relative_to(job_dir.resolve())
    except ValueError:
        return p.relative_to("/")


def rewrite_job(text: str, job_dir: Path, host_dir: Path, extra: dict = None) -> str:
    """The job file for one host: mdsplit_config absolute, sidecars and
    traces under host_dir, `extra` options appended to every job section."""
    out, sections = [], []
    job_dir, host_dir = Path(job_dir), Path(host_dir)

    def close_section():
        if sections and sections[-1] != "global" and extra:
            out.extend(f"{k}={v}" for k, v in extra.items())

    for line in text.splitlines():
        stripped = line.strip()
        sec = re.match(r"^\[([^\]]+)\]", stripped)
        if sec:
            close_section()
            sections.append(sec.group(1).strip())
            out.append(line)
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_]+)\s*=\s*(\S+)(.*)$", line)
        if m and m.group(2) in PATH_KEYS_ABSOLUTE + PATH_KEYS_PER_HOST:
            key, val = m.group(2), m.group(3)
            p = Path(val)
            if key in PATH_KEYS_ABSOLUTE:
                new = p if p.is_absolute() else (job_dir / p).resolve()
            else:
                new = host_dir / _host_relative(p, job_dir)
            out.append(f"{m.group(1)}{key}={new}{m.group(4)}")
            continue
        out.append(line)
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
              check=True, client_netns: str = None) -> MultiHostResult:
    """Runs job_file on every fio server in `hosts` through fio's
    client/server mode; see the module docstring. client_netns runs the
    client inside that network namespace (`ip netns exec`)."""
    job_file = Path(job_file).resolve()
    if not job_file.is_file():
        raise FioError(f"{job_file}: no such job file", 2, "")
    specs = []
    for h in hosts:
        try:
            specs.append(parse_host(h))
        except ValueError as e:
            raise FioError(f"--hosts: {e}", 2, "") from None
    if not specs:
        raise FioError("--hosts: no hosts given", 2, "")
    tags = {}
    for s in specs:
        t, i = s.tag, 2
        while t in tags.values():
            t, i = f"{s.tag}-{i}", i + 1
        tags[s.raw] = t
    cwd = Path(cwd) if cwd else job_file.parent
    results = Path(results_dir).resolve() if results_dir else job_file.parent / "hosts"
    local, job_opts = split_args(args)
    text = job_file.read_text()
    host_jobs = {}
    for s in specs:
        d = results / tags[s.raw]
        d.mkdir(parents=True, exist_ok=True)
        for key in PATH_KEYS_PER_HOST:          # no stale sidecars from an earlier run
            for m in re.finditer(rf"^\s*{key}\s*=\s*(\S+)", text, re.M):
                target = d / _host_relative(Path(m.group(1)), job_file.parent)
                if key == "mdsplit_stats":
                    for old in target.parent.glob(target.name + "*") if target.parent.is_dir() else []:
                        if old.is_file():
                            old.unlink()
        hj = d / job_file.name
        hj.write_text(rewrite_job(text, job_file.parent, d, job_opts))
        host_jobs[s.raw] = hj
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        out_path = Path(out.name)
    cmd = (["ip", "netns", "exec", client_netns] if client_netns else []) + \
        [fio, "--output-format=json", f"--output={out_path}", *local]
    for s in specs:
        cmd += [f"--client={s.raw}", str(host_jobs[s.raw])]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        out_path.unlink(missing_ok=True)
        raise FioError(f"fio {job_file.name} on {', '.join(map(str, specs))}: no result after "
                       f"{timeout} s", -1, "") from None
    except FileNotFoundError as e:
        out_path.unlink(missing_ok=True)
        raise FioError(f"cannot run fio: {e}", 127, "") from None
    raw = out_path.read_text() if out_path.exists() else ""
    out_path.unlink(missing_ok=True)
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
        for m in re.finditer(r"^\s*mdsplit_stats\s*=\s*(\S+)", Path(h.job_file).read_text(), re.M):
            base = Path(m.group(1))
            found = [p for p in sorted(base.parent.glob(base.name + "*")) if base.parent.is_dir()
                     and (p.suffix == ".json" or re.search(r"\.json\.\d+$", p.name))]
            if not found:
                h.missing_sidecars.append(str(base))
            for p in found:
                rel = str(p.relative_to(d)) if p.is_relative_to(d) else str(p)
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


# --- local fio servers (tests) ------------------------------------------------------

def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _listening(pid: int, port: int) -> bool:
    """Whether process pid listens on TCP `port` (read in its own network
    namespace, /proc/PID/net/tcp)."""
    for f in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{f}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


@dataclass
class FioServer:
    spec: HostSpec
    pid: int
    pidfile: Path
    netns: str | None = None

    @property
    def client(self) -> str:
        """The --client= string (and --hosts entry) for this server."""
        return self.spec.raw

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def stop(self, wait: float = 5.0) -> None:
        """Stops this server and the per-connection processes it forked
        (SIGTERM, then SIGKILL), by their pids."""
        import signal
        for pid in [self.pid] + _children(self.pid):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break
                end = time.monotonic() + wait
                while time.monotonic() < end and _running(pid):
                    time.sleep(0.05)
                if not _running(pid):
                    break
        self.pidfile.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _children(pid: int) -> list:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if int((p / "stat").read_text().rsplit(") ", 1)[1].split()[1]) == pid:
                    out.append(int(p.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def start_server(address: str = "127.0.0.1", port: int = None, *, netns: str = None,
                 workdir: Path = None, fio: str = "fio", wait: float = 10.0) -> FioServer:
    """`fio --server=ip:ADDRESS,PORT --daemonize=PIDFILE` (inside `netns` when
    given), listening only on ADDRESS; returns once it listens. Raises
    HostsUnavailable with the reason otherwise."""
    if not shutil.which(fio):
        raise HostsUnavailable(f"{fio} is not installed")
    if port is None:
        port = DEFAULT_PORT if netns else free_port(address)
    workdir = Path(workdir or tempfile.mkdtemp(prefix="mdsplit-fio-server-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pidfile = workdir / f"fio-server-{address}-{port}.pid"
    pidfile.unlink(missing_ok=True)
    spec = parse_host(f"ip:{address},{port}")
    cmd = (["ip", "netns", "exec", netns] if netns else []) + \
        [fio, f"--server={spec.raw}", f"--daemonize={pidfile}"]
    r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=30)
    end = time.monotonic() + wait
    pid = None
    while time.monotonic() < end:
        try:
            pid = int(pidfile.read_text().strip())
            break
        except (OSError, ValueError):
            time.sleep(0.05)
    if pid is None:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise HostsUnavailable(f"fio --server={spec.raw} did not start"
                               + (f": {msg[0]}" if msg else f" (exit {r.returncode})"))
    server = FioServer(spec, pid, pidfile, netns)
    while time.monotonic() < end:
        if not server.alive() or _zombie(pid):
            server.stop()
            raise HostsUnavailable(f"fio --server={spec.raw} exited at once "
                                   f"(address in use or not configured?)")
        if _listening(pid, port):
            return server
        time.sleep(0.05)
    server.stop()
    raise HostsUnavailable(f"fio --server={spec.raw} does not listen after {wait:g} s")


# --- network namespaces -------------------------------------------------------------

def _ip(*args, netns=None) -> subprocess.CompletedProcess:
    cmd = ["ip"] + (["netns", "exec", netns, "ip"] if netns else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def netns_reason() -> str:
    """'' when network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root (ip netns needs CAP_SYS_ADMIN)"
    if not shutil.which("ip"):
        return "ip (iproute2) is not installed"
    name = f"mdsplit-probe-{os.getpid()}"
    r = _ip("netns", "add", name)
    if r.returncode != 0:
        return "ip netns add is not permitted: " + (r.stderr.strip() or f"exit {r.returncode}")
    try:
        r = _ip("link", "set", "lo", "up", netns=name)
        if r.returncode != 0:
            return "ip netns exec does not work: " + (r.stderr.strip() or f"exit {r.returncode}")
    finally:
        _ip("netns", "del", name)
    return ""


@dataclass
class NetnsPair:
    names: tuple             # (namespace a, namespace b)
    addresses: tuple         # (address in a, address in b)


@contextmanager
def netns_pair(subnet_octet: int = None):
    """Two network namespaces joined by a veth pair, 10.231.N.1/24 in the
    first and 10.231.N.2/24 in the second; deleted at the end (which
    removes the veth pair too)."""
    reason = netns_reason()
    if reason:
        raise HostsUnavailable(reason)
    pid = os.getpid()
    n = subnet_octet if subnet_octet is not None else pid % 250 + 1
    names = (f"mdsplit-{pid}-a", f"mdsplit-{pid}-b")
    veth = (f"mdv{pid % 10**7}a", f"mdv{pid % 10**7}b")
    addrs = (f"10.231.{n}.1", f"10.231.{n}.2")
    made = []
    try:
        for ns in names:
            r = _ip("netns", "add", ns)
            if r.returncode != 0:
                raise HostsUnavailable(f"ip netns add {ns}: {r.stderr.strip()}")
            made.append(ns)
        steps = [((("link", "add", veth[0], "type", "veth", "peer", "name", veth[1]), None)),
                 (("link", "set", veth[0], "netns", names[0]), None),
                 (("link", "set", veth[1], "netns", names[1]), None)]
        for i in (0, 1):
            steps += [(("addr", "add", f"{addrs[i]}/24", "dev", veth[i]), names[i]),
                      (("link", "set", veth[i], "up"), names[i]),
                      (("link", "set", "lo", "up"), names[i])]
        for args, ns in steps:
            r = _ip(*args, netns=ns)
            if r.returncode != 0:
                raise HostsUnavailable(f"ip {' '.join(args)}: {r.stderr.strip()}")
        yield NetnsPair(names, addrs)
    finally:
        for ns in made:
            _ip("netns", "del", ns)
        _ip("link", "del", veth[0])          # only if it never moved into a namespace


@dataclass
class LocalServers:
    servers: list
    client_netns: str | None     # run the client here (None: this namespace)
    mode: str                    # "netns" | "loopback"

    @property
    def hosts(self) -> list:
        return [s.client for s in self.servers]


@contextmanager
def local_servers(n: int = 2, mode: str = "auto", workdir: Path = None, fio: str = "fio"):
    """n fio servers on this machine, stopped at the end. mode "netns": two
    network namespaces joined by a veth pair (n must be 2; the client runs in
    the first); "loopback": 127.0.0.1 with distinct ports; "auto": netns
    where permitted, else loopback. Raises HostsUnavailable with the reason."""
    if mode not in ("auto", "netns", "loopback"):
        raise ValueError(f"mode must be auto, netns or loopback, not {mode!r}")
    if mode == "auto":
        mode = "netns" if n == 2 and not netns_reason() else "loopback"
    with ExitStack() as stack:
        wd = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="mdsplit-fio-servers-")))
        servers = []
        if mode == "netns":
            if n != 2:
                raise ValueError("netns mode makes exactly two hosts")
            pair = stack.enter_context(netns_pair())
            # (registered after the namespaces: the servers stop before they go)
            stack.callback(lambda: [s.stop() for s in servers])
            for ns, addr in zip(pair.names, pair.addresses):
                servers.append(start_server(addr, DEFAULT_PORT, netns=ns, workdir=wd, fio=fio))
            yield LocalServers(servers, pair.names[0], "netns")
        else:
            stack.callback(lambda: [s.stop() for s in servers])
            for _ in range(n):
                servers.append(start_server("127.0.0.1", workdir=wd, fio=fio))
            yield LocalServers(servers, None, "loopback")
