#!/usr/bin/env bash
# Builds the previous release named in tests/upgrade/PREVIOUS from the git history into
# target/upgrade/dawnpost-<commit> and prints that path. Built once: a binary already there is
# kept. A debug build without debug info, in its own target directory (its dependencies are
# compiled once too, then kept). Exits 3 when the commit is not in this clone's history (a
# shallow clone that cannot fetch it): the upgrade test then says it skipped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
commit="$(grep -v '^#' "$repo/tests/upgrade/PREVIOUS" | tr -d '[:space:]')"
out="$repo/target/upgrade"
bin="$out/dawnpost-$commit"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
  git -C "$repo" fetch --quiet origin "$commit" 2>/dev/null || {
    echo "the previous release $commit is not in this clone's history (a shallow clone?): fetch it (git fetch --unshallow) and run again" >&2
    exit 3
  }
fi
src="$out/src-$commit"
rm -rf "$src"
mkdir -p "$src"
git -C "$repo" archive "$commit" | tar -x -C "$src"
echo "building the previous release $commit (once) ..." >&2
CARGO_TARGET_DIR="$out/target" CARGO_PROFILE_DEV_DEBUG=false \
  cargo build --locked --quiet --manifest-path "$src/Cargo.toml" --bin dawnpost >&2
cp "$out/target/debug/dawnpost" "$bin.part"
mv "$bin.part" "$bin"
rm -rf "$src"
echo "$bin"
