#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 600) and prints, per target, the executions
# and whether it crashed. Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Crashes are kept under fuzz/artifacts/TARGET/; the corpus grows under fuzz/corpus/TARGET/.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
targets=(settings reports retention duration retry_after signature ingest_body schedule)
status=0
for t in "${targets[@]}"; do
  log="fuzz/artifacts/$t.log"
  mkdir -p "fuzz/artifacts/$t" "fuzz/corpus/$t"
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" \
    -artifact_prefix="fuzz/artifacts/$t/" > "$log" 2>&1
  rc=$?
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  if [ $rc -eq 0 ]; then
    echo "$t: ${runs:-?} executions in ${seconds}s, no crash"
  else
    echo "$t: CRASHED (exit $rc) after ${runs:-?} executions; see $log and fuzz/artifacts/$t/"
    status=1
  fi
done
exit $status
