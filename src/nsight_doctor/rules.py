"""Rules: load rule files, validate them, evaluate them on a store, and rank the findings.

A rule is a YAML file (rules/<id>.yaml) with its test cases beside it (rules/<id>.test.yaml).
Its query is one SELECT over the documented views, with the rule's thresholds bound as
$parameters. Each row it returns is a finding; the row's ``impact_ns`` is the time that fixing
the problem would recover, which ranks the findings.

A rule is data anyone can pass with --rules, and it is safe by construction: what runs is the
one SELECT statement parsed from it (nothing else can), on a store in a file opened read-only in
a DuckDB instance that never loaded an extension that reads files (engine.py asks for one when
--rules is given; store.py), with external access off and the configuration locked
(db.sandbox); each query is interrupted after a time limit, and the store's memory limit bounds
its sorts, joins and aggregates. check_functions, a second line of
defence, refuses what DuckDB would still let a SELECT do: change settings or logging, run SQL
given as a string, or forge aggregate states and nest documents deep enough to crash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsight_doctor import yamlio
from nsight_doctor.cachedir import cache_dir, code_digest, write_atomic
from nsight_doctor.db import bind_sql, execute, in_parallel, plain, scalar
from nsight_doctor.errors import RuleError
from nsight_doctor.model import (
    SCOPES,
    SEVERITIES,
    TAGS,
    TITLE_NAME_MAX,
    Finding,
    Rule,
    Skipped,
    Threshold,
    fill,
    scope_rank,
    severity_for,
    severity_rank,
)

if TYPE_CHECKING:
    import duckdb
    import jsonschema

PARAM_RE = re.compile(r"\$([a-z_][a-z0-9_]*)")


def builtin_rules_dir() -> Path:
    """The rules shipped with the tool: inside the package when installed from a wheel, or
    rules/ at the top of a source checkout."""
    packaged = resources.files("nsight_doctor").joinpath("builtin_rules")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


@lru_cache(maxsize=1)
def validator() -> jsonschema.protocols.Validator:
    """The rule-file schema, with the severities and tags of model.py (their one source)."""
    import jsonschema  # only when a rule file is validated (not on a cache hit): 50 ms

    schema = json.loads(resources.files("nsight_doctor").joinpath("rule_schema.json").read_text())
    schema["properties"]["severity"]["enum"] = SEVERITIES
    schema["properties"]["tags"]["items"]["enum"] = list(TAGS)
    schema["properties"]["scope"]["enum"] = list(SCOPES)
    return jsonschema.validators.validator_for(schema)(schema)


def rule_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.yaml") if not p.name.endswith(".test.yaml"))


def load_rule(path: Path) -> Rule:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RuleError(f"{path}: not a readable YAML file ({e})") from None
    key = validated_key(raw)
    data = cached_rule_data(key)
    if data is not None and data.get("id") == path.stem:
        try:
            return rule_from_data(path, data)
        except (KeyError, TypeError, AttributeError):
            pass  # a damaged cache entry: validate the file again
    data = validate_rule_file(path, raw)
    save_rule_data(key, data)
    return rule_from_data(path, data)


def rule_from_data(path: Path, data: dict[str, Any]) -> Rule:
    thresholds = {
        name: Threshold(name=name, default=t["default"], doc=t["doc"])
        for name, t in (data.get("thresholds") or {}).items()
    }
    test_path = path.with_name(f"{data['id']}.test.yaml")
    return Rule(
        id=data["id"],
        name=data["name"],
        title=data["title"],
        severity=data["severity"],
        tags=data["tags"],
        requires=data["requires"],
        thresholds=thresholds,
        query=data["query"],
        message=data["message"],
        recommendation=data["recommendation"],
        impact=data["impact"],
        explanation=data["explanation"],
        scope=data.get("scope", "steady"),
        references=data.get("references", []),
        details=data.get("details", {}),
        path=path,
        test_path=test_path if test_path.exists() else None,
    )


def validate_rule_file(path: Path, raw: bytes) -> dict[str, Any]:
    """The rule file's data, checked against the schema, its name and its SQL."""
    import jsonschema

    try:
        data = yamlio.load(raw.decode())
    except (UnicodeDecodeError, yamlio.YAMLError) as e:
        raise RuleError(f"{path}: not a readable YAML file ({e})") from None
    try:
        validator().validate(data)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        raise RuleError(f"{path}: {where}: {e.message}") from None
    if data["id"] != path.stem:
        raise RuleError(f"{path}: the file must be named after the rule id ({data['id']}.yaml)")
    thresholds = (data.get("thresholds") or {}).keys()
    for sql_name, sql in [("query", data["query"]), *data.get("details", {}).items()]:
        check_select(path, sql_name, sql)
        # Details may also use $row_<column>: a value of the finding's own row.
        allowed = thresholds | (
            {p for p in PARAM_RE.findall(sql) if p.startswith("row_")} if sql_name != "query" else set()
        )
        unknown = set(PARAM_RE.findall(sql)) - allowed
        if unknown:
            raise RuleError(f"{path}: {sql_name} uses ${', $'.join(sorted(unknown))}, which is not a threshold")
    return data


