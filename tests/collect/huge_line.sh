#!/bin/sh
# A trace line of 50 MB (one episode whose user message is enormous), made
# here in SCRATCH, after a small episode: collect must refuse it quickly,
# naming the file, line and episode and max_position_embeddings, exit 2 and
# write nothing. Tokenising it in full took seconds and gigabytes; the
# refusal now comes from the prompt's length alone. Where /usr/bin/time
# exists, the peak resident memory is checked too: a few times the line
# (reading and parsing it), not the gigabytes of its tokens.
#   huge_line.sh MEMDECAY_CALIBRATE SCRATCH (with SCRATCH/model made by with_model.sh)
set -u
calibrate=$1
scratch=$2
traces=$scratch/huge-line.jsonl
{
  printf '%s\n' '{"id": "small", "messages": [{"role": "user", "content": "Hello."}]}'
  printf '%s' '{"id": "huge", "messages": [{"role": "user", "content": "'
  yes 'The quick brown fox jumps over the lazy dog.' | head -c 50000000 | tr '\n' ' '
  printf '%s\n' '"}], "continuation": {"generate": 4}}'
} >"$traces" || exit 99
limit_s=5
limit_kib=1048576
set -- "$calibrate" collect --model "$scratch/model" --traces "$traces" --out "$scratch/run"
start=$(date +%s%N)
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f '%M' -o "$scratch/rss" "$@" 2>"$scratch/stderr"
else
  "$@" 2>"$scratch/stderr"
fi
status=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
rm -f "$traces"
fail=0
cat "$scratch/stderr"
if [ "$status" -ne 2 ]; then echo "huge_line: exit status $status, expected 2" >&2; fail=1; fi
if ! grep -Eq 'huge-line\.jsonl:2: episode "huge": the prompt.s [0-9]+ bytes make at least [0-9]+ tokens, more than the model.s max_position_embeddings \(400\)' "$scratch/stderr"; then
  echo "huge_line: no refusal naming the line and max_position_embeddings" >&2
  fail=1
fi
if [ -e "$scratch/run" ]; then echo "huge_line: $scratch/run was created" >&2; fail=1; fi
echo "huge_line: refused in $elapsed_ms ms"
if [ "$elapsed_ms" -gt $((limit_s * 1000)) ]; then
  echo "huge_line: took $elapsed_ms ms, more than $limit_s s" >&2
  fail=1
fi
if [ -s "$scratch/rss" ]; then
  rss=$(tail -n 1 "$scratch/rss")
  echo "huge_line: peak resident memory $rss KiB"
  # sanitizers add their own bookkeeping: the bound is for plain builds
  case "$(ldd "$calibrate" 2>/dev/null)" in
    *libasan*) ;;
    *) if [ "$rss" -gt "$limit_kib" ]; then
         echo "huge_line: peak resident memory $rss KiB, more than $limit_kib KiB" >&2
         fail=1
       fi ;;
  esac
fi
exit $fail
