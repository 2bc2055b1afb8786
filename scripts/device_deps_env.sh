# Sourced (not run) by the scripts for the device machine (scripts/knn_gpu_device.sh,
# scripts/scaling_device.sh): unpacks the .deb files that scripts/knn_gpu_device_deps.sh put into
# .gpudeps/ under .gpudeps/root (never into /), points PATH, the loader and pkg-config there, and
# sets the array cmake_extra to the CMake flags that find them. Without .gpudeps/*.deb it only
# sets cmake_extra=() and gen (the CMake generator: Ninja where present).
cmake_extra=()
if compgen -G ".gpudeps/*.deb" >/dev/null; then
  mkdir -p .gpudeps/root
  for f in .gpudeps/*.deb; do dpkg -x "$f" .gpudeps/root; done
  R=$PWD/.gpudeps/root
  export PATH="$R/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$R/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$R/usr/lib/x86_64-linux-gnu/pkgconfig:$R/usr/share/pkgconfig"
  # CMake packages (GTest, fmt, nlohmann_json, CLI11) from the prefix; asio's headers (no CMake
  # package) from its include directory.
  cmake_extra+=(-DCMAKE_PREFIX_PATH="$R/usr" -DOPENSSL_ROOT_DIR="$R/usr" -DCMAKE_CXX_FLAGS="-isystem $R/usr/include")
  deps_unpacked=$(ls .gpudeps/*.deb | wc -l)
fi
gen=(-G Ninja)
command -v ninja >/dev/null || gen=(-G "Unix Makefiles")