# --- validated rule files, cached by content ----------------------------------------------------
# Parsing and validating every rule file (YAML, the JSON schema, DuckDB's parser for the SQL)
# took about a third of a cached re-analysis and most of `rules list`. A file that passed is
# kept as JSON under <cache>/rules/ (a private folder), keyed by its bytes and nsight-doctor's
# own code (which holds the schema and the vocabularies), so an edited file or a new version
# validates again. The cache only saves time: every query is still checked to be one SELECT
# right before it runs (evaluate_rule), so a planted entry cannot run anything else.


def validated_key(raw: bytes) -> str:
    return hashlib.sha256(code_digest().encode() + b"\0" + raw).hexdigest()


def rules_cache_dir() -> Path:
    # (Not turned off by --no-cache / NSIGHT_DOCTOR_NO_CACHE: those are about diagnoses, and a
    # validated rule is the same whatever it is run on.)
    return cache_dir() / "rules"


def cached_rule_data(key: str) -> dict[str, Any] | None:
    try:
        data = json.loads((rules_cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save_rule_data(key: str, data: dict[str, Any]) -> None:
    folder = rules_cache_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(folder / f"{key}.json", json.dumps(data))
    except (OSError, TypeError, ValueError):
        pass  # a cache that cannot be written only costs time


# The table functions of DuckDB's own that a rule may call. The others read files (read_csv,
# glob), run SQL given as a string (query, json_execute_serialized_sql) or change the database
# and its settings (checkpoint, enable_logging).
TABLE_FUNCTIONS_ALLOWED = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
# The SQLite reader's table functions, refused too: they open any SQLite file whatever the
# sandbox says (sqlite_attach can replace the store's views) and stay loaded in the instance that
# built the store, which only the built-in rules read (store.py); test_untrusted.py checks that
# these are all the reader adds.
SQLITE_READER_FUNCTIONS = frozenset({"sqlite_scan", "sqlite_attach", "sqlite_query"})
# Other functions a rule may not call: json_serialize_plan plans SQL given as a string, which
# opens the SQLite files its table functions name; finalize and combine take an aggregate's
# state (EXPORT_STATE, refused too), which a BLOB cast can forge to read any memory; the JSON
# functions below and the VARIANT type (variant_*, refused too) recurse into a document's
# nesting and overflow the stack (a crash) on deep ones; reservoir_quantile with a huge sample
# invalidates the database; the rest change state or only stall.
FUNCTIONS_DENIED = frozenset(
    {
        "json_serialize_plan",
        "finalize",
        "combine",
        "json_structure",
        "json_group_structure",
        "json_contains",
        "json_merge_patch",
        "from_json",
        "from_json_strict",
        "json_transform",
        "json_transform_strict",
        "reservoir_quantile",
        "json_serialize_sql",
        "json_deserialize_sql",
        "setseed",
        "nextval",
        "currval",
        "write_log",
        "sleep_ms",
        "pg_sleep",
    }
)


def check_select(path: Path, name: str, sql: str) -> duckdb.Statement:
    """A rule's SQL as the statement that runs: exactly one SELECT, whose table functions are
    allowed ones (or the store's own macros, which DuckDB does not know), calling none of
    FUNCTIONS_DENIED (check_functions)."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise RuleError(f"{path}: {name} is not valid SQL ({str(e).splitlines()[0]})") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise RuleError(f"{path}: {name} must be exactly one SELECT statement")
    check_functions(path, name, sql)
    return statements[0]


def check_functions(path: Path, name: str, sql: str) -> None:
    """The second line of defence: no table function but the allowed ones, none of
    FUNCTIONS_DENIED, no VARIANT type, no EXPORT_STATE. A query that passed is remembered in
    the rules' cache, by its text, this code and DuckDB's version: parsing and walking every
    query's tree took 0.2 s of each run on 2 cores."""
    import duckdb

    key = hashlib.sha256(f"checked\0{code_digest()}\0{duckdb.__version__}\0{sql}".encode()).hexdigest()
    if cached_rule_data(key) == {"checked": True}:
        return
    tables, functions = functions_called(path, name, sql)
    called = sorted(
        tables & denied_table_functions()
        | functions & FUNCTIONS_DENIED
        | {f for f in functions if f == "variant" or f.startswith("variant_")}
    )
    if called:
        raise RuleError(
            f"{path}: {name} calls {', '.join(called)}, which rules may not use: they read the store only "
            f"(table functions allowed: {', '.join(sorted(TABLE_FUNCTIONS_ALLOWED))})"
        )
    save_rule_data(key, {"checked": True})


def functions_called(path: Path, name: str, sql: str) -> tuple[set[str], set[str]]:
    """The table functions a SELECT calls (FROM f(...)), and every function it calls, from
    DuckDB's parse tree."""
    try:
        tree = json.loads(scalar(parser_connection(), "SELECT json_serialize_sql($sql)", {"sql": sql}))
    except RecursionError:
        raise RuleError(f"{path}: {name} is nested too deeply to be checked") from None
    if tree.get("error"):
        raise RuleError(f"{path}: {name} cannot be checked ({tree.get('error_message')})")
    tables: set[str] = set()
    functions: set[str] = set()
    todo: list[Any] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION":
                tables.add(str((node.get("function") or {}).get("function_name")).lower())
            if node.get("class") in ("FUNCTION", "WINDOW"):
                functions.add(str(node.get("function_name")).lower())
            if node.get("id") == "VARIANT":  # a type anywhere: casts, literals, nested types
                functions.add("variant")
            if node.get("export_state"):
                raise RuleError(f"{path}: {name} exports an aggregate's state (EXPORT_STATE), which rules may not use")
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return tables, functions


@lru_cache(maxsize=1)
def denied_table_functions() -> frozenset[str]:
    rows = parser_connection().execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')"
    )
    return frozenset({r[0] for r in rows.fetchall()} | SQLITE_READER_FUNCTIONS) - TABLE_FUNCTIONS_ALLOWED


@lru_cache(maxsize=1)
def parser_connection() -> duckdb.DuckDBPyConnection:
    """A private, empty DuckDB for parsing rules."""
    import duckdb

    return duckdb.connect()


def load_rules(extra_dirs: Iterable[str | Path] = (), require_tests: bool = True) -> tuple[list[Rule], list[str]]:
    """Built-in rules plus those of extra folders; returns (rules, warnings).

    Ids must be unique across all folders. A built-in rule without a test file is an error;
    a user rule without one is a warning.
    """
    rules: list[Rule] = []
    warnings: list[str] = []
    seen: dict[str, Path] = {}
    folders = [(builtin_rules_dir(), True)] + [(Path(d), False) for d in extra_dirs]
    for folder, builtin in folders:
        if not folder.is_dir():
            raise RuleError(f"rules folder '{folder}' does not exist")
        for path in rule_files(folder):
            rule = load_rule(path)
            if rule.id in seen:
                raise RuleError(f"duplicate rule id '{rule.id}' in {path} and {seen[rule.id]}")
            seen[rule.id] = path
            if rule.test_path is None:
                msg = f"{path}: rule '{rule.id}' has no test file {rule.id}.test.yaml beside it"
                if builtin and require_tests:
                    raise RuleError(msg)
                warnings.append(msg)
            rules.append(rule)
    return rules, warnings


def select_rules(rules: list[Rule], select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Rule]:
    """Keeps rules named (by id or tag) in select, if any, then drops those named in ignore."""
    select, ignore = set(select), set(ignore)
    known = {r.id for r in rules} | {t for r in rules for t in r.tags}
    for name in select | ignore:
        if name not in known:
            raise RuleError(f"unknown rule id or tag '{name}' (see: nsight-doctor rules list)")

    def named(rule: Rule, names: set[str]) -> bool:
        return rule.id in names or bool(names & set(rule.tags))

    kept = [r for r in rules if not select or named(r, select)]
    return [r for r in kept if not named(r, ignore)]


def with_overrides(rules: list[Rule], overrides: dict[str, Any]) -> list[Rule]:
    """Copies of the rules with thresholds overridden; overrides maps 'rule-id.threshold' to a
    value (text from the command line, or a YAML value). The loaded rules are not changed."""
    by_id = {r.id: r for r in rules}
    values: dict[str, dict[str, Any]] = {}
    for key, raw in overrides.items():
        rule_id, _, name = key.partition(".")
        rule = by_id.get(rule_id)
        if rule is None:
            raise RuleError(f"--threshold {key}: no rule '{rule_id}'")
        if name not in rule.thresholds:
            known = ", ".join(rule.thresholds) or "none"
            raise RuleError(f"--threshold {key}: rule '{rule_id}' has no threshold '{name}' (it has: {known})")
        values.setdefault(rule_id, {})[name] = parse_value(raw, rule.thresholds[name].default, key)
    return [
        dataclasses.replace(
            r, thresholds={n: dataclasses.replace(t, value=values[r.id].get(n)) for n, t in r.thresholds.items()}
        )
        if r.id in values
        else r
        for r in rules
    ]


def parse_value(raw: Any, default: Any, key: str) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return raw.lower() in ("true", "1", "yes")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        kind = {"bool": "true or false", "int": "a whole number", "float": "a number"}[type(default).__name__]
        raise RuleError(f"--threshold {key}={raw}: expected {kind}") from None
    return raw


def params_for(sql: str, rule: Rule, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    values = {n: t.effective for n, t in rule.thresholds.items()}
    values.update(extra or {})
    return {n: values[n] for n in set(PARAM_RE.findall(sql))}


def view_has_rows(con: duckdb.DuckDBPyConnection, view: str) -> bool:
    import duckdb

    try:
        return bool(scalar(con, f"SELECT EXISTS (SELECT 1 FROM {view})"))
    except duckdb.Error as e:
        raise RuleError(f"required view '{view}' is not available: {str(e).splitlines()[0]}") from None


# How long one query of a rule may run, in seconds, unless the caller says otherwise (analyze
# --rule-timeout): the built-in rules take well under a second each on the samples and a few
# seconds on the 2 M-kernel profile.
DEFAULT_TIMEOUT = 300.0


def graded(found: list[tuple[Rule, list[Finding]]], window_ns: int | None) -> list[Finding]:
    """run()'s findings graded (window_ns: the time an impact is a share of where none is given), ranked."""
    return rank([grade(f, rule.severity, window_ns) for rule, findings in found for f in findings])


def run(
    con: duckdb.DuckDBPyConnection, rules: list[Rule], timeout: float | None = DEFAULT_TIMEOUT
) -> tuple[list[tuple[Rule, list[Finding]]], list[Skipped]]:
    """Each rule run with its findings (for graded()), and the rules skipped for want of data;
    a query of a rule may take ``timeout`` seconds."""
    skipped: list[Skipped] = []
    has_rows: dict[str, bool] = {}
    runnable = []
    for rule in rules:
        missing = []
        for view in rule.requires:
            if view not in has_rows:
                has_rows[view] = view_has_rows(con, view)
            if not has_rows[view]:
                missing.append(view)
        if missing:
            skipped.append(Skipped(rule.id, f"no rows in {', '.join(missing)}"))
        else:
            # (checked here, in this thread: the parser's connection is shared)
            runnable.append((rule, statements_of(rule)))
    results = in_parallel(con, runnable, lambda cur, job: evaluate_rule(cur, job[0], timeout, job[1]), RULE_WORKERS)
    return [(rule, found) for (rule, _), found in zip(runnable, results)], skipped


# Rules run this many at a time, each through a cursor of its own (a connection to the same
# store): most of their queries are small, and one at a time leaves cores idle while DuckDB
# plans and Python reads rows. On 2 cores the 7.5 MB sample's analysis took 2.65-2.81 s with
# one, 2.07-2.32 s with 2 and 1.97-2.35 s with 4; at 2 M kernels 4 stayed within the default
# memory limit.
RULE_WORKERS = 4


def statements_of(rule: Rule) -> dict[str, duckdb.Statement]:
    """The rule's query and detail queries as the statements that run (check_select)."""
    return {
        name: check_select(rule.path or Path(rule.id), name, sql)
        for name, sql in [("query", rule.query), *rule.details.items()]
    }


def grade(f: Finding, ceiling: str, window_ns: int | None) -> Finding:
    """Sets the finding's window (its own, else window_ns) and its severity on the scale."""
    if f.scope != "capture" and f.window_ns is None:
        f.window_ns = window_ns
    share = 100.0 * f.impact_ns / f.window_ns if f.window_ns else None
    f.severity = severity_for(share, ceiling, f.scope)
    return f


def evaluate_rule(
    con: duckdb.DuckDBPyConnection,
    rule: Rule,
    timeout: float | None = DEFAULT_TIMEOUT,
    statements: dict[str, duckdb.Statement] | None = None,
) -> list[Finding]:
    """The rule's findings on the store behind con (statements: statements_of(rule), when
    already checked)."""
    statements = statements or statements_of(rule)
    rows = run_query(con, rule, "query", rule.query, statements["query"], timeout=timeout)
    query = bind_sql(rule.query, params_for(rule.query, rule))
    out = []
    for row in rows:
        if "impact_ns" not in row:
            raise RuleError(f"rule '{rule.id}': its query must return an impact_ns column")
        impact = row.pop("impact_ns")
        claims = [str(c) for c in row.pop("claims", None) or []]
        evidence: dict[str, Any] = dict(row)
        queries = {"query": query}
        for name, sql in rule.details.items():
            extra = {f"row_{k}": v for k, v in row.items()}
            evidence[name] = run_query(con, rule, name, sql, statements[name], extra=extra, timeout=timeout)
            queries[name] = bind_sql(sql, params_for(sql, rule, extra))
        values = dict(row)
        out.append(
            Finding(
                rule_id=rule.id,
                title=render_template(rule, rule.title, values, TITLE_NAME_MAX),
                severity=rule.severity,
                tags=list(rule.tags),
                impact_ns=round(impact or 0),
                message=render_template(rule, rule.message, values),
                recommendation=render_template(rule, rule.recommendation, values).strip(),
                evidence=evidence,
                references=list(rule.references),
                scope=rule.scope,
                claims=claims,
                window_ns=round(row["window_ns"]) if isinstance(row.get("window_ns"), (int, float)) else None,
                templates={"title": rule.title, "message": rule.message, "recommendation": rule.recommendation.strip()},
                values=values,
                queries=queries,
            )
        )
    return out


def run_query(
    con: duckdb.DuckDBPyConnection,
    rule: Rule,
    name: str,
    sql: str,
    statement: duckdb.Statement,
    extra: dict | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """The rows of one of the rule's SQL texts, run as the statement that check_select parsed
    from it, interrupted after ``timeout`` seconds (None: no limit)."""
    import duckdb

    params = params_for(sql, rule, extra)
    with TimeLimit(con, timeout) as limit:
        try:
            cur = execute(con, statement, params)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, map(plain, r))) for r in cur.fetchall()]
        except duckdb.Error as e:
            if not limit.expired:
                raise RuleError(f"rule '{rule.id}' ({name}) failed: {str(e).splitlines()[0]}") from None
    # Out of the except block: an interrupt of our own is no Ctrl-C (errors.is_interrupt).
    raise RuleError(
        f"rule '{rule.id}' ({name}) ran longer than {timeout:g} s, the limit of a rule's query (--rule-timeout)"
    )


