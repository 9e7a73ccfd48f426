"""`acl-fa plan --decode` / acl_fa.plan.decode: the decode op's tiling and its split of the keys
into work items, from the policy module the TilingFunc uses; the split is checked against what the
real kernel does on the simulator (per-core cube work)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from acl_fa.runtime import sim_stats
from acl_fa.cli import main
from acl_fa.plan import timing
from acl_fa.plan.decode import decode_plan, format_decode_plan
from acl_fa.plan.forward import PlanError


def run(*args):
    return CliRunner().invoke(main, ["plan", *args], catch_exceptions=False)


def test_plan_decode_shows_the_split_of_the_issue_shape():
    result = run("--seq", "1", "--seq-kv", "32768", "--kv-heads", "8", "--paged", "--block-size", "128")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "4 query heads x 1 token(s) = 4 rows" in text
    assert "8 groups (sequence, kv head), 2048 chunks" in text
    assert "48 work items (batch, kv head, split); splits per sequence and kv head 6;" in text
    assert "AIV: 48 of 48 busy" in text and "AIC (2 AIV each): 24 of 24 busy, chunks max/mean 1.008" in text


# split, lengths, (pieces per group min, max), work items, merged groups, busy AIC; N=16, Nkv=4:
# 4 groups per sequence, 128-key chunks
SPLITS = [
    (0, [32768], (12, 12), 48, 4, 24),    # 1024 chunks in 48 equal ranges: 12 per group
    (1, [32768], (1, 1), 4, 0, 4),
    (4, [32768], (4, 4), 16, 4, 8),       # 16 pieces: 16 AIV, 8 AIC
    (100, [32768], (48, 48), 192, 4, 24),  # clamped to the 48 AIV
    # 2 / 1 / 0 / 32 chunks: a group has at most its chunks as pieces, an empty one a single
    # (empty) piece; parts 12 .. 15 get those empty pieces, so AIC 6 and 7 stay idle
    (3, [256, 128, 0, 4096], (1, 3), 4 * 2 + 4 * 1 + 4 * 1 + 4 * 3, 8, 12),
]


@pytest.mark.parametrize("splits,lengths,pieces,items,merged,busy", SPLITS)
def test_plan_split_per_num_splits(splits, lengths, pieces, items, merged, busy):
    p = decode_plan(seq_kv=lengths, batch=len(lengths), heads=16, kv_heads=4, block_size=128, num_splits=splits)
    assert (p.min_pieces, p.max_pieces) == pieces
    assert p.pieces == items and p.combine_groups == merged
    assert sum(1 for u in p.aic_units if u) == busy
    assert sum(p.part_units) == p.total_units == sum(-(-n // 128) for n in lengths) * 4
    assert sum(p.part_combines) == merged


@pytest.mark.parametrize("splits,lengths", [(0, [2048]), (1, [1024, 2048, 640]), (5, [2048, 384]),
                                            (0, [128, 4096, 1024, 0]), (2, [640] * 6)])
def test_plan_split_is_the_kernels(session, sim_only, splits, lengths):
    """The cube work each AI Core does in a launch of the real kernel is in proportion to the key
    chunks the plan gives it (every chunk a full 128 keys here)."""
    from test_decode import make_cache

    batch = len(lengths)
    rng = np.random.default_rng(3)
    k_cache, v_cache, table = make_cache(rng, batch, lengths, 2, 64, np.float16, 128)
    q = rng.standard_normal((batch, 1, 8, 64)).astype(np.float16)
    session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=np.array(lengths, np.int32),
                                         block_table=table, num_splits=splits)
    macs = [core["cube_macs"] for core in sim_stats.last_launch(session.backend, per_core=True)["aic"]]
    p = decode_plan(seq_kv=lengths, batch=batch, heads=8, kv_heads=2, head_dim=64, block_size=128,
                    num_splits=splits, soc=session.soc_name())
    assert len(macs) == p.used_core_num
    per_chunk = sum(macs) // p.total_units
    assert [m // per_chunk for m in macs] == p.aic_units
    assert all(m % per_chunk == 0 for m in macs)


@pytest.mark.parametrize("kwargs,message", [
    (dict(block_size=100), "block_size must be a positive multiple of 16"),
    (dict(num_splits=-1), "num_splits must be a non-negative integer"),
    (dict(seq_kv=[5, 6]), "seq_kv must be one length or 1"),
    (dict(heads=6, kv_heads=4), "num_heads \\(6\\) must be a multiple of num_kv_heads \\(4\\)"),
    (dict(dtype="float32"), "dtype must be one of float16, bfloat16"),
])
def test_plan_refuses_bad_decode_problems(kwargs, message):
    with pytest.raises(PlanError, match=message):
        decode_plan(**({"seq_kv": 1024} | kwargs))


def test_plan_decode_json_and_errors_through_the_cli():
    result = run("--decode", "--seq", "2", "--seq-kv", "1000", "--heads", "8", "--kv-heads", "2", "--batch", "3",
                 "--num-splits", "2", "--json")
    assert result.exit_code == 0, result.output
    (p,) = json.loads(result.output)
    assert p["rows"] == 8 and p["splits_per_group"] == 2 and p["groups"] == 6 and p["pieces"] == 12
    assert p["block_size"] is None and p["seq_lens"] == [1000] * 3
    bad = run("--paged", "--block-size", "24", "--seq", "1")
    assert bad.exit_code != 0 and "multiple of 16" in bad.output


# (B, Sq, keys per sequence, block size or None): the closed form the router compares with the
# forward's, against the event model of the real kernel (bench/RESULTS.md records the same points).
MODELED = [(1, 1, 1024, None), (1, 1, 8192, None), (1, 1, 4096, 128), (2, 4, 2048, None), (1, 16, 4096, None)]


@pytest.mark.parametrize("batch,seq_q,length,block", MODELED)
def test_closed_form_tracks_the_event_model(session, sim_only, batch, seq_q, length, block):
    from test_decode import make_cache

    rng = np.random.default_rng(4)
    k_cache, v_cache, table = make_cache(rng, batch, [length] * batch, 8, 128, np.float16, block, extra_blocks=0)
    q = rng.standard_normal((batch, seq_q, 32, 128)).astype(np.float16)
    with timing.op_trace(session.backend):
        session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=np.full(batch, length, np.int32),
                                             block_table=table)
        model = timing.last_model(session.backend)
    # The closed form estimates the pipeline (the routing compares the two ops' pipelines; both read
    # the same keys, whose HBM bound the event model adds on top): compare with the replay's term.
    event = model.pipeline_cycles / model.cycles * model.seconds * 1e6
    plan = decode_plan(seq_kv=length, batch=batch, heads=32, kv_heads=8, seq_q=seq_q, block_size=block)
    assert plan.modeled_us == pytest.approx(event, rel=0.15)


# (N, Nkv, Sq, D): more than 255 query rows per kv head, cut into row groups of whole heads or of
# one head's tokens, each fitting the chip's UB (about 80 rows at D 128, 110 at D 64)
ROW_GROUPS = [(16, 2, 40, 64), (64, 8, 64, 128), (8, 2, 100, 128), (2, 1, 300, 64), (32, 8, 16, 128)]


@pytest.mark.parametrize("heads,kv_heads,seq_q,head_dim", ROW_GROUPS)
def test_plan_cuts_the_rows_of_a_kv_head_into_row_groups(heads, kv_heads, seq_q, head_dim):
    p = decode_plan(seq_kv=4096, batch=2, heads=heads, kv_heads=kv_heads, seq_q=seq_q, head_dim=head_dim)
    group = heads // kv_heads
    assert p.rows <= 255 and p.rows == p.row_group_heads * p.row_group_tokens
    assert group % p.row_group_heads == 0 and seq_q % p.row_group_tokens == 0
    assert p.row_group_tokens == seq_q or p.row_group_heads == 1  # tokens cut only within one head
    assert p.row_groups * p.rows == group * seq_q and p.groups == 2 * kv_heads * p.row_groups
    ub = next(line for line in p.budget if line.name.startswith("UB total"))
    assert ub.bytes <= ub.capacity
    text = format_decode_plan(p)
    if p.row_groups > 1:
        assert f"{p.row_groups} row groups of {p.row_group_heads} head(s) x {p.row_group_tokens} token(s)" in text
    else:  # the whole kv head fits: one group, as before row groups existed
        assert group * seq_q <= 255 and f"{group} query heads x {seq_q} token(s) = {p.rows} rows" in text


def test_row_group_split_is_the_kernels(session, sim_only):
    """GQA 8 x 64 (512 rows per kv head): the cube work of each AI Core is the plan's chunks over
    all (sequence, kv head, row group) groups."""
    from test_decode import make_cache

    lengths = [1024, 384]
    rng = np.random.default_rng(7)
    k_cache, v_cache, table = make_cache(rng, 2, lengths, 2, 64, np.float16, 128)
    q = rng.standard_normal((2, 64, 16, 64)).astype(np.float16)
    session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=np.array(lengths, np.int32),
                                         block_table=table, causal=False)
    macs = [core["cube_macs"] for core in sim_stats.last_launch(session.backend, per_core=True)["aic"]]
    p = decode_plan(seq_kv=lengths, batch=2, heads=16, kv_heads=2, seq_q=64, head_dim=64, block_size=128,
                    soc=session.soc_name())
    assert p.row_groups > 1 and p.total_units == sum(-(-n // 128) for n in lengths) * 2 * p.row_groups
    per_chunk = sum(macs) // p.total_units
    assert [m // per_chunk for m in macs] == p.aic_units
    assert all(m % per_chunk == 0 for m in macs)
