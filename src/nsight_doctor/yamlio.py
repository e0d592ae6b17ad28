"""YAML for nsight-doctor's own data files and users' rule files: safe loading, with PyYAML's C
parser when it has one (five times faster than the Python one; the column maps, taxonomy,
advice and rules are read on every run)."""

from __future__ import annotations

from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAMLError = yaml.YAMLError


def load(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)