class TimeLimit:
    """Interrupts the query running on ``con`` once ``seconds`` have passed (DuckDB stops it at
    its next task); ``expired`` says whether it did. Only a query still running is interrupted,
    never the next one."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float | None):
        self.con = con
        self.seconds = seconds
        self.expired = False
        self.lock = threading.Lock()
        self.running = False
        self.timer: threading.Timer | None = None

    def __enter__(self) -> TimeLimit:
        if self.seconds is not None:
            self.running = True
            self.timer = threading.Timer(self.seconds, self.interrupt)
            self.timer.daemon = True
            self.timer.start()
        return self

    def interrupt(self) -> None:
        with self.lock:
            if self.running:
                self.expired = True
                self.con.interrupt()

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.running = False
        if self.timer is not None:
            self.timer.cancel()


def rank(findings: list[Finding]) -> list[Finding]:
    """Steady-state findings first, then start-up, then profile notes; within each, most
    recoverable time first, severity breaking ties, then the rule id and the title for
    stability (a query's rows of equal impact come in no set order). Findings that claim the
    same kernels learn each other's rank (Finding.overlaps)."""
    ranked = sorted(
        findings, key=lambda f: (scope_rank(f.scope), -f.impact_ns, -severity_rank(f.severity), f.rule_id, f.title)
    )
    for i, f in enumerate(ranked):
        f.overlaps = [j + 1 for j, g in enumerate(ranked) if j != i and set(f.claims) & set(g.claims)]
    return ranked


def render_template(rule: Rule, template: str, values: dict[str, Any], name_max: int | None = None) -> str:
    try:
        return fill(template, values, name_max=name_max)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise RuleError(f"rule '{rule.id}': template {template[:40]!r}... cannot be filled: {e!r}") from None
