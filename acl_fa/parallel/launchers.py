"""Which launcher started this process, and this rank's place in the job (docs/hccl.md, "Launchers").

A rank learns its rank, world size and local rank from the environment of the launcher that
started it; ``detect()`` reads, in this order (the first launcher whose variables are present
decides; a launcher started under another, e.g. torchrun inside a Slurm step, sets its own):

    acl-fa launch   ACL_FA_RANK, ACL_FA_WORLD_SIZE, ACL_FA_DEVICE, ACL_FA_ROOT_INFO
    torchrun-style  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    Open MPI        OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
    MPICH (PMI)     PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
    Slurm (srun)    SLURM_PROCID, SLURM_NTASKS (SLURM_STEP_NUM_TASKS in a step), SLURM_LOCALID

A launcher's variables that are only partly there (RANK without WORLD_SIZE, ...), or that do not
make a rank inside its world, are refused naming them; so is the environment of a launcher acl-fa
does not read (PMIX_RANK without Open MPI's, MVAPICH's MV2_COMM_WORLD_RANK, ...): never ignored,
which would make each process a world of its own.

How the ranks meet (``Rendezvous``), in this order:
    RANK_TABLE_FILE   an HCCL rank table: HcclCommInitClusterInfo, no root info to exchange
    ACL_FA_ROOT_INFO  a file that rank 0 writes HcclGetRootInfo's bytes to (acl-fa launch)
    MASTER_ADDR/PORT  a TCP store (tcp_store.py): rank 0 serves the root info there
    the launcher's job id (Open MPI's PMIX_NAMESPACE, Slurm's SLURM_JOB_ID.SLURM_STEP_ID): a file
                      under the temporary directory named after it (the ranks of one host)
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Mapping, Optional

from ..runtime.errors import InvalidArgumentError

__all__ = ["RankEnv", "Rendezvous", "detect", "ENV_RANK_TABLE", "ENV_SIM_HOST"]

ENV_RANK_TABLE = "RANK_TABLE_FILE"  # CANN's variable for the rank table file
ENV_SIM_HOST = "ACL_FA_SIM_HOST"  # simulator: the simulated host ("server") this process stands for

# (name, rank variable, size variable(s), local-rank variable); sizes: the first one set counts.
_LAUNCHERS = (
    ("acl-fa launch", "ACL_FA_RANK", ("ACL_FA_WORLD_SIZE",), None),
    ("torchrun", "RANK", ("WORLD_SIZE",), "LOCAL_RANK"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",), "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("MPICH (PMI)", "PMI_RANK", ("PMI_SIZE",), "MPI_LOCALRANKID"),
    ("Slurm", "SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), "SLURM_LOCALID"),
)
# Rank variables of launchers acl-fa does not read: their presence alone is refused.
_FOREIGN = (("PMIX_RANK", "a PMIx launcher (prterun, Open MPI 5 without OMPI_COMM_WORLD_*)"),
            ("MV2_COMM_WORLD_RANK", "MVAPICH2"), ("PALS_RANKID", "HPE PALS"), ("FLUX_TASK_RANK", "Flux"),
            ("JSM_NAMESPACE_RANK", "IBM jsrun"), ("ALPS_APP_PE", "Cray ALPS"))


@dataclass(frozen=True)
class Rendezvous:
    """How the ranks of a job meet: kind "rank_table" (path), "file" (path), "tcp" (host, port)."""
    kind: str
    path: str = ""
    host: str = ""
    port: int = 0
    cleanup: bool = False  # rank 0 removes the file once the communicator formed (a job-id file)

    def describe(self) -> str:
        return {"rank_table": f"rank table {self.path}", "file": f"root-info file {self.path}",
                "tcp": f"TCP store {self.host}:{self.port}"}[self.kind]


@dataclass(frozen=True)
class RankEnv:
    """This process's rank as its launcher set it."""
    launcher: str
    rank: int
    size: int
    local_rank: Optional[int]
    device: Optional[int]  # given explicitly (ACL_FA_DEVICE); else the rank table's, local_rank or rank
    rendezvous: Rendezvous
    host: str  # ACL_FA_SIM_HOST ("" = not given)
    variables: str  # the variables read, for messages ("RANK=3, WORLD_SIZE=4")


def _int(env: Mapping[str, str], name: str, launcher: str) -> int:
    text = env[name]
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{name}={text!r} (set by {launcher}) must be an integer") from None


