#!/bin/sh
# Builds tmetric-region as a static library, compiles region.c against it and runs it.
# Usage: crates/region/examples/c/build.sh   (from anywhere inside the repository)
set -eu
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$root"
cargo rustc --release -p tmetric-region-capi --lib --crate-type staticlib
target=${CARGO_TARGET_DIR:-$root/target}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
${CC:-cc} -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -O2 -I crates/region/include \
	crates/region/examples/c/region.c "$target/release/libtmetric_region_capi.a" \
	-lpthread -ldl -lm -o "$out/region"
"$out/region"
