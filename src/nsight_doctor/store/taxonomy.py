"""Kernel taxonomy: the category of a GPU kernel (gemm, attention, norm, ...) from its name.

The rules are data (kernel_categories.yaml, next to this file) so that they can be read,
reviewed and tested without reading code. They are applied in two places that must agree:
in Python (`classify`, for tests and for names outside the store) and in DuckDB SQL
(`case_sql`, so that views classify each distinct kernel name once, inside the query).
Patterns are kept to the common subset of Python `re` and RE2, which DuckDB uses; the test
suite runs both on every example and on every kernel name in the samples and the corpus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

from nsight_doctor import yamlio

#: The category ids, in the order used for documentation. The YAML must declare exactly these,
#: so that a typo in a rule or a view cannot invent a category.
CATEGORY_IDS: tuple[str, ...] = (
    "gemm",
    "attention",
    "attention-unfused",
    "norm",
    "activation",
    "rotary",
    "kv-cache",
    "communication",
    "moe",
    "sampling",
    "embedding",
    "quantization",
    "ssm",
    "elementwise",
    "reduction",
    "memcpy",
    "other",
)
OTHER = "other"
MATCH_FIELDS = ("name", "demangled")
# Python-only syntax that RE2 rejects or reads differently: lookaround and backreferences.
_NOT_RE2 = re.compile(r"\(\?[=!<]|\\[1-9]")


@dataclass(frozen=True)
class Rule:
    """One ordered rule: the first rule whose pattern is found in its field decides."""

    category: str
    pattern: str
    match: str  # "name" (short kernel name) or "demangled" (falls back to the short name)
    examples: tuple[str, ...] = ()

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def text(self, name: str | None, demangled: str | None) -> str:
        """The text this rule reads; a missing demangled name falls back to the short name."""
        if self.match == "demangled" and demangled:
            return demangled
        return name or ""


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _load_yaml() -> dict:
    text = resources.files("nsight_doctor.store").joinpath("kernel_categories.yaml").read_text()
    return yamlio.load(text)


@lru_cache(maxsize=1)
def categories() -> dict[str, str]:
    """Category id -> one-line meaning, in CATEGORY_IDS order (for generated docs)."""
    declared = _load_yaml().get("categories") or {}
    if set(declared) != set(CATEGORY_IDS):
        raise ValueError(
            f"kernel_categories.yaml must declare exactly {CATEGORY_IDS}; "
            f"missing {sorted(set(CATEGORY_IDS) - set(declared))}, "
            f"unknown {sorted(set(declared) - set(CATEGORY_IDS))}"
        )
    return {c: str(declared[c]) for c in CATEGORY_IDS}


@lru_cache(maxsize=1)
def _rules() -> tuple[Rule, ...]:
    declared = categories()
    rules = []
    for i, raw in enumerate(_load_yaml().get("rules") or []):
        where = f"kernel_categories.yaml rule {i + 1} ({raw.get('category')!r})"
        if raw.get("category") not in declared or raw["category"] == OTHER:
            raise ValueError(f"{where}: category must be a declared one other than 'other'")
        if raw.get("match") not in MATCH_FIELDS:
            raise ValueError(f"{where}: match must be one of {MATCH_FIELDS}")
        pattern = raw.get("pattern")
        if not isinstance(pattern, str) or not pattern or _NOT_RE2.search(pattern):
            raise ValueError(f"{where}: pattern must be a non-empty RE2-compatible regex")
        _compile(pattern)  # fails here, with the rule named, on a pattern Python rejects
        rules.append(Rule(raw["category"], pattern, raw["match"], tuple(str(e) for e in raw.get("examples") or ())))
    if not rules:
        raise ValueError("kernel_categories.yaml has no rules")
    return tuple(rules)


def load_rules() -> list[Rule]:
    """The validated rules in match order (read once; the YAML ships inside the package)."""
    return list(_rules())


def classify(name: str | None, demangled: str | None = None) -> str:
    """The category of one kernel: the first matching rule's, else 'other'."""
    for rule in _rules():
        if rule.regex.search(rule.text(name, demangled)):
            return rule.category
    return OTHER


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def case_sql(name_col: str, demangled_col: str) -> str:
    """A DuckDB CASE expression equal to `classify(name_col, demangled_col)`.

    Column arguments are SQL expressions inserted as given. An empty demangled name falls back
    to the short name, as in `classify`. regexp_matches searches (unanchored) like re.search.
    """
    name = f"coalesce({name_col}, '')"
    demangled = f"coalesce(nullif({demangled_col}, ''), {name_col}, '')"
    whens = "\n".join(
        f"    WHEN regexp_matches({demangled if r.match == 'demangled' else name}, "
        f"{_sql_str(r.pattern)}, 'i') THEN {_sql_str(r.category)}"
        for r in _rules()
    )
    return f"CASE\n{whens}\n    ELSE {_sql_str(OTHER)}\nEND"
