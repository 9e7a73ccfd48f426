# Header of the acl-fa .run, given to makeself with --header. makeself sources this file (twice:
# once to count its lines) with $archname, $SKIP, $SHAsum, $filesizes, $GUNZIP_CMD, $LABEL, $SCRIPT
# and $MS_VERSION set; the text between the EOF markers becomes the first $SKIP lines of the .run,
# followed by the compressed tar archive.
#
# Unlike makeself's default header, every argument goes to the installer unchanged, so the .run
# takes --install-path=DIR, --quiet, --help ... directly, as CANN's operator packages do.
cat <<EOF >"$archname"
#!/bin/bash
# $LABEL -- self-extracting (makeself $MS_VERSION); run with --help.
set -eu
skip=$SKIP
sha256="$SHAsum"
size=$filesizes
export USER_PWD="\$PWD"
self="\$(cd "\$(dirname "\$0")" && pwd)/\$(basename "\$0")"
archive() { tail -n +\$((skip + 1)) "\$self"; }
if [ "\$(archive | wc -c)" -ne "\$size" ] || [ "\$(archive | sha256sum | cut -b-64)" != "\$sha256" ]; then
  echo "\$self: damaged package (size or SHA-256 of the archive differs)" >&2
  exit 1
fi
work="\$(mktemp -d "\${TMPDIR:-/tmp}/acl_fa_run.XXXXXX")"
trap 'rm -rf "\$work"' EXIT
archive | $GUNZIP_CMD | tar -x -C "\$work"
status=0
(cd "\$work" && bash ./$SCRIPT "\$@") || status=\$?
exit \$status
EOF
