#!/usr/bin/env bash
# Builds the FlashAttention custom operator package (.run).
#
#   ./build.sh [--soc SOC] [--vendor NAME] [--build-dir DIR] [--install-path DIR]
#       On a CANN host: CANN's own op-project flow (docs/cann-facts.md#operator-project-build). msopgen
#       generates one project from every op_host/<family>/*.json (FlashAttention, FlashAttentionGrad, ...:
#       one JSON list of their descriptions), our op_host/ and op_kernel/ sources, flattened from their
#       op folders (<family>/, common/) into the project's flat op_host/ and op_kernel/, replace
#       the generated stubs, the generated CMake presets configure it (vendor, CANN path, SoC),
#       targets "binary" then "package" build it; the .run is copied to
#       <build-dir>/custom_opp_<os-id>_<arch>.run.
#   ./build.sh --sim [--vendor NAME] [--build-dir DIR] [--sim-lib-dir DIR] [--install-path DIR]
#       No CANN needed: the simulator libraries (CMake, Release, <build-dir>/sim) packed with the
#       same vendors layout into <build-dir>/custom_opp_sim_<arch>.run (scripts/pack_sim.sh).
#
# Exit status: 0 built, 1 build failed, 2 bad usage or no CANN found.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
caller_pwd="$PWD"
# Each op's msopgen description sits in its family folder, op_host/<family>/<op>.json (C order).
mapfile -t op_jsons < <(find "$repo/op_host" -mindepth 2 -maxdepth 2 -name '*.json' | LC_ALL=C sort)

usage() {
  cat <<EOF
Usage: ./build.sh [options]

Builds the acl-fa FlashAttention custom operator package (.run).

  --sim               build the CPU simulator's package (no CANN needed)
  --soc SOC[,SOC...]  target SoCs for the CANN build: ascend910b, ascend910_93, ascend310p, ascend910
                      (one kernel binary per SoC; default: the SoC npu-smi reports, else ascend910b)
  --vendor NAME       vendor name of the package (default: acl_fa)
  --build-dir DIR     output directory (default: $repo/build_out)
  --sim-lib-dir DIR   with --sim: pack the libraries already built in DIR instead of building
  --install-path DIR  install the built package into DIR (runs the .run with --install-path)
  -h, --help          this text

CANN is looked for in \$ASCEND_HOME_PATH, \$ASCEND_TOOLKIT_HOME,
/usr/local/Ascend/ascend-toolkit/latest and \$HOME/Ascend/ascend-toolkit/latest.
EOF
}

die_usage() { echo "build.sh: $*" >&2; echo "Run ./build.sh --help for the options." >&2; exit 2; }
die() { echo "build.sh: $*" >&2; exit 1; }
step() { echo "== $*"; }

sim=0
soc=""
vendor="acl_fa"
build_dir="$repo/build_out"
sim_lib_dir=""
install_path=""
while (($#)); do
  case "$1" in
    --sim) sim=1 ;;
    --soc | --vendor | --build-dir | --sim-lib-dir | --install-path)
      (($# >= 2)) || die_usage "$1 needs a value"
      case "$1" in
        --soc) soc="$2" ;;
        --vendor) vendor="$2" ;;
        --build-dir) build_dir="$2" ;;
        --sim-lib-dir) sim_lib_dir="$2" ;;
        --install-path) install_path="$2" ;;
      esac
      shift ;;
    --soc=* | --vendor=* | --build-dir=* | --sim-lib-dir=* | --install-path=*)
      value="${1#*=}"
      case "$1" in
        --soc=*) soc="$value" ;;
        --vendor=*) vendor="$value" ;;
        --build-dir=*) build_dir="$value" ;;
        --sim-lib-dir=*) sim_lib_dir="$value" ;;
        --install-path=*) install_path="$value" ;;
      esac ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
  shift
done
[[ "$vendor" =~ ^[A-Za-z0-9_]+$ ]] || die_usage "--vendor '$vendor': letters, digits and '_' only"
[[ -z "$sim_lib_dir" || $sim == 1 ]] || die_usage "--sim-lib-dir goes with --sim"
# --soc is checked before anything else (before CANN is looked for) and is never dropped.
if ((sim)) && [[ -n "$soc" ]]; then
  die_usage "--soc $soc goes with the CANN build; --sim packs the simulator of every simulated SoC (pick one at run time with ACL_FA_SIM_SOC)"
