#!/usr/bin/env bash
# Fetches, on a Debian machine with its package archive (a developer's machine, not the GPU
# machine), the .deb files of wort's C++ build dependencies into .gpudeps/, for
# scripts/knn_gpu_device.sh to unpack on a GPU machine that has no network and lacks them
# (it unpacks them under .gpudeps/root, never into /). A few MB; .gpudeps/ is ignored by git
# (.gitignore), so name it in the device run's carried paths.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libgtest-dev libgmock-dev googletest libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libasio-dev libssl-dev libssl3
      pkgconf pkgconf-bin libpkgconf3 pkg-config ninja-build)
mkdir -p .gpudeps

apt-get update -qq >/dev/null
got=()
for p in "${PKGS[@]}"; do
  if (cd .gpudeps && apt-get download -qq "$p" >/dev/null 2>&1); then got+=("$p"); else echo "knn_gpu_device_deps: no package $p (skipped)"; fi
done
echo "knn_gpu_device_deps: ${#got[@]} packages in .gpudeps/ ($(du -sh .gpudeps | cut -f1)): ${got[*]}"
