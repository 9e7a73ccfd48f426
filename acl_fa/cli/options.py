"""The options and helpers the commands share, each defined once: the backend and device, -v,
the problem sizes, the V2 options (window, dropout, mask density, varlen), the decode options,
--json, --seed, --backward / --deterministic; a progress bar on a terminal only; acl-fa's own
errors reported as a click error (no traceback)."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import sys
import time

import click

from ..plan import forward as plan_module
from ..jobs import decode_run
from ..jobs.settings import JobSettings
from ..runtime.errors import AclFaError
from ..runtime.loader import BACKENDS, ENV_BACKEND
from ..spec.problem import Problem, problem_from_sizes


backend_option = click.option(
    "--backend",
    type=click.Choice(BACKENDS, case_sensitive=False),
    envvar=ENV_BACKEND,
    default="auto",
    show_default=True,
    show_envvar=True,
    help="npu: the CANN libraries; sim: the CPU simulator; auto: npu when a device exists, else sim.",
)


device_option = click.option(
    "--device",
    type=click.IntRange(min=0),
    envvar="ACL_FA_DEVICE",
    default=0,
    show_default=True,
    show_envvar=True,
    metavar="ID",
    help="Device id passed to aclrtSetDevice.",
)


def _set_verbose(ctx, param, value):
    if value:
        logging.getLogger().setLevel(logging.INFO)
    return value


# -v is accepted before the command (acl-fa -v run) and after it (acl-fa run -v).
verbose_option = click.option("-v", "--verbose", is_flag=True, envvar="ACL_FA_VERBOSE", show_envvar=True,
                              expose_value=False, is_eager=True, callback=_set_verbose,
                              help="Log what the library does (INFO level).")


def on_terminal() -> bool:
    """Whether progress is drawn: only when stderr is a terminal."""
    return sys.stderr.isatty()


@contextlib.contextmanager
def stages(label: str):
    """A job's progress callback (stage, steps) for jobs made of a few long stages: on a terminal,
    one line as each new stage starts and the elapsed time at the end; elsewhere nothing."""
    if not on_terminal():
        yield lambda stage, steps: None
        return
    start, seen = time.monotonic(), []

    def report(stage: str, steps: int) -> None:
        if not seen or seen[-1] != stage:
            seen.append(stage)
            click.echo(f"{label}: [{time.monotonic() - start:6.1f} s] {stage}", err=True)

    yield report
    click.echo(f"{label}: [{time.monotonic() - start:6.1f} s] done", err=True)


@contextlib.contextmanager
def progress(length: int, label: str):
    """click's progress bar on a terminal; elsewhere (a pipe, a log file) nothing at all, not
    even the label line."""
    if on_terminal():
        with click.progressbar(length=length, label=label, file=sys.stderr, show_eta=False) as bar:
            yield bar
    else:
        yield _NoBar()


class _NoBar:
    def update(self, steps: int):
        pass


def check_plot_support():
    """--plot needs matplotlib: said before the benchmark runs, with the install command of
    the Python that runs acl-fa."""
    if importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError(f"--plot needs matplotlib, which this Python does not have; install it with: "
                               f"{sys.executable} -m pip install matplotlib")


def write_plot(draw, path) -> None:
    """`draw(path)` (a job's plot function), then says where the picture went; a missing
    matplotlib ends the command with its message."""
    try:
        draw(path)
    except ImportError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"plot written to {path}", err=True)


@contextlib.contextmanager
def reported_as_usage_errors():
    """acl-fa's own exceptions (refused input, a failed ACL call, libraries not found) end the
    command with their message and exit status 1, not a traceback."""
    try:
        yield
    except AclFaError as exc:
        raise click.ClickException(str(exc)) from exc


# The short dtype names torch users type first (torch.half, "fp16" in training configs), each
# the name of a dtype in plan_module.DTYPES.
DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}


class _DtypeChoice(click.Choice):
    """plan_module.DTYPES in any case, or one of DTYPE_ALIASES (converted to its full name)."""

    def __init__(self):
        super().__init__(plan_module.DTYPES, case_sensitive=False)

    def convert(self, value, param, ctx):
        return super().convert(DTYPE_ALIASES.get(str(value).lower(), value), param, ctx)

    def get_metavar(self, param, *args, **kwargs):
        return "[" + "|".join(plan_module.DTYPES) + "|fp16|bf16|fp32]"


class OutputPath(click.Path):
    """A file the command writes at its end (--plot, --trace): its directory must exist and be
    writable when the command starts, so a typo fails in a line before minutes of work."""

    def __init__(self):
        super().__init__(dir_okay=False, writable=True)

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            self.fail(f"{path!r}: the directory {folder!r} does not exist", param, ctx)
        if not os.access(folder, os.W_OK | os.X_OK):
            self.fail(f"{path!r}: the directory {folder!r} is not writable", param, ctx)
        return path


def plot_option(help_text: str):
    return click.option("--plot", "plot_path", type=OutputPath(), envvar="ACL_FA_PLOT", show_envvar=True,
                        default=None, metavar="FILE.png", help=help_text)


# The problem options, shared by `plan`, `run` and `bench` (one definition each).
_PROBLEM_OPTIONS = [
    click.option("--seq", type=click.IntRange(min=1), envvar="ACL_FA_SEQ", default=4096, show_default=True,
              show_envvar=True, metavar="SQ", help="Query sequence length."),
    click.option("--seq-kv", type=click.IntRange(min=1), envvar="ACL_FA_SEQ_KV", default=None, show_envvar=True,
              metavar="SKV", help="Key/value sequence length [default: --seq]."),
    click.option("--batch", type=click.IntRange(min=1), envvar="ACL_FA_BATCH", default=1, show_default=True,
              show_envvar=True, metavar="B", help="Batch size."),
    click.option("--heads", type=click.IntRange(min=1), envvar="ACL_FA_HEADS", default=32, show_default=True,
              show_envvar=True, metavar="N", help="Query heads."),
    click.option("--kv-heads", type=click.IntRange(min=1), envvar="ACL_FA_KV_HEADS", default=None, show_envvar=True,
              metavar="NKV", help="Key/value heads (GQA/MQA) [default: --heads]."),
    click.option("--head-dim", type=click.IntRange(min=1), envvar="ACL_FA_HEAD_DIM", default=128, show_default=True,
              show_envvar=True, metavar="D", help="Head dimension (a multiple of 16, at most 256)."),
    click.option("--dtype", type=_DtypeChoice(), envvar="ACL_FA_DTYPE", default="float16", show_default=True,
              show_envvar=True, help="Input dtype (any case; also torch's short names fp16, bf16, fp32, half)."),
    click.option("--layout", type=click.Choice(plan_module.LAYOUTS, case_sensitive=False), envvar="ACL_FA_LAYOUT",
              default="BNSD", show_default=True, show_envvar=True, help="Input layout (any case)."),
    click.option("--causal/--no-causal", envvar="ACL_FA_CAUSAL", default=False, show_default=True, show_envvar=True,
              help="Causal (bottom-right aligned) mask."),
    click.option("--block-m", type=click.IntRange(min=0), envvar="ACL_FA_BLOCK_M", default=0, show_default=True,
              show_envvar=True, metavar="ROWS", help="Query rows per block (multiple of 16); 0 = let the policy choose."),
    click.option("--block-n", type=click.IntRange(min=0), envvar="ACL_FA_BLOCK_N", default=0, show_default=True,
              show_envvar=True, metavar="ROWS", help="Key/value rows per block (multiple of 16); 0 = let the policy choose."),
]


def problem_options(function):
    for option in reversed(_PROBLEM_OPTIONS):
        function = option(function)
    return verbose_option(function)


def problem_of(params: dict, **overrides) -> Problem:
    """The validated Problem of a command's parsed problem options (and --scale where the command
    has one); `overrides` replace parsed values (seq_kv=..., layout=...). Call it inside
    reported_as_usage_errors(): a refused size is acl-fa's InvalidArgumentError."""
    v = {name: params.get(name) for name in ("seq", "seq_kv", "batch", "heads", "kv_heads", "head_dim", "dtype",
                                             "layout", "causal", "scale", "block_m", "block_n")} | overrides
    return problem_from_sizes(seq_q=v["seq"], seq_kv=v["seq_kv"], batch=v["batch"], num_heads=v["heads"],
                              num_kv_heads=v["kv_heads"], head_dim=v["head_dim"], dtype=v["dtype"], layout=v["layout"],
                              causal=bool(v["causal"]), scale=v["scale"], block_m=v["block_m"] or None,
                              block_n=v["block_n"] or None)


