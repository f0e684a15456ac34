"""The memory hierarchy as the simulator sees it, resolved from a hardware profile.

Defaults for figures a profile may lack are stated here and reported with every
prediction (`Machine.notes`), so a prediction never silently rests on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.hw import HwProfile
from kxform.locality.occupancy import Occupancy

DEFAULTS = {
    "l2_line_bytes": 128,
    "l2_sector_bytes": 32,
    "l2_ways": 16,
    "l2_partitions": 1,
    "schedulers_per_sm": 4,
    "clock_mhz": 1500,
    "dram_page_bytes": 1024,
}


@dataclass(frozen=True)
class Machine:
    """Domains (XCDs: private L2, blocks dealt round-robin), SMs and resident blocks per
    domain, L2 partitions per domain, and the L2's geometry."""

    name: str
    domains: int
    sms_per_domain: int
    blocks_per_sm: int
    partitions: int
    l2_bytes_per_domain: int
    line_bytes: int
    sector_bytes: int
    ways: int
    schedulers_per_sm: int
    clock_mhz: int
    dram_page_bytes: int
    bandwidth_gbs: float
    sm_count: int
    notes: tuple[str, ...] = ()

    @property
    def wave(self) -> int:
        """Blocks that run at once in one domain."""
        return self.sms_per_domain * self.blocks_per_sm

    @property
    def partition_lines(self) -> float:
        return self.l2_bytes_per_domain / self.line_bytes / self.partitions

    @classmethod
    def of(cls, hw: HwProfile, occ: Occupancy) -> Machine:
        notes = []
        values = {}
        for key, default in DEFAULTS.items():
            value = getattr(hw, key)
            if value is None:
                notes.append(f"{key} not in profile {hw.name}: {default} assumed")
                value = default
            values[key] = value
        domains = max(1, hw.xcds)
        partitions = 1 if domains > 1 else int(values["l2_partitions"])
        per_domain = hw.l2_bytes_per_xcd or hw.l2_bytes // domains
        return cls(
            hw.name,
            domains,
            max(1, hw.sm_count // domains),
            occ.blocks_per_sm,
            partitions,
            per_domain,
            int(values["l2_line_bytes"]),
            int(values["l2_sector_bytes"]),
            int(values["l2_ways"]),
            int(values["schedulers_per_sm"]),
            int(values["clock_mhz"]),
            int(values["dram_page_bytes"]),
            hw.mem_bandwidth_gbs,
            hw.sm_count,
            tuple(notes),
        )
