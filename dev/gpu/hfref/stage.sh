#!/usr/bin/env bash
# issue 31 (hfref): builds here what run.sh needs on the device machine into the git-ignored
# gpuwork/hfref/bin.tar.xz: the fp4lane CLI (its `quantize` makes the NVFP4 twins of the transformers
# checkpoints there) and the shared libraries a bare device lacks. No GPU code: transformers runs on the
# device's CPU in float64, as for the dense models' data (tests/data/hf/README.md).
#   bash dev/gpu/hfref/stage.sh        then write gpuwork/hfref/READY
set -e
cd "$(git rev-parse --show-toplevel)"
B=${BUILD:-build}
make -j2 BUILD=$B cli
S=$(mktemp -d); mkdir -p "$S/f/lib" gpuwork/hfref
cp $B/fp4lane "$S/f/"
for so in $(ldd $B/fp4lane | awk '$3 ~ /^\// {print $3}'); do
  case $(basename "$so") in libc.so*|libm.so*|libpthread.so*|libdl.so*|ld-linux*|libgcc_s.so*) ;;
    *) cp -L "$so" "$S/f/lib/" ;;
  esac
done
{ git rev-parse HEAD; git status --short | head -5; date -u; } > "$S/f/BUILT.txt"
(cd "$S/f" && tar cJf - .) > gpuwork/hfref/bin.tar.xz
rm -rf "$S"; ls -la gpuwork/hfref; tar tJf gpuwork/hfref/bin.tar.xz