def _launcher(env: Mapping[str, str]):
    """(name, rank, size, local rank, variables) of the first launcher whose variables are
    present, or None; partial sets are refused."""
    for name, rank_var, size_vars, local_var in _LAUNCHERS:
        size_var = next((v for v in size_vars if env.get(v)), None)
        if not env.get(rank_var) and size_var is None:
            continue
        if name == "Slurm" and not env.get("SLURM_STEP_ID") and not env.get("SLURM_STEPID"):
            continue  # a batch script (one process), not a task of an srun step
        if not env.get(rank_var) or size_var is None:
            present = rank_var if env.get(rank_var) else size_var
            missing = size_vars[0] if env.get(rank_var) else rank_var
            raise InvalidArgumentError(f"{present} is set but {missing} is not: a partial {name} environment; "
                                       f"set both (or neither) so that each process knows its rank and the "
                                       "world size")
        rank, size = _int(env, rank_var, name), _int(env, size_var, name)
        local = _int(env, local_var, name) if local_var and env.get(local_var) else None
        if size < 1 or not 0 <= rank < size:
            raise InvalidArgumentError(f"{rank_var}={rank} must lie in [0, {size_var}={size}) ({name}): the rank "
                                       "is outside the world")
        if local is not None and not 0 <= local < size:
            raise InvalidArgumentError(f"{local_var}={local} must lie in [0, {size_var}={size}) ({name})")
        variables = f"{rank_var}={rank}, {size_var}={size}" + (f", {local_var}={local}" if local is not None else "")
        return name, rank, size, local, variables
    for var, who in _FOREIGN:
        if env.get(var):
            raise InvalidArgumentError(
                f"{var}={env[var]} is set: this process was started by {who}, whose environment acl-fa does not "
                "read; run it under mpirun (Open MPI or MPICH), srun, a torchrun-style launcher (RANK, WORLD_SIZE, "
                "MASTER_ADDR, MASTER_PORT) or acl-fa launch, or set RANK and WORLD_SIZE yourself")
    return None


def _rendezvous(env: Mapping[str, str], launcher: str, size: int) -> Rendezvous:
    if env.get(ENV_RANK_TABLE):
        return Rendezvous("rank_table", path=env[ENV_RANK_TABLE])
    if env.get("ACL_FA_ROOT_INFO"):
        return Rendezvous("file", path=env["ACL_FA_ROOT_INFO"])
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if addr or port:
        if not (addr and port):
            raise InvalidArgumentError(f"MASTER_ADDR={addr!r}, MASTER_PORT={port!r}: set both (the TCP store where "
                                       "rank 0 hands out the root info)")
        try:
            number = int(port)
        except ValueError:
            number = -1
        if not 0 < number < 65536:
            raise InvalidArgumentError(f"MASTER_PORT={port!r} must be a TCP port in [1, 65535]")
        return Rendezvous("tcp", host=addr, port=number)
    job = None
    if launcher == "Open MPI":
        job = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid")
    elif launcher == "Slurm" and env.get("SLURM_JOB_ID"):
        job = f"{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID') or env.get('SLURM_STEPID')}"
    if job is None:
        if size == 1:
            return Rendezvous("file", path="", cleanup=False)  # one rank: nothing to exchange
        raise InvalidArgumentError(f"{launcher} started this rank but gives no way for the ranks to meet: set "
                                   f"MASTER_ADDR and MASTER_PORT (rank 0's TCP store) or {ENV_RANK_TABLE} (an HCCL "
                                   "rank table)")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job)
    path = os.path.join(tempfile.gettempdir(), f"acl-fa-root-{os.getuid()}-{launcher.split()[0].lower()}-{safe}")
    return Rendezvous("file", path=path, cleanup=True)


def detect(environ: Optional[Mapping[str, str]] = None) -> Optional[RankEnv]:
    """This process's RankEnv, or None when no launcher started it (one process, threads per
    device). Raises InvalidArgumentError for a launcher's environment acl-fa cannot use."""
    env = os.environ if environ is None else environ
    found = _launcher(env)
    if found is None:
        if env.get(ENV_RANK_TABLE):
            raise InvalidArgumentError(f"{ENV_RANK_TABLE}={env[ENV_RANK_TABLE]} is set but no launcher set this "
                                       "process's rank: start one process per rank (mpirun, srun, a torchrun-style "
                                       "launcher setting RANK and WORLD_SIZE)")
        return None
    name, rank, size, local, variables = found
    device = None
    if env.get("ACL_FA_DEVICE"):
        device = _int(env, "ACL_FA_DEVICE", name)
    return RankEnv(name, rank, size, local, device, _rendezvous(env, name, size), env.get(ENV_SIM_HOST, ""),
                   variables)
