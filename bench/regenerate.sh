#!/usr/bin/env bash
# Re-runs every command whose output is pasted in README.md and bench/RESULTS.md, from a checkout
# after `pip install .`; each output goes to bench/regenerated/<name>.txt (and the terminal).
#
#   bench/regenerate.sh              # the cheap ones: readme (acl-fa run), plan
#   bench/regenerate.sh all          # everything below (about 15 minutes on 2 cores)
#   bench/regenerate.sh bench soc    # chosen sections
#
# Sections: readme current plan bench soc l2 efficiency rss overhead torch matmul backward model sweep ring decode
#   dropout window mask headdim mods int8 cluster
#   cluster   the scale-out runs (needs Open MPI's mpirun): the 2 x 2 check, and the 8 x 8 hosts at
#             S = 262144 (about 7 minutes of run and 15 of check on an idle 2-core host); not in `all`
#   backward  the FlashAttentionGrad rows (torch for its comparison; about 30 minutes on 2 cores)
#   torch   needs torch (pip install torch --index-url https://download.pytorch.org/whl/cpu)
#   matmul, dropout, model (its GEMM and validation rows)  need a development build with the test kernels:
#           cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build
#           and ACL_FA_SIM_LIB_DIR=$PWD/build/lib in the environment
# Simulator times are host wall time of the CPU simulator, never NPU timings; they depend on the
# machine and its load (each bench script prints both with its numbers).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
out=bench/regenerated
mkdir -p "$out"

run() {  # run NAME COMMAND...: the command and its output into $out/NAME.txt
    local name=$1
    shift
    echo "== $name: $*" >&2
    { echo "\$ $*"; "$@"; } | tee "$out/$name.txt"   # stderr (progress bars) stays on the terminal
}

