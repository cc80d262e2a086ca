"""Fixtures of the temper_forge tests: the seed requests, a fresh store, a
host policy with tight limits. The tests run against the installed wheel."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"


def seed(name: str) -> dict[str, Any]:
    return json.loads((SEEDS / f"{name}.json").read_text())


def temper_bin() -> Path:
    return Path(os.environ.get("TEMPER_BIN", ROOT / "target" / "release" / "temper"))


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def policy(tmp_path: Path) -> str:
    """No capability; a 500 ms wall clock and 32 MiB of memory per call."""
    p = tmp_path / "policy.toml"
    p.write_text("[limits]\ntimeout_ms = 500\nmemory_mb = 32\n")
    return str(p)