def settings_of(params: dict, **overrides) -> JobSettings:
    """The JobSettings of a command's parsed options (--warmup, --iters, --check, --backend (auto:
    None), --device, --seed, --l2, where the command has them); `overrides` replace them."""
    backend = params.get("backend")
    settings = JobSettings(warmup=params.get("warmup", 1), iters=params.get("iters", 3),
                           check=params.get("check", True), backend=None if backend == "auto" else backend,
                           device=params.get("device", 0), seed=params.get("seed", 0), l2=params.get("l2", True))
    return dataclasses.replace(settings, **overrides)


def bar_progress(bar):
    """A job's progress callback (stage, steps) that moves click's progress bar."""
    return lambda stage, steps: bar.update(steps)


def json_option(help_text: str):
    return click.option("--json", "as_json", is_flag=True, envvar="ACL_FA_JSON", show_envvar=True, help=help_text)


def seed_option(help_text: str = "Seed of the random inputs."):
    return click.option("--seed", type=click.IntRange(min=0), envvar="ACL_FA_SEED", default=0, show_default=True,
                        show_envvar=True, help=help_text)


def backward_option(help_text: str):
    """--backward, whose meaning each command states (run: both passes; plan, bench: the backward's)."""
    return click.option("--backward", is_flag=True, envvar="ACL_FA_BACKWARD", show_envvar=True, help=help_text)


