#!/bin/sh
# The options a subcommand's --help lists and those its section of
# memdecay-calibrate(1) documents must be the same set.
#   options_sync.sh PROGRAM MAN_PAGE SUBCOMMAND "SECTION TITLE"
set -u
program=$1
page=$2
subcommand=$3
section=$4
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# Man page: the tag lines (the line after each .TP, or .TQ for a tag grouped
# with the one before) of the section.
awk -v title=".SH $section" '
  $0 == title { inside = 1; next }
  /^\.SH/ { inside = 0 }
  inside && (previous == ".TP" || previous == ".TQ") { print }
  { previous = $0 }
' "$page" | sed 's/\\-/-/g' | grep -oE '(^|[ "])--?[a-zA-Z][a-zA-Z-]*' |
  sed 's/^[ "]//' | sort -u >"$tmp/man"
# --help: the option lines (indented, starting with a dash).
"$program" "$subcommand" --help | grep -E '^ +-' |
  grep -oE '(^|[ ,])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ ,]//' | sort -u >"$tmp/help"
if [ ! -s "$tmp/man" ] || [ ! -s "$tmp/help" ]; then
  echo "FAIL: no options found (man: $(wc -l <"$tmp/man"), help: $(wc -l <"$tmp/help"))" >&2
  exit 1
fi
if ! cmp -s "$tmp/man" "$tmp/help"; then
  echo "FAIL: options differ between $page ($section, <) and '$subcommand --help' (>):" >&2
  diff "$tmp/man" "$tmp/help" >&2
  exit 1
fi
echo "$subcommand: $(wc -l <"$tmp/man") options documented in both"
