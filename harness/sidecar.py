"""The engine's sidecar statistics file (mdsplit_stats=FILE.json)."""
import json
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


def load_sidecar(path) -> Sidecar:
    data = json.loads(Path(path).read_text())
    return Sidecar(path=str(path), elapsed_ns=data["elapsed_ns"], devices=data["devices"],
                   time_scale=float(data.get("time_scale", 1.0)),
                   io_uring=data.get("io_uring", {}))
