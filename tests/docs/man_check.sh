#!/bin/sh
# Manual pages and bash completions of the installed tools:
#   lint   every page in docs/man renders with no warning (`man --warnings`) and has a NAME
#          line lexgrog reads (what `whatis`/`apropos` index);
#   options every option and command the programs' --help lists is in their page and in their
#          completion, and the completion offers nothing --help does not list;
#   completion the scripts load in a plain bash and complete known words.
# Usage: man_check.sh SOURCE_ROOT KVREG_REPLAY KVREG_EVENTS
set -eu
src=$1 replay=$2 events=$3
for tool in man lexgrog groff; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not found (Debian man-db, groff-base)"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

echo "== lint"
pages=0
for page in "$src"/docs/man/*.[0-9]; do
    pages=$((pages + 1))
    name=$(basename "$page"); name=${name%.*}
    # lintian's own check (manpage-has-errors-from-man), then groff with every warning on
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" \
        2>"$tmp/warn" >/dev/null || bad "man -l $page failed"
    groff -man -ww -z "$page" 2>>"$tmp/warn" || bad "groff $page failed"
    [ -s "$tmp/warn" ] && { cat "$tmp/warn"; bad "$page: warnings (above)"; }
    LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" >"$tmp/text" 2>/dev/null
    grep -q . "$tmp/text" || bad "$page renders empty"
    lexgrog "$page" >"$tmp/lex" 2>&1 || { cat "$tmp/lex"; bad "$page: lexgrog finds no NAME section"; }
    grep -q "\"$name - " "$tmp/lex" || { cat "$tmp/lex"; bad "$page: NAME is not '$name - ...'"; }
    echo "$(cat "$tmp/lex")"
done
[ "$pages" -ge 3 ] || bad "expected kvreg-replay.1, kvreg-events.1 and libkvreg.3, found $pages pages"

echo "== options"
# the --long options in a text (a page's "\-\-x" is "--x")
opts() { sed 's/\\-/-/g' "$1" | grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u; }
# PROGRAM's options from its --help, against the page and the completion script
check() { # LABEL HELP_FILE PAGE COMPLETION
    opts "$2" >"$tmp/help.opts"
    [ -s "$tmp/help.opts" ] || bad "$1: no options in --help"
    opts "$3" >"$tmp/page.opts"
    opts "$4" >"$tmp/comp.opts"
    for o in $(comm -23 "$tmp/help.opts" "$tmp/page.opts"); do
        bad "$1: $o is in --help, not in $(basename "$3")"
    done
    for o in $(comm -23 "$tmp/help.opts" "$tmp/comp.opts"); do
        bad "$1: $o is in --help, not in the completion"
    done
}
"$replay" --help >"$tmp/replay.help"
check kvreg-replay "$tmp/replay.help" "$src/docs/man/kvreg-replay.1" "$src/completions/kvreg-replay"
for o in $(opts "$src/completions/kvreg-replay" | comm -23 - "$tmp/help.opts"); do
    bad "the completion offers $o, which kvreg-replay --help does not list"
done
"$events" --help >"$tmp/events.help"
commands=$(awk 'tolower($0) ~ /^commands:/ { l = 1; next } l && /^  [a-z]/ { print $1; next } l { exit }' "$tmp/events.help")
[ -n "$commands" ] || bad "kvreg-events --help lists no commands"
: >"$tmp/all.help"
for cmd in $commands; do
    grep -q "^\\.SS $cmd\$" "$src/docs/man/kvreg-events.1" || bad "kvreg-events $cmd has no section in the page"
    grep -q "'[^']*\\b$cmd\\b[^']*'" "$src/completions/kvreg-events" || bad "the completion does not offer $cmd"
    "$events" "$cmd" --help >"$tmp/cmd.help" 2>&1 || true
    cat "$tmp/cmd.help" >>"$tmp/all.help"
    check "kvreg-events $cmd" "$tmp/cmd.help" "$src/docs/man/kvreg-events.1" "$src/completions/kvreg-events"
done
# --version: the tool's own, beside --help (main.c), which its --help does not list
{ opts "$tmp/all.help"; opts "$tmp/events.help"; echo --version; } | sort -u >"$tmp/all.opts"
for o in $(opts "$src/completions/kvreg-events" | comm -23 - "$tmp/all.opts"); do
    bad "the completion offers $o, which no kvreg-events --help lists"
done

echo "== completion"
# complete WORDS...: what the loaded script offers for the last word (plain bash, no bash-completion)
complete_words() { # SCRIPT FUNCTION WORDS...
    script=$1 fn=$2; shift 2
    bash --norc --noprofile -c '
        script=$1 fn=$2; shift 2
        . "$script" || exit 1
        complete -p "${script##*/}" >/dev/null || { echo "no complete spec" >&2; exit 1; }
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        "$fn"; printf "%s\n" "${COMPREPLY[@]}"' sh "$script" "$fn" "$@"
}
expect() { # WANT GOT_WORDS...
    want=$1; shift
    got=$(complete_words "$@") || { bad "completion of '$*' failed"; return; }
    [ "$got" = "$want" ] || bad "completing '$*' gave '$got', want '$want'"
}
R=$src/completions/kvreg-replay E=$src/completions/kvreg-events
expect --verify-events "$R" _kvreg_replay kvreg-replay --verify-e
expect "$(printf 'vllm\nvllm-legacy')" "$R" _kvreg_replay kvreg-replay --wire vl
expect decode "$E" _kvreg_events kvreg-events de
expect "$(printf 'dynamo-json\ndynamo-msgpack\ndynamo')" "$E" _kvreg_events kvreg-events decode --format dyn
expect --from-seq "$E" _kvreg_events kvreg-events sub tcp://x --fr
[ "$fail" = 0 ] || exit 1
echo "pages lint-clean, options agree with --help, completions load and complete"
