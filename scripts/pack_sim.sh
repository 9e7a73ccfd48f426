#!/usr/bin/env bash
# Packs the simulator's operator library into a custom operator .run with CANN's vendors layout.
#
#   scripts/pack_sim.sh LIB_DIR OUT_DIR VENDOR VERSION
#
# LIB_DIR: a directory holding libcust_opapi.so and the simulator libraries it needs (a build's
# lib/, or an installed acl_fa/_sim/lib). Packed: op_api/lib/libcust_opapi.so plus every library
# of LIB_DIR in its DT_NEEDED closure, the per-architecture kernel binaries
# libflash_attention_kernel_<arch>.so it loads and theirs, plus libacl_rt.so (the runtime name
# acl-fa loads first), so that op_api/lib is a complete simulator library directory;
# op_api/include/aclnn_*.h;
# version.info. Writes OUT_DIR/custom_opp_sim_<arch>.run and prints its path.
set -euo pipefail

(($# == 4)) || { echo "usage: $0 LIB_DIR OUT_DIR VENDOR VERSION" >&2; exit 2; }
lib_dir="$(cd "$1" && pwd)"
out_dir="$2"
vendor="$3"
version="$4"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="$(uname -m)"

die() { echo "pack_sim: $*" >&2; exit 1; }
command -v makeself >/dev/null ||
  die "makeself not found: install it (Debian/Ubuntu: apt-get install makeself)"
[[ -f "$lib_dir/libcust_opapi.so" ]] || die "$lib_dir has no libcust_opapi.so (build the simulator first)"
[[ "$vendor" =~ ^[A-Za-z0-9_]+$ ]] || die "vendor name '$vendor': letters, digits and '_' only"

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
has_origin_rpath() { readelf -d "$1" | grep -E '\((RPATH|RUNPATH)\)' | grep -q '\$ORIGIN'; }

# The DT_NEEDED closure of libcust_opapi.so and of the kernel binaries it loads (one per
# architecture, next to it) within lib_dir (system libraries stay outside).
closure=(libcust_opapi.so)
for kernel in "$lib_dir"/libflash_attention_kernel_*.so; do
  [[ -f "$kernel" ]] && closure+=("$(basename "$kernel")")
done
for ((i = 0; i < ${#closure[@]}; i++)); do
  lib="${closure[i]}"
  while IFS= read -r dep; do
    [[ -f "$lib_dir/$dep" ]] || continue
    # A packaged library that needs another packaged one must find it next to itself.
    has_origin_rpath "$lib_dir/$lib" ||
      die "$lib_dir/$lib needs $dep but has no \$ORIGIN in its RPATH/RUNPATH"
    [[ " ${closure[*]} " == *" $dep "* ]] || closure+=("$dep")
  done < <(needed "$lib_dir/$lib")
done
if [[ -f "$lib_dir/libacl_rt.so" && " ${closure[*]} " != *" libacl_rt.so "* ]]; then
  closure+=(libacl_rt.so)
fi

stage="$(mktemp -d "${TMPDIR:-/tmp}/acl_fa_pack.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
vdir="$stage/packages/vendors/$vendor"
mkdir -p "$vdir/op_api/lib" "$vdir/op_api/include"
for lib in "${closure[@]}"; do
  cp --preserve=mode "$lib_dir/$lib" "$vdir/op_api/lib/"
done
# the declarations libcust_opapi.so was built from: generated from the op JSON as the build does
find "$repo/op_host" -mindepth 2 -maxdepth 2 -name '*.json' -print0 |
  xargs -0 python3 "$repo/sim/src/opapi/gen_aclnn.py" --headers-only --out "$vdir/op_api/include"
# version.info: CANN's key (the compiler that built the kernels: none here), then ours; acl-fa's
# op-library discovery reads acl_fa_backend to tell a simulator package from an NPU one.
cat >"$vdir/version.info" <<EOF
custom_opp_compiler_version=none (CPU simulator build)
acl_fa_version=$version
acl_fa_backend=sim
EOF
cp "$repo/scripts/install.sh" "$repo/scripts/help.info" "$repo/scripts/set_env.bash.in" "$stage/"
echo "vendor=$vendor" >"$stage/package.info"

mkdir -p "$out_dir"
run="$(cd "$out_dir" && pwd)/custom_opp_sim_${arch}.run"
makeself --quiet --header "$repo/scripts/run_header.sh" --tar-format posix --gzip --complevel 4 \
  --nomd5 --nocrc --sha256 "$stage" "$run" "acl-fa simulator operator package $version ($vendor)" \
  install.sh >/dev/null
echo "$run"
