#!/usr/bin/env bash
# Installer of an acl-fa custom operator package (.run). The .run unpacks itself into a temporary
# directory and runs this script there, with every argument the user gave (see help.info).
#
# Payload (next to this script): packages/vendors/<vendor>/... in CANN's vendors layout
# (docs/cann-facts.md#custom-operator-packages), package.info (vendor=<name>).
#
# Target root T, as CANN's own installer chooses it: --install-path, else $ASCEND_CUSTOM_OPP_PATH
# (one directory, no ':'), else $ASCEND_OPP_PATH (then vendors/config.ini load_priority gets our
# vendor first). Files go to T/vendors/<vendor>/; bin/set_env.bash is written there.
#
# Every file written and every directory created is recorded (relative to T; T and the parents
# made for it by absolute path) in the manifest
# T/vendors/<vendor>/.acl_fa_manifest; --uninstall removes exactly those (and the config.ini
# changes it recorded), so files that were there before stay.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The .run's header exports USER_PWD (the directory the user ran it from): relative paths are
# relative to it, not to the temporary directory this script runs in.
user_pwd="${USER_PWD:-$PWD}"
manifest_name=".acl_fa_manifest"

quiet=0
force=0
uninstall=0
install_path=""
have_install_path=0

say() { if ((quiet == 0)); then printf '[acl-fa package] %s\n' "$*"; fi; }
die() { printf '[acl-fa package] ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
  cat "$here/help.info"
}

while (($#)); do
  case "$1" in
    --install-path=*) install_path="${1#--install-path=}"; have_install_path=1 ;;
    --install-path)
      (($# >= 2)) || die "--install-path needs a directory (--install-path=DIR)"
      install_path="$2"; have_install_path=1; shift ;;
    --uninstall) uninstall=1 ;;
    --force) force=1 ;;
    --quiet) quiet=1 ;;
    --install-for-all) ;;  # accepted as CANN's installer does; permissions follow the umask here
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (run with --help)" ;;
  esac
  shift
done

vendor="$(sed -n 's/^vendor=//p' "$here/package.info")"
[[ -n "$vendor" ]] || die "package.info names no vendor (damaged package)"
payload="$here/packages/vendors/$vendor"
[[ -d "$payload" ]] || die "payload $payload missing (damaged package)"

# ---- the target root --------------------------------------------------------------------------

