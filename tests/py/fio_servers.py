"""fio servers on this machine for the tests of `run --hosts`
(harness/hosts.py): on 127.0.0.1 with distinct ports, or (root, `ip netns`
permitted) in two network namespaces joined by a veth pair, each a
separate "host". Test-only: the harness itself never starts servers."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.hosts import DEFAULT_PORT, HostSpec, parse_host


class HostsUnavailable(RuntimeError):
    """fio servers cannot be started here; str(e) is the one-line reason."""


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
