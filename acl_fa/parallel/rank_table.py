"""HCCL rank tables (docs/hccl.md, "Clusters"): read one to check it against the launcher's
environment before any device work, and write one for a simulated cluster.

The format (version "1.0"; "1.2" adds per-device fields such as super_device_id):

    {"version": "1.0", "server_count": "2", "status": "completed",
     "server_list": [{"server_id": "10.0.0.1",
                      "device": [{"device_id": "0", "device_ip": "192.168.100.1", "rank_id": "0"}, ...]},
                     ...]}

Every server numbers its devices from 0; rank_id numbers the ranks 0 .. n-1 over the whole table.
The simulated libhccl reads the same file (HcclCommInitClusterInfo, sim/src/hccl/rank_table.cpp).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from ..runtime.errors import InvalidArgumentError

__all__ = ["TableRank", "read_rank_table", "write_rank_table", "check_against"]


@dataclass(frozen=True)
class TableRank:
    rank: int
    server: str
    device: int
    local_rank: int  # its place among its server's devices, in file order


def _number(value, where: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{where} is {value!r}, not an integer") from None
    if n < 0:
        raise InvalidArgumentError(f"{where} is {n}, not >= 0")
    return n


def read_rank_table(path: str) -> list:
    """The table's ranks, indexed by rank_id; InvalidArgumentError naming what is wrong (the
    same rules as the simulated libhccl's reader)."""
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
    except OSError as exc:
        raise InvalidArgumentError(f"rank table {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InvalidArgumentError(f"rank table {path} is not JSON: {exc}") from None
    where = f"rank table {path}"
    if not isinstance(table, dict) or str(table.get("version")) not in ("1.0", "1.2"):
        raise InvalidArgumentError(f"{where}: \"version\" must be \"1.0\" or \"1.2\"")
    if "status" in table and table["status"] != "completed":
        raise InvalidArgumentError(f"{where}: \"status\" is {table['status']!r}, not \"completed\"")
    servers = table.get("server_list")
    if not isinstance(servers, list) or not servers:
        raise InvalidArgumentError(f"{where} has no \"server_list\" (a non-empty list of servers)")
    ranks, server_ids = {}, set()
    for s, server in enumerate(servers):
        at = f"{where} server_list[{s}]"
        sid = str(server.get("server_id", "")) if isinstance(server, dict) else ""
        if not sid or sid in server_ids:
            raise InvalidArgumentError(f"{at}: server_id {sid!r} is {'repeated' if sid else 'missing'}")
        server_ids.add(sid)
        devices = server.get("device")
        if not isinstance(devices, list) or not devices:
            raise InvalidArgumentError(f"{at} has no \"device\" (a non-empty list)")
        seen = {}
        for d, dev in enumerate(devices):
            dat = f"{at}.device[{d}]"
            if not isinstance(dev, dict):
                raise InvalidArgumentError(f"{dat} is not an object")
            device = _number(dev.get("device_id"), f"{dat} device_id")
            rank = _number(dev.get("rank_id"), f"{dat} rank_id")
            if device in seen:
                raise InvalidArgumentError(f"{dat} repeats device_id {device} of rank {seen[device]} on server {sid}")
            if rank in ranks:
                raise InvalidArgumentError(f"{dat} repeats rank_id {rank}")
            seen[device] = rank
            ranks[rank] = TableRank(rank, sid, device, d)
    if "server_count" in table and _number(table["server_count"], f"{where} server_count") != len(servers):
        raise InvalidArgumentError(f"{where}: server_count {table['server_count']} but {len(servers)} servers listed")
    missing = [r for r in range(len(ranks)) if r not in ranks]
    if missing:
        raise InvalidArgumentError(f"{where} has no rank_id {missing[0]}: the {len(ranks)} ranks must be numbered "
                                   f"0 .. {len(ranks) - 1}")
    return [ranks[r] for r in range(len(ranks))]


def write_rank_table(path: str, devices_per_server: Sequence[int], version: str = "1.0") -> list:
    """Writes a rank table of len(devices_per_server) servers ("10.0.0.<s+1>"), server s with
    devices 0 .. devices_per_server[s]-1, ranks numbered server by server; returns its ranks."""
    servers, rank = [], 0
    for s, count in enumerate(devices_per_server):
        devices = []
        for d in range(count):
            devices.append({"device_id": str(d), "device_ip": f"192.168.{s}.{d + 1}", "rank_id": str(rank)})
            rank += 1
        servers.append({"server_id": f"10.0.0.{s + 1}", "device": devices, "host_nic_ip": "reserve"})
    table = {"version": version, "server_count": str(len(servers)), "server_list": servers, "status": "completed"}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    return read_rank_table(path)


def check_against(table: list, path: str, rank: int, size: int, variables: str, host: str = "",
                  device=None) -> TableRank:
    """This rank's entry, after checking the table against what the launcher set (before any
    device work): the world size, and when given the simulated host and the device."""
    if len(table) != size:
        raise InvalidArgumentError(f"rank table {path} lists {len(table)} ranks but the launcher started {size} "
                                   f"({variables}): the rank table and the launcher disagree")
    mine = table[rank]
    if host and host != mine.server:
        raise InvalidArgumentError(f"rank table {path} puts rank {rank} on server {mine.server} but this process is "
                                   f"on host {host} (ACL_FA_SIM_HOST): the rank table and the launcher disagree")
    if device is not None and device != mine.device:
        raise InvalidArgumentError(f"rank table {path} gives rank {rank} device_id {mine.device} but ACL_FA_DEVICE="
                                   f"{device}: the rank table and the launcher disagree")
    return mine