deterministic_option = click.option(
    "--deterministic/--atomic", envvar="ACL_FA_DETERMINISTIC", default=True, show_default=True, show_envvar=True,
    help="Backward dQ: summed in a fixed order (bit-identical runs) or with fp32 atomic adds.")


class _IntList(click.ParamType):
    """Comma-separated integers of a fixed count (or any count when count is None) and a minimum."""

    def __init__(self, name: str, count=None, minimum: int = 1):
        self.name, self.count, self.minimum = name, count, minimum

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return tuple(value)
        try:
            values = tuple(int(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if self.count is not None and len(values) != self.count:
            self.fail(f"{value!r}: expected {self.count} comma-separated integers ({self.name})", param, ctx)
        if not values or min(values) < self.minimum:
            self.fail(f"{value!r}: every value must be >= {self.minimum}", param, ctx)
        return values


# The V2 options (docs/attention_options.md), shared by `run` and `plan`.
window_option = click.option(
    "--window", type=_IntList("L,R", count=2, minimum=-1), envvar="ACL_FA_WINDOW", default=None, show_envvar=True,
    metavar="L,R", help="Sliding window: query i sees keys i+Skv-Sq-L .. i+Skv-Sq+R; -1 = unbounded. Combines with "
                        "--causal by intersection.")


varlen_option = click.option(
    "--varlen", type=_IntList("S[,S...]"), envvar="ACL_FA_VARLEN", default=None, show_envvar=True,
    metavar="S[,S...]", help="A variable-length batch (layout TND) of sequences of these lengths (queries and keys "
                             "alike); replaces --seq/--seq-kv/--batch/--layout.")


dropout_option = click.option(
    "--dropout", type=click.FloatRange(min=0.0, max=1.0, max_open=True), envvar="ACL_FA_DROPOUT", default=0.0,
    show_default=True, show_envvar=True, metavar="P",
    help="Dropout probability inside the kernel (Philox4x32-10 on the vector unit, offset 0).")


mask_density_option = click.option(
    "--mask-density", type=click.FloatRange(min=0.0, max=1.0, max_open=True), envvar="ACL_FA_MASK_DENSITY",
    default=None, show_envvar=True, metavar="F",
    help="A key-padding attn_mask [B, 1, 1, Skv] hiding the last F of the keys (fraction in [0, 1)).")


precision_option = click.option(
    "--precision", type=click.Choice(["high_precision", "high_performance"]), envvar="ACL_FA_PRECISION",
    default="high_precision", show_default=True, show_envvar=True,
    help="high_performance (float16/bfloat16): S = QK^T leaves the cube rounded to the input dtype "
         "(FlashAttentionV4 inner_precise 1), halving its bytes through GM. docs/attention_options.md")


alibi_option = click.option(
    "--alibi", is_flag=True, envvar="ACL_FA_ALIBI", show_envvar=True,
    help="ALiBi with the ALiBi paper's slopes 2^(-8h/N), h = 1..N (FlashAttentionV5; docs/attention_options.md).")
softcap_option = click.option(
    "--softcap", type=click.FloatRange(min=0.0), envvar="ACL_FA_SOFTCAP", default=0.0, show_default=True,
    show_envvar=True, metavar="C", help="Soft-capping: scores = C tanh(scores / C) (FlashAttentionV3); 0 = off.")
sinks_option = click.option(
    "--sinks", is_flag=True, envvar="ACL_FA_SINKS", show_envvar=True,
    help="Attention sinks: one random logit per head (seeded by --seed) in every row's softmax denominator "
         "(FlashAttentionV5).")

_RUN_OPTION_OPTIONS = [window_option, dropout_option, mask_density_option, varlen_option, precision_option,
                       alibi_option, softcap_option, sinks_option]


def run_option_options(function):
    for option in reversed(_RUN_OPTION_OPTIONS):
        function = option(function)
    return function


_DECODE_OPTIONS = [
    click.option("--decode", is_flag=True, envvar="ACL_FA_DECODE", show_envvar=True, help="Decode against a device KV cache (flash_attention_with_kvcache)."),
    click.option("--paged", is_flag=True, envvar="ACL_FA_PAGED", show_envvar=True, help="Decode with a paged KV cache (implies --decode)."),
    click.option("--block-size", type=click.IntRange(min=16), envvar="ACL_FA_BLOCK_SIZE", default=128,
                 show_default=True, show_envvar=True, metavar="N",
                 help="Keys per cache block with --paged (a multiple of 16)."),
    click.option("--steps", type=click.IntRange(min=1), envvar="ACL_FA_STEPS", default=8, show_default=True,
                 show_envvar=True, metavar="N",
                 help="Decode steps, each appending --seq tokens per sequence to the cache."),
    click.option("--num-splits", type=click.IntRange(min=0, max=2**31 - 1), envvar="ACL_FA_NUM_SPLITS", default=0,
                 show_default=True, show_envvar=True, metavar="S",
                 help="0: each sequence's keys split over all cores; 1: one core per sequence and kv head; S >= 2: "
                      "S pieces per sequence and kv head (clamped to the vector cores and the key chunks)."),
    click.option("--prefill/--no-prefill", envvar="ACL_FA_PREFILL", default=None, show_envvar=True,
                 help="Fill the cache by a timed prefill (flash_attention over the --seq-kv prompt tokens, then "
                      "its K/V into the cache on the device), or from the host. Default: the prefill when "
                      "batch x heads x seq_kv^2 <= 32 x 4096^2 (beyond, the simulator takes long)."),
]


def decode_settings_of(params: dict) -> decode_run.DecodeSettings:
    """The DecodeSettings of the decode options (shared by run and bench)."""
    return decode_run.DecodeSettings(block_size=params["block_size"] if params["paged"] else None,
                                     num_splits=params["num_splits"], steps=params["steps"],
                                     prefill=params["prefill"])


def decode_problem_of(params: dict, seq_kv: int, seq_q: int):
    """The decode run's Problem: `seq_q` query tokens per step against `seq_kv` cached tokens."""
    return decode_run.decode_problem(seq_kv, seq_q=seq_q, batch=params["batch"], num_heads=params["heads"],
                                     num_kv_heads=params["kv_heads"], head_dim=params["head_dim"], dtype=params["dtype"])


def decode_options(function):
    for option in reversed(_DECODE_OPTIONS):
        function = option(function)
    return function
