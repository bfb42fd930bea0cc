# Shared by scripts/demo and scripts/test: installs what is missing, then configures and builds.
# Every step checks before it acts, so a warm rerun only runs the (incremental) build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/versions.env"
VENV="$ROOT/.venv"
BUILD="${FATHOM_BUILD_DIR:-$ROOT/build}"
log() { printf '\033[1m[fathom]\033[0m %s\n' "$*" >&2; }

need_apt=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
ensure_system_packages() {
  local pkgs=(build-essential cmake ninja-build ccache libfmt-dev nlohmann-json3-dev libgtest-dev
              libgmock-dev libcli11-dev libbenchmark-dev zlib1g-dev libsqlite3-dev python3-venv
              chromium  # chromium: the HTML report's headless render test
              libgloo-dev  # gloo headers for examples/distributed (docs/distributed.md)
              clang libclang-rt-14-dev)  # the sanitizer and fuzzer builds (scripts/fuzz)
  for p in "${pkgs[@]}"; do have_pkg "$p" || need_apt+=("$p"); done
  if ((${#need_apt[@]})); then
    log "installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null
  fi
}

ensure_venv() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local have
  have="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)"
  if [[ "$have" != "$TORCH_VERSION" ]]; then
    log "installing torch==$TORCH_VERSION into $VENV (LibTorch comes from this wheel)"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy pytest
  fi
  # numpy: torch warns on import without it; pytest: python/tests.
  if ! "$VENV/bin/python" -c 'import numpy, pytest' 2>/dev/null; then
    log "installing numpy and pytest into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check numpy pytest
  fi
  local cuda
  cuda="$("$VENV/bin/python" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null)"
  if [[ -n "$cuda" && "${cuda%%.*}" != "$TORCH_CUDA_MAJOR" ]]; then
    log "torch is built for CUDA $cuda but fathom pins CUDA $TORCH_CUDA_MAJOR (scripts/versions.env)"
    exit 1
  fi
}

torch_cmake_prefix() { "$VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)'; }

configure_and_build() {
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/fathom-ccache}"
  # Build folders differ between checkouts and helpers; let them share cached objects.
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  if [[ ! -f "$BUILD/build.ninja" ]]; then
    log "configuring $BUILD"
    local cuda_args=()
    [[ -x /usr/local/cuda/bin/nvcc ]] && cuda_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_PREFIX_PATH="$(torch_cmake_prefix)" \
      -DTORCH_CUDA_ARCH_LIST="9.0" "${cuda_args[@]}" "$@" >/dev/null
  fi
  log "building (2 cores: the first build takes a few minutes)"
  cmake --build "$BUILD" --parallel "$(nproc)"
}

# fathom's Python package (python/), built by scikit-build-core against the .venv's torch into
# $BUILD/python and installed into the .venv. Skipped while nothing it is built from changed.
# It links the engine configure_and_build made ($BUILD, FATHOM_ENGINE_DIR): the engine compiles
# once per machine, and the package's own build is its bindings.
ensure_python_package() {
  local stamp="$BUILD/python/.installed"
  if [[ -f "$stamp" ]] && "$VENV/bin/python" -c 'import fathom' 2>/dev/null &&
     [[ -z "$(find "$ROOT/python" "$ROOT/plugin" "$ROOT/hooks" "$ROOT/cmake" "$ROOT/CMakeLists.txt" \
              "$VENV"/lib/python3*/site-packages/torch/version.py -newer "$stamp" \
              -not -path "$ROOT/python/tests/*" -not -name '*.pyc' -print -quit 2>/dev/null)" ]]; then
    return
  fi
  if ! "$VENV/bin/python" -c 'import scikit_build_core, pytest' 2>/dev/null; then
    log "installing scikit-build-core and pytest into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check scikit-build-core pytest
  fi
  log "building and installing the Python package (python/) into $VENV"
  mkdir -p "$BUILD/python"
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation --no-deps -C build-dir="$BUILD/python" \
    -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -C cmake.define.FATHOM_ENGINE_DIR="$BUILD" \
    "$ROOT/python"
  touch "$stamp"
}

# The sanitizer builds (scripts/test --sanitize, scripts/fuzz): the torch-free core, its tests and
# the fathom command, built by clang with every target instrumented, each in a folder of its own.
#   sanitizer_build DIR SANITIZERS [CMAKE_ARG...] -- [TARGET...]
sanitizer_build() {
  local dir="$1" san="$2"; shift 2
  local args=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do args+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/fathom-ccache}"
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  if [[ ! -f "$dir/build.ninja" ]]; then
    log "configuring $dir (clang, -fsanitize=$san)"
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DFATHOM_WITH_TORCH=OFF -DFATHOM_BUILD_EXAMPLES=OFF -DFATHOM_BUILD_BENCHMARKS=OFF \
      -DFATHOM_INSTALL=OFF -DFATHOM_SANITIZE="$san" "${args[@]}" >/dev/null
  fi
  log "building $dir"
  cmake --build "$dir" --parallel "$(nproc)" ${1:+--target "$@"}
}

# Every sanitizer finding fails the run; leaks too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

setup_all() {
  ensure_system_packages
  ensure_venv
  configure_and_build "$@"
  ensure_python_package
}