fi
socs=()
if [[ -n "$soc" ]]; then
  IFS=, read -r -a socs <<<"$soc"
  ((${#socs[@]} > 0)) || die_usage "--soc needs at least one SoC"
  for one in "${socs[@]}"; do
    case "$one" in
      ascend910b | ascend910_93 | ascend310p | ascend910) ;;
      *) die_usage "--soc $one: the operator is registered for ascend910b, ascend910_93, ascend310p and ascend910" ;;
    esac
  done
fi
mkdir -p "$build_dir"
build_dir="$(cd "$build_dir" && pwd)"
version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$repo/pyproject.toml" | head -n 1)"

# Runs the package's installer. CANN's installer takes absolute paths only, so a relative one
# is made absolute here, against the caller's directory.
install_run() {
  local run="$1"
  [[ "$install_path" == /* ]] || install_path="$caller_pwd/$install_path"
  step "installing $run into $install_path"
  bash "$run" "--install-path=$install_path"
}

# ---- simulator package ----------------------------------------------------------------------------
build_sim() {
  local libs="$sim_lib_dir"
  if [[ -z "$libs" ]]; then
    local cmake_dir="$build_dir/sim"
    step "building the simulator libraries (CMake, Release) in $cmake_dir"
    local generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$repo" -B "$cmake_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DACL_FA_BUILD_PYTHON=OFF
    cmake --build "$cmake_dir" --target cust_opapi acl_rt \
      --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
    libs="$cmake_dir/lib"
  fi
  step "packing $libs"
  local run
  run="$("$repo/scripts/pack_sim.sh" "$libs" "$build_dir" "$vendor" "$version")"
  echo "built $run"
  if [[ -n "$install_path" ]]; then install_run "$run"; fi
}

# ---- CANN ---------------------------------------------------------------------------------------------
looked=()  # what find_cann examined, for the error message

# First toolkit root with msopgen; sources its set_env.sh when the environment has no CANN yet.
find_cann() {
  local root set_env
  local roots=("${ASCEND_HOME_PATH:-}" "${ASCEND_TOOLKIT_HOME:-}"
    /usr/local/Ascend/ascend-toolkit/latest "$HOME/Ascend/ascend-toolkit/latest")
  for root in "${roots[@]}"; do
    [[ -n "$root" ]] || continue
    if [[ ! -d "$root" ]]; then looked+=("$root: no such directory"); continue; fi
    if [[ -z "${ASCEND_OPP_PATH:-}" ]]; then
      for set_env in "$root/../set_env.sh" "$root/set_env.sh" "$root/$(uname -m)-linux/script/set_env.sh"; do
        if [[ -f "$set_env" ]]; then
          step "sourcing $set_env"
          # shellcheck disable=SC1090
          set +u; source "$set_env"; set -u
          break
        fi
      done
    fi
    if [[ -x "$root/python/site-packages/bin/msopgen" ]]; then
      cann_root="$(cd "$root" && pwd)"
      msopgen="$root/python/site-packages/bin/msopgen"
      return 0
    fi
    if command -v msopgen >/dev/null; then
      cann_root="$(cd "$root" && pwd)"
      msopgen="$(command -v msopgen)"
      return 0
    fi
    looked+=("$root: no python/site-packages/bin/msopgen (not a CANN toolkit)")
  done
  return 1
}

no_cann() {
  {
    echo "build.sh: CANN (Ascend toolkit with msopgen) not found. Looked at:"
    if ((${#looked[@]})); then printf '  %s\n' "${looked[@]}"; fi
    echo "  ASCEND_HOME_PATH=${ASCEND_HOME_PATH:-(unset)} ASCEND_TOOLKIT_HOME=${ASCEND_TOOLKIT_HOME:-(unset)}"
    cat <<EOF
To build the real operator package, install the CANN toolkit (ascend-toolkit, 8.0 or later) and
source its environment, e.g.
    source /usr/local/Ascend/ascend-toolkit/set_env.sh
then run ./build.sh again. Without CANN, ./build.sh --sim builds the CPU simulator's package.
EOF
  } >&2
  exit 2
}

# The SoC from npu-smi (chip names like 910B3 or Ascend910_9392), else ascend910b.
detect_soc() {
  local info
  if command -v npu-smi >/dev/null && info="$(npu-smi info 2>/dev/null)"; then
    if grep -Eq '910_?93' <<<"$info"; then echo ascend910_93; return; fi
    if grep -Eq '910B' <<<"$info"; then echo ascend910b; return; fi
    if grep -Eq '310P' <<<"$info"; then echo ascend310p; return; fi
    if grep -Eq '910A|910Pro|910Premium' <<<"$info"; then echo ascend910; return; fi
  fi
  echo ascend910b
}

# The sources and headers of <tree>/<family>/ (op_host or op_kernel) matching the name patterns.
op_files() {
  local tree="$1"; shift
  local names=() pattern
  for pattern in "$@"; do names+=(-o -name "$pattern"); done
  find "$repo/$tree" -mindepth 2 -maxdepth 2 -type f \( "${names[@]:1}" \) | LC_ALL=C sort
}

# The msopgen project's op_host/ and op_kernel/ are flat: a file name used twice among what lands in
# one of them (op_host: op_host/*/ and op_kernel/*/'s headers; op_kernel: op_kernel/*/) would
# overwrite the other there. Refuses such a clash. (op_host/<family>/<op>.cpp and
# op_kernel/<family>/<op>.cpp share a name by msopgen's convention: they go to different places.)
check_unique_names() {
  local clashes
  clashes="$( { op_files op_host '*.cpp' '*.h'; op_files op_kernel '*.h'; } | names_used_twice)"
  clashes+="$(op_files op_kernel '*.cpp' '*.h' | names_used_twice)"
  [[ -z "$clashes" ]] || die "a file name is used in two op folders (the msopgen project is flat):
$clashes"
}

# Of the paths on stdin, the file names given more than once, each with its paths.
names_used_twice() {
  awk -F/ '{ n = $NF; seen[n] = seen[n] "\n  " $0; count[n]++ }
           END { for (n in count) if (count[n] > 1) printf "%s:%s\n", n, seen[n] }'
}

build_cann() {
  find_cann || no_cann
  ((${#op_jsons[@]})) || die "no op_host/*/*.json: the operators' interfaces msopgen generates the project from"
  if ((${#socs[@]} == 0)); then soc="$(detect_soc)"; socs=("$soc"); fi
  local project="$build_dir/op_project"
  step "CANN $cann_root, SoC $soc, vendor $vendor"
  step "msopgen gen -> $project"
  rm -rf "$project"
  local op_json="$build_dir/ops.json"
  python3 -c 'import json, sys; json.dump([op for f in sys.argv[2:] for op in json.load(open(f))], open(sys.argv[1], "w"), indent=1)' \
    "$op_json" "${op_jsons[@]}"
  "$msopgen" gen -i "$op_json" -c "ai_core-${socs[0]}" -lan cpp -out "$project"
  step "placing op_host/ and op_kernel/ sources (flattened from their op folders)"
  check_unique_names
  local host_files kernel_files kernel_headers
  mapfile -t host_files < <(op_files op_host '*.cpp' '*.h')
  mapfile -t kernel_files < <(op_files op_kernel '*.cpp' '*.h')
  mapfile -t kernel_headers < <(op_files op_kernel '*.h')
  cp "${host_files[@]}" "$project/op_host/"
  # op_host includes op_kernel's tiling structs and band rule by bare name: the generated op_host
  # compiles its own directory only, so those headers are placed next to the host sources too.
  cp "${kernel_headers[@]}" "$project/op_host/"
  cp "${kernel_files[@]}" "$project/op_kernel/"
  step "configuring with the generated presets"
  # The generated CMakePresets.json ("default") is used as generated; the values that differ
  # here are given on the command line, which overrides a preset's cache variables.
  (cd "$project" && cmake -S . -B build_out --preset=default \
    -Dvendor_name="$vendor" -DASCEND_CANN_PACKAGE_PATH="$cann_root" -DASCEND_COMPUTE_UNIT="$(IFS=';'; echo "${socs[*]}")")
  step "building the kernel binaries and the package"
  cmake --build "$project/build_out" --target binary --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  cmake --build "$project/build_out" --target package --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  local runs=("$project"/build_out/custom_opp_*.run)
  [[ -f "${runs[0]}" ]] || die "the CANN build produced no custom_opp_*.run in $project/build_out"
  cp -f "${runs[0]}" "$build_dir/"
  local run="$build_dir/$(basename "${runs[0]}")"
  echo "built $run"
  if [[ -n "$install_path" ]]; then install_run "$run"; fi
}

if ((sim)); then build_sim; else build_cann; fi
