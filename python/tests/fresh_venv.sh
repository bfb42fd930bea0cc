#!/usr/bin/env bash
# Installs fathom's Python package into a brand-new virtual environment and runs the suite there.
# What it does, exactly (python/README.md, "The fresh-environment check"):
#   1. python -m venv from the base interpreter of the project's .venv;
#   2. one .pth file makes the .venv's site-packages (torch, 4.6 GB) visible: no copy, no download;
#   3. pip install scikit-build-core pytest;
#   4. pip install --no-build-isolation ./python, with an empty build folder;
#   5. from another folder: import fathom, then pytest python/tests.
# Usage: python/tests/fresh_venv.sh [WORK_DIR]   (default: a new temporary folder, removed after)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROJECT_VENV="$ROOT/.venv"
WORK="${1:-$(mktemp -d)}"
[[ $# -ge 1 ]] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"

base="$("$PROJECT_VENV/bin/python" -c 'import sys; print(sys._base_executable)')"
site="$("$PROJECT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "fresh_venv: base interpreter $base; torch from $site"
"$base" -m venv "$WORK/venv"
py="$WORK/venv/bin/python"
"$py" -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "project-torch.pth").write_text(sys.argv[1] + "\n")' "$site"
"$py" -m pip install -q --disable-pip-version-check scikit-build-core pytest
# ccache keeps a rebuild of unchanged sources cheap when it is installed; the build is still fresh.
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation \
  -C build-dir="$WORK/build" "${launcher[@]}" "$ROOT/python"
cd "$WORK"
"$py" -c 'import fathom, torch; print("fresh_venv: import fathom", fathom.__version__, "at", fathom.__file__, "with torch", torch.__version__)'
"$py" -m pytest -q -p no:cacheprovider "$ROOT/python/tests" -k "not fresh_venv"
