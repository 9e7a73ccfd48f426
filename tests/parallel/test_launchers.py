"""Launchers' environments (acl_fa.parallel.launchers) and rank tables (acl_fa.parallel.rank_table):
every launcher's variables give the rank, world size, local rank and how the ranks meet; partial or
foreign launcher environments and rank tables that disagree with the launcher are refused naming
the variables. Pure Python: no device, no process."""
import json

import pytest

from acl_fa.parallel import launchers, rank_table
from acl_fa.runtime.errors import InvalidArgumentError


def test_no_launcher_is_one_process():
    assert launchers.detect({}) is None
    assert launchers.detect({"PATH": "/bin", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) is None  # a batch script


@pytest.mark.parametrize("env, launcher, rank, size, local", [
    ({"ACL_FA_RANK": "1", "ACL_FA_WORLD_SIZE": "2", "ACL_FA_ROOT_INFO": "/tmp/x"}, "acl-fa launch", 1, 2, None),
    ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
     "torchrun", 3, 4, 1),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
      "PMIX_RANK": "2", "PMIX_NAMESPACE": "1458569217"}, "Open MPI", 2, 8, 2),
    ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "MPICH (PMI)", 1, 2, 1),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1",
      "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77"}, "Slurm", 5, 8, 1),
])
def test_each_launcher_gives_rank_size_and_local_rank(env, launcher, rank, size, local):
    found = launchers.detect(env)
    assert (found.launcher, found.rank, found.size, found.local_rank) == (launcher, rank, size, local)


def test_how_the_ranks_meet():
    base = {"RANK": "0", "WORLD_SIZE": "2"}
    tcp = launchers.detect({**base, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}).rendezvous
    assert (tcp.kind, tcp.host, tcp.port) == ("tcp", "127.0.0.1", 29500)
    table = launchers.detect({**base, "RANK_TABLE_FILE": "/x/rt.json", "MASTER_ADDR": "a", "MASTER_PORT": "1"})
    assert (table.rendezvous.kind, table.rendezvous.path) == ("rank_table", "/x/rt.json")
    ompi = launchers.detect({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "PMIX_NAMESPACE": "99"})
    assert ompi.rendezvous.kind == "file" and ompi.rendezvous.path.endswith("-open-99") and ompi.rendezvous.cleanup
    with pytest.raises(InvalidArgumentError, match="MASTER_ADDR and MASTER_PORT"):
        launchers.detect(base)  # two ranks, no way to meet
    with pytest.raises(InvalidArgumentError, match="set both"):
        launchers.detect({**base, "MASTER_ADDR": "127.0.0.1"})
    with pytest.raises(InvalidArgumentError, match=r"MASTER_PORT='http' must be a TCP port"):
        launchers.detect({**base, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "http"})


@pytest.mark.parametrize("env, words", [
    ({"RANK": "1"}, "RANK is set but WORLD_SIZE is not: a partial torchrun environment"),
    ({"WORLD_SIZE": "4"}, "WORLD_SIZE is set but RANK is not"),
    ({"OMPI_COMM_WORLD_RANK": "1"}, "a partial Open MPI environment"),
    ({"PMI_SIZE": "2"}, "PMI_SIZE is set but PMI_RANK is not"),
    ({"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "RANK=4 must lie in [0, WORLD_SIZE=4)"),
    ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK='x' (set by torchrun) must be an integer"),
    ({"PMIX_RANK": "1", "PMIX_NAMESPACE": "n"}, "PMIX_RANK=1 is set: this process was started by a PMIx launcher"),
    ({"MV2_COMM_WORLD_RANK": "0"}, "MVAPICH2, whose environment acl-fa does not read"),
    ({"RANK_TABLE_FILE": "/x.json"}, "no launcher set this process's rank"),
])
def test_partial_or_foreign_launcher_environments_are_refused(env, words):
    with pytest.raises(InvalidArgumentError) as info:
        launchers.detect(env)
    assert words in str(info.value)


def test_rank_table_round_trip_and_checks(tmp_path):
    path = str(tmp_path / "rt.json")
    ranks = rank_table.write_rank_table(path, [2, 2])
    assert [(r.rank, r.server, r.device, r.local_rank) for r in ranks] == [
        (0, "10.0.0.1", 0, 0), (1, "10.0.0.1", 1, 1), (2, "10.0.0.2", 0, 0), (3, "10.0.0.2", 1, 1)]
    assert rank_table.check_against(ranks, path, 2, 4, "RANK=2, WORLD_SIZE=4", "10.0.0.2", 0).server == "10.0.0.2"
    with pytest.raises(InvalidArgumentError, match="lists 4 ranks but the launcher started 3"):
        rank_table.check_against(ranks, path, 2, 3, "RANK=2, WORLD_SIZE=3")
    with pytest.raises(InvalidArgumentError, match="puts rank 2 on server 10.0.0.2 but this process is on host h1"):
        rank_table.check_against(ranks, path, 2, 4, "", "h1")
    with pytest.raises(InvalidArgumentError, match="gives rank 3 device_id 1 but ACL_FA_DEVICE=0"):
        rank_table.check_against(ranks, path, 3, 4, "", "", 0)


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.update(version="2.0"), '"version" must be "1.0" or "1.2"'),
    (lambda t: t.update(status="initializing"), "not \"completed\""),
    (lambda t: t["server_list"][1]["device"][0].update(rank_id="1"), "repeats rank_id 1"),
    (lambda t: t["server_list"][0]["device"][1].update(device_id="0"), "repeats device_id 0 of rank 0"),
    (lambda t: t["server_list"][1]["device"][1].update(rank_id="9"), "has no rank_id 3"),
    (lambda t: t["server_list"][1].update(server_id="10.0.0.1"), "server_id '10.0.0.1' is repeated"),
    (lambda t: t.update(server_count="3"), "server_count 3 but 2 servers listed"),
])
def test_bad_rank_tables_are_refused(tmp_path, edit, words):
    path = str(tmp_path / "rt.json")
    rank_table.write_rank_table(path, [2, 2])
    table = json.loads(open(path).read())
    edit(table)
    open(path, "w").write(json.dumps(table))
    with pytest.raises(InvalidArgumentError) as info:
        rank_table.read_rank_table(path)
    assert words in str(info.value)
