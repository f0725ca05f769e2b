"""Device time: the one conversion from what fio and the sidecars report in
host time to the time of the device a stack models.

A stack with `[device] time_scale = k` (DeviceConfig::time_scale) runs
its modelled times and bfq's timers k times slower than the device it
models, so that a host too slow for the device still sees the device's
ratios. In device time a rate (bytes/s, IOPS, r/s) is k times the host's,
a duration (await, a log's timestamp) 1/k of it. The sidecar records k
(`time_scale`); a stack's TOML states it.
"""
import tomllib
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceTime:
    scale: float = 1.0          # the stack's time_scale

    @classmethod
    def of(cls, sidecar) -> "DeviceTime":
        """The device time of the stack that wrote this sidecar."""
        return cls(float(sidecar.time_scale))

    @classmethod
    def of_stack(cls, toml_text: str) -> "DeviceTime":
        """The device time of a stack's TOML ([device] time_scale, default 1)."""
        return cls(float(tomllib.loads(toml_text).get("device", {}).get("time_scale", 1)))

    def rate(self, host_rate: float) -> float:
        """A rate measured in host time (bytes/s, IOPS, r/s), in device time."""
        return host_rate * self.scale

    def duration(self, host_duration: float) -> float:
        """A duration or timestamp measured in host time, in device time."""
        return host_duration / self.scale