section() {
    case $1 in
        readme) run readme-run acl-fa run --seq 4096 --causal ;;
        current)  # the "Current figures" part of bench/RESULTS.md
            run current-profile acl-fa profile --seq 4096 --causal
            run current-trace bash -c "acl-fa profile --seq 4096 --causal --trace $out/trace_default.json 2>&1"
            run current-trace-full bash -c "acl-fa profile --seq 4096 --causal --trace $out/trace_full.json --trace-full 2>&1"
            run current-trace-sizes bash -c "wc -c $out/trace_default.json $out/trace_full.json; for f in $out/trace_default.json $out/trace_full.json; do $PYTHON -c 'import json, sys, time; t = time.perf_counter(); d = json.load(open(sys.argv[1])); print(sys.argv[1], len(d[\"traceEvents\"]), \"events, json.load\", round(time.perf_counter() - t, 2), \"s\")' \$f; done"
            rm -f "$out/trace_default.json" "$out/trace_full.json" ;;
        plan) run plan acl-fa plan --seq 4096 --causal --soc all ;;
        bench)
            run bench-causal acl-fa bench --seq 512,1024,2048,4096 --causal --iters 5 --plot bench/bench_causal.png
            run bench-full acl-fa bench --seq 512,1024,2048,4096 --iters 5 ;;
        soc)
            for chip in Ascend910B1 Ascend910B2 Ascend910B3 Ascend910B4 Ascend910_93; do
                run "soc-$chip" env ACL_FA_SIM_SOC=$chip acl-fa bench --seq 4096 --causal --iters 1 --warmup 0
            done ;;
        l2) run l2-sensitivity "$PYTHON" bench/l2_sensitivity.py ;;
        efficiency) run work-efficiency "$PYTHON" bench/work_efficiency.py --runs 3 ;;
        rss) run peak-rss "$PYTHON" bench/peak_rss.py ;;
        overhead) run driver-overhead "$PYTHON" bench/driver_overhead.py --runs 7 --calls 1000 ;;
        torch) run vs-torch "$PYTHON" bench/vs_torch.py --runs 5 ;;
        matmul) run sim-matmul "$PYTHON" bench/sim_matmul.py ;;
        dropout) run philox-tile-cost "$PYTHON" bench/philox_tile_cost.py --lanes 32 64 128 256 ;;
        backward)
            run backward-plan acl-fa plan --backward --seq 4096 --causal --soc all
            run backward-run acl-fa run --seq 4096 --causal --backward --iters 1 --warmup 0
            run backward-run-atomic acl-fa run --seq 4096 --causal --backward --atomic --iters 1 --warmup 0 --no-check
            run backward-bench acl-fa bench --backward --seq 4096 --causal --iters 1 --warmup 0
            run backward-bench-n2 acl-fa bench --backward --seq 4096 --heads 2 --causal --iters 1 --warmup 0
            run backward-rss "$PYTHON" bench/backward_rss.py --seq 32768 --heads 8 --head-dim 128
            run backward-rss-atomic "$PYTHON" bench/backward_rss.py --seq 32768 --heads 8 --head-dim 128 --atomic
            run backward-window "$PYTHON" bench/backward_window.py --seq 32768 --heads 1 --head-dim 128 --window 256,0
            run backward-options "$PYTHON" bench/backward_options.py --seq 4096 --heads 2 --head-dim 128 --dropout 0.1 --repeat 7
            run backward-score-mods "$PYTHON" bench/backward_score_mods.py --seq 4096 --heads 32 --head-dim 128
            run backward-narrow-scores "$PYTHON" bench/backward_narrow_scores_accuracy.py
            run backward-third-step "$PYTHON" bench/backward_third_step.py --seq 4096 --heads 32,8 --relieve ;;
        model)
            run model-profile acl-fa profile --seq 4096 --causal --plot bench/profile_4096_causal.png
            run model-sensitivity acl-fa profile --seq 4096 --heads 8 --causal --sensitivity
            run model-fa "$PYTHON" bench/fa_model.py
            run model-gemm "$PYTHON" bench/gemm_model.py
            run model-validation "$PYTHON" bench/model_validation.py
            run forward-second-step "$PYTHON" bench/forward_second_step.py
            run forward-third-step "$PYTHON" bench/forward_third_step.py ;;
        sweep)
            run sweep-4096 acl-fa plan --seq 4096 --heads 8 --causal --sweep --plot bench/sweep_4096_causal.png
            run sweep-4096-310p env ACL_FA_SIM_SOC=Ascend310P3 acl-fa plan --seq 4096 --heads 8 --causal --sweep
            run sweep-before-after "$PYTHON" bench/block_choice.py ;;
        ring)
            run ring-model "$PYTHON" bench/ring_model.py
            run ring-merge "$PYTHON" bench/ring_merge.py
            run ring-memory "$PYTHON" bench/ring_memory.py --seq 4096 8192 32768
            run ring-memory-output "$PYTHON" bench/ring_memory.py --seq 4096 8192 32768 --accumulate output
            run ring-rounding "$PYTHON" bench/ring_rounding.py --device
            run ring-rounding-4-rows "$PYTHON" bench/ring_rounding.py --block-rows 4 --seeds 4
            run ring-backward-4096 acl-fa run --parallel ring --devices 8 --seq 4096 --causal --backward
            run ring-backward-copies "$PYTHON" bench/ring_backward_copies.py 8 4096
            run ring-fused-model "$PYTHON" bench/ring_fused_model.py
            run ring-fused-kernel env ACL_FA_SIM_SOC=Ascend910_93 "$PYTHON" bench/ring_fused_kernel.py
            run ulysses-model "$PYTHON" bench/ulysses_model.py
            run usp-backward "$PYTHON" bench/usp_backward.py ;;
        window) run window-work "$PYTHON" bench/window_work.py --seq 32768 --heads 1 --window 256,0 ;;
        mask)
            run mask-dropout-work "$PYTHON" bench/mask_dropout_work.py --seq 4096 --heads 2 --dropout 0.1 --runs 5
            run host-lane-rate "$PYTHON" bench/host_lane_rate.py ;;
        decode)
            local common=(--heads 32 --kv-heads 8 --head-dim 128)
            run decode-paged acl-fa bench --decode --paged --block-size 128 --seq-kv 32768 "${common[@]}" --steps 4
            run decode-batch acl-fa bench --decode --paged --block-size 128 --seq-kv 4096 --batch 32 "${common[@]}" --steps 2
            run decode-contiguous acl-fa bench --decode --seq-kv 32768 "${common[@]}" --steps 4
            run decode-loop acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8 --paged --steps 64 --json
            run decode-step-contiguous acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8 --decode
            run decode-step-paged acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8 --paged
            run decode-step-batch acl-fa run --seq 1 --seq-kv 4096 --kv-heads 8 --batch 32 --paged
            run decode-step-1k acl-fa run --seq 1 --seq-kv 1024 --kv-heads 8 --decode
            run decode-step-sq16 acl-fa run --seq 16 --seq-kv 32768 --kv-heads 8 --decode
            run decode-routed acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8
            run decode-routed-sq16 acl-fa run --seq 16 --seq-kv 32768 --kv-heads 8 --causal
            run decode-route-plan acl-fa plan --seq 1 --seq-kv 32768 --kv-heads 8
            run decode-routing "$PYTHON" bench/decode_routing.py
            run decode-mods "$PYTHON" bench/decode_mods.py --seq-kv 32768
            run decode-mods-paged "$PYTHON" bench/decode_mods.py --seq-kv 32768 --paged
            run decode-rows "$PYTHON" bench/decode_mods.py --seq-kv 32768 --rows
            run decode-rows-step acl-fa run --seq 64 --seq-kv 32768 --heads 64 --kv-heads 8 --decode --steps 1 ;;
        mods)
            run score-mods-cost "$PYTHON" bench/score_mods_cost.py ;;
        int8)
            run int8-prefill "$PYTHON" bench/int8_prefill.py --heads 32 --seq 4096
            run int8-prefill-blocks "$PYTHON" bench/int8_prefill.py --heads 32 --seq 4096 --int8-blocks 256x512
            run int8-prefill-310p-small env ACL_FA_SIM_SOC=Ascend310P3 "$PYTHON" bench/int8_prefill.py --heads 8 --seq 2048
            run int8-prefill-310p env ACL_FA_SIM_SOC=Ascend310P3 "$PYTHON" bench/int8_prefill.py --heads 32 --seq 4096
            run decode-int8 "$PYTHON" bench/decode_int8.py --seq-kv 32768
            run decode-int8-chips "$PYTHON" bench/decode_int8.py --soc-check
            run decode-int8-step acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8 --decode --kv-cache-dtype int8 --steps 2
            run decode-int8-step-paged acl-fa run --seq 1 --seq-kv 32768 --kv-heads 8 --paged --kv-cache-dtype int8 --steps 2 ;;
        cluster)
            run cluster-small "$PYTHON" bench/cluster_scale.py --hosts 2 --per-host 2 --seq 8192 --ranks-as processes
            run cluster-8x8 "$PYTHON" bench/cluster_scale.py --hosts 8 --per-host 8 --seq 262144 --head-dim 64 \
                --check-rows 16 ;;
        memfit) run workspace-fit "$PYTHON" bench/workspace_fit.py ;;
        headdim)
            run head-dim-padding "$PYTHON" bench/head_dim_padding.py --seq 2048 --heads 8 --dims 1,8,40,59,111,200
            run head-dim-plan acl-fa plan --seq 4096 --causal --head-dim 59 ;;
        all) for s in readme current plan bench soc l2 efficiency rss overhead torch matmul dropout backward model sweep ring decode window mask headdim mods int8 memfit; do section "$s"; done ;;
        *) echo "regenerate.sh: unknown section '$1'" >&2; exit 2 ;;
    esac
}

if (($# == 0)); then set -- readme plan; fi
for s in "$@"; do section "$s"; done
