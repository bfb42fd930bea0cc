"""The package as installed: version, the torch it was built for, and (opt-in) a fresh venv."""
import os
import pathlib
import subprocess

import pytest
import torch

import fathom


def test_the_package_reports_the_engine_and_torch_versions():
    root = pathlib.Path(__file__).resolve().parents[2]
    cmake = (root / "CMakeLists.txt").read_text()
    assert f"project(fathom VERSION {fathom.__version__}" in cmake
    assert fathom._C.torch_version.split("+")[0] == torch.__version__.split("+")[0]


def test_the_extension_is_installed_not_imported_from_the_source_tree():
    # pytest runs from the repository: an import of python/fathom itself would miss _C.
    assert pathlib.Path(fathom._C.__file__).parent == pathlib.Path(fathom.__file__).parent


@pytest.mark.skipif(os.environ.get("FATHOM_TEST_FRESH_VENV") != "1",
                    reason="builds the engine from scratch in a new venv (minutes); "
                           "set FATHOM_TEST_FRESH_VENV=1 to run it")
def test_fresh_venv(tmp_path):
    script = pathlib.Path(__file__).with_name("fresh_venv.sh")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FATHOM_")}
    run = subprocess.run([str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "fresh_venv: import fathom" in run.stdout
    assert " passed" in run.stdout
