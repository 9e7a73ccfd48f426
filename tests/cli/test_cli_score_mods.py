"""`acl-fa run --alibi / --softcap C / --sinks` (CliRunner, simulator only): the score modifiers of
#30 on random inputs, checked against the float64 reference with the same modifiers, with the
modeled NPU time."""
import json

import pytest
from click.testing import CliRunner

from acl_fa.cli import main

SMALL = ["--heads", "2", "--head-dim", "64", "--iters", "1", "--warmup", "0"]


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("args, op, words", [
    (["--seq", "200", "--causal", "--alibi"], "FlashAttentionV5", "ALiBi slopes 2^(-8h/N)"),
    (["--seq", "150", "--softcap", "20"], "FlashAttentionV3", "softcap 20"),
    (["--seq", "130", "--causal", "--sinks", "--seed", "4"], "FlashAttentionV5", "sinks (random logits)"),
    (["--varlen", "90,33,7", "--causal", "--alibi", "--sinks", "--softcap", "10"], "FlashAttentionV5", "ALiBi"),
], ids=["alibi", "softcap", "sinks", "varlen-all"])
def test_run_with_score_modifiers(sim_only, args, op, words):
    result = _invoke("run", *args, *SMALL, "--json")
    assert result.exit_code == 0, result.output + repr(result.exception)
    data = json.loads(result.stdout)
    assert data["check"]["ok"] and data["check"]["max_error"] <= data["check"]["tolerance"]
    assert data["modeled_time"]["time_s"] > 0
    text = _invoke("run", *args, *SMALL).stdout
    assert f"op {op}" in text and words in text and ": OK" in text
    assert "modeled" in text


def test_score_modifiers_are_forward_only_here():
    result = _invoke("run", "--seq", "64", "--alibi", "--backward")
    assert result.exit_code in (1, 2) and "--alibi, --softcap and --sinks are forward-only" in result.output