# Absolute form of a user-given directory. The part that exists is resolved by the kernel (so
# "a_file/.." fails as it would for mkdir); the part still to be created may not contain "." or
# "..". Prints the path; fails naming the offending component.
absolute_dir() {
  local raw="$1" head tail=""
  [[ -n "$raw" ]] || die "--install-path: empty path"
  [[ "$raw" == /* ]] || raw="$user_pwd/$raw"
  head="$raw"
  while [[ ! -e "$head" ]]; do
    tail="$(basename -- "$head")${tail:+/$tail}"
    head="$(dirname -- "$head")"
  done
  [[ -d "$head" ]] || die "--install-path: '$head' is not a directory (in '$1')"
  head="$(cd -- "$head" && pwd -P)" || die "--install-path: cannot enter '$head'"
  case "/$tail/" in
    */../* | */./*) die "--install-path: '.' or '..' after '$head', which has no such subdirectory yet (in '$1')" ;;
  esac
  printf '%s\n' "${head%/}${tail:+/$tail}"
}

use_config_ini=0
if ((have_install_path)); then
  root="$(absolute_dir "$install_path")"
elif [[ -n "${ASCEND_CUSTOM_OPP_PATH:-}" ]]; then
  [[ "$ASCEND_CUSTOM_OPP_PATH" != *:* ]] ||
    die "ASCEND_CUSTOM_OPP_PATH=$ASCEND_CUSTOM_OPP_PATH holds several directories (':'); the package would not know where to go. Give --install-path=DIR instead."
  root="$(absolute_dir "$ASCEND_CUSTOM_OPP_PATH")"
elif [[ -n "${ASCEND_OPP_PATH:-}" ]]; then
  [[ -d "$ASCEND_OPP_PATH" ]] || die "ASCEND_OPP_PATH=$ASCEND_OPP_PATH is not a directory"
  root="$(absolute_dir "$ASCEND_OPP_PATH")"
  use_config_ini=1
else
  die "no target: give --install-path=DIR, or set ASCEND_CUSTOM_OPP_PATH, or source CANN's set_env.sh (ASCEND_OPP_PATH)"
fi
# CANN splits ASCEND_CUSTOM_OPP_PATH on ':', so a vendor directory with ':' could never be found.
[[ "$root" != *:* ]] || die "install path '$root' contains ':', which ASCEND_CUSTOM_OPP_PATH cannot hold"

vendor_rel="vendors/$vendor"
vendor_dir="$root/$vendor_rel"
manifest="$vendor_dir/$manifest_name"
config_ini="$root/vendors/config.ini"

# ---- config.ini load_priority ---------------------------------------------------------------------

# Prints the load_priority list of config.ini without `vendor`, comma-separated.
priority_without_vendor() {
  local line names=() name
  line="$(sed -n 's/^[[:space:]]*load_priority[[:space:]]*=//p' "$config_ini" | head -n 1)"
  IFS=',' read -r -a names <<<"$line"
  local kept=()
  for name in "${names[@]}"; do
    name="$(echo "$name" | tr -d '[:space:]')"
    [[ -n "$name" && "$name" != "$vendor" ]] && kept+=("$name")
  done
  (IFS=','; printf '%s' "${kept[*]}")
}

# Rewrites the load_priority line (or appends one) keeping every other line of config.ini.
write_priority() {
  local value="$1" tmp
  tmp="$(mktemp "$config_ini.XXXXXX")"
  if grep -q '^[[:space:]]*load_priority[[:space:]]*=' "$config_ini"; then
    awk -v v="$value" '/^[[:space:]]*load_priority[[:space:]]*=/ { print "load_priority=" v; next } { print }' \
      "$config_ini" >"$tmp"
  else
    { cat "$config_ini"; echo "load_priority=$value"; } >"$tmp"
  fi
  chmod --reference="$config_ini" "$tmp"
  mv -f "$tmp" "$config_ini"
}

# ---- uninstall ------------------------------------------------------------------------------------

uninstall_recorded() {
  [[ -f "$manifest" ]] || die "no acl-fa package of vendor '$vendor' at $vendor_dir (no $manifest_name)"
  local kind rel dirs=() removed=0  # dirs: absolute paths in creation order
  while IFS=' ' read -r kind rel; do
    case "$kind" in
      f) rm -f -- "$root/$rel"; removed=$((removed + 1)) ;;
      d) dirs+=("$root/$rel") ;;
      r) dirs+=("$rel") ;;
      p) # our vendor was put first in config.ini's load_priority
        if [[ -f "$config_ini" ]]; then write_priority "$(priority_without_vendor)"; fi ;;
      c) # config.ini was created by the install: removed when nothing else is listed in it
        if [[ -f "$config_ini" ]] && [[ -z "$(priority_without_vendor)" ]] &&
          [[ -z "$(grep -v '^[[:space:]]*load_priority[[:space:]]*=' "$config_ini" | tr -d '[:space:]')" ]]; then
          rm -f -- "$config_ini"
        fi ;;
      *) die "manifest $manifest: unknown entry '$kind $rel'" ;;
    esac
  done <"$manifest"
  rm -f -- "$manifest"
  # Directories in reverse creation order (deepest first); ones holding others' files stay.
  local i
  for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
    rmdir -- "${dirs[i]}" 2>/dev/null || say "kept ${dirs[i]} (not empty)"
  done
  say "removed $removed files of vendor '$vendor' from $root"
}

if ((uninstall)); then
  uninstall_recorded
  exit 0
fi

# ---- install ----------------------------------------------------------------------------------------

if [[ -f "$manifest" ]]; then
  say "replacing the installed acl-fa package of vendor '$vendor' in $root"
  quiet_before=$quiet; quiet=1; uninstall_recorded; quiet=$quiet_before
elif [[ -d "$vendor_dir" ]] && [[ -n "$(ls -A -- "$vendor_dir")" ]] && ((force == 0)); then
  die "$vendor_dir exists, is not empty and was not installed by this package (no $manifest_name); remove it, choose another --install-path, or use --force to install over it"
fi

records=()  # manifest lines, written once everything is in place

# mkdir -p that records each directory it creates (relative to root, parents first).
make_dir() {
  local rel="$1" path="" part parts=()
  [[ "$rel" == "." ]] && return 0
  IFS='/' read -r -a parts <<<"$rel"
  for part in "${parts[@]}"; do
    path="${path:+$path/}$part"
    if [[ ! -d "$root/$path" ]]; then
      mkdir -- "$root/$path" || die "cannot create $root/$path"
      records+=("d $path")
    fi
  done
}

# The root and its missing parents, outermost first (recorded below as made by us).
created_root=()
probe="$root"
while [[ ! -d "$probe" ]]; do created_root=("$probe" "${created_root[@]}"); probe="$(dirname -- "$probe")"; done
for dir in "${created_root[@]}"; do
  mkdir -- "$dir" || die "cannot create $dir"
done
[[ -w "$root" ]] || die "$root is not writable"

make_dir "$vendor_rel"
while IFS= read -r -d '' rel; do
  make_dir "$vendor_rel/${rel#./}"
done < <(cd "$payload" && find . -mindepth 1 -type d -print0 | sort -z)
count=0
while IFS= read -r -d '' rel; do
  rel="${rel#./}"
  cp -f --preserve=mode -- "$payload/$rel" "$vendor_dir/$rel"
  records+=("f $vendor_rel/$rel")
  count=$((count + 1))
done < <(cd "$payload" && find . -type f -print0 | sort -z)

# bin/set_env.bash: the template with the vendor directory as a single-quoted shell word.
make_dir "$vendor_rel/bin"
quoted="'${vendor_dir//\'/\'\\\'\'}'"
template="$(cat "$here/set_env.bash.in")"
printf '%s\n' "${template//@VENDOR_DIR@/$quoted}" >"$vendor_dir/bin/set_env.bash"
records+=("f $vendor_rel/bin/set_env.bash")
count=$((count + 1))  # every "f" record is counted, as uninstall counts what it removes

if ((use_config_ini)); then
  if [[ ! -f "$config_ini" ]]; then
    : >"$config_ini"
    chmod 640 "$config_ini"
    records+=("c vendors/config.ini")
  fi
  rest="$(priority_without_vendor)"
  write_priority "$vendor${rest:+,$rest}"
  records+=("p vendors/config.ini")
fi

# The root and the parents made for it are recorded by absolute path ("r"), outermost first, so
# that uninstall, going backwards, removes the root before its parents.
root_records=()
for dir in "${created_root[@]}"; do root_records+=("r $dir"); done
records=("${root_records[@]}" "${records[@]}")
printf '%s\n' "${records[@]}" >"$manifest"

say "installed $count files of vendor '$vendor' into $vendor_dir"
if ((use_config_ini)); then
  say "vendor '$vendor' is first in $config_ini (load_priority)"
fi
say "before running acl-fa: source '$vendor_dir/bin/set_env.bash'"
