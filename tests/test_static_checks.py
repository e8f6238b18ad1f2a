"""The tools keep the hygiene: mypy --strict over the package laid out as it is installed, and ruff's
pyflakes, pycodestyle, isort, bugbear and pyupgrade rules over the whole tree (both set in pyproject.toml)."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.live
def test_mypy_finds_no_errors(tmp_path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        target = tmp_path.joinpath(*package.split("."))  # as `package-dir` installs it
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(ROOT / folder)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    result = subprocess.run([sys.executable, "-m", "mypy", "-p", "gangsched"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.live
def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
