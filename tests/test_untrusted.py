"""Untrusted strings and untrusted rules.

Kernel names, NVTX text, GPU names, file names and messages quoted from files come from
other people's programs and files: terminal escape sequences are removed from everything
printed, Markdown and HTML stay inert, and none of it is ever spliced into SQL. Secrets in
recorded environments and command lines are redacted by nsight_doctor.redact. Rule files
(--rules) are SQL from other people: they read the store and nothing else.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import duckdb
import pytest

from conftest import run_cli, sample
from nsight_doctor.errors import RuleError
from nsight_doctor.redact import (
    REDACTED,
    is_secret_name,
    redact,
    redact_args,
    redact_capture_meta,
    redact_env,
    redact_env_block,
)
from nsight_doctor.render.markdown import escape
from nsight_doctor.render.text import sanitize

GRAPHS = sample("decode_b1_graphs")
ESC = "\x1b"

HOSTILE_KERNEL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mevil_kernel</td><script>alert(1)</script> | `x` [a](http://e)\x1b[0m"
HOSTILE_NVTX = "\n# step\x1b[1A\x9b2K"
HOSTILE_GPU = "H200\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"


@pytest.fixture(scope="module")
def hostile_export(tmp_path_factory):
    """A real export whose kernel names, NVTX text and GPU name carry escape sequences and
    markup."""
    import sqlite3

    p = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    shutil.copyfile(GRAPHS, p)
    con = sqlite3.connect(p)
    con.execute(
        "UPDATE StringIds SET value = ? WHERE id IN (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL)",
        (HOSTILE_KERNEL,),
    )
    con.execute("UPDATE NVTX_EVENTS SET text = ? || coalesce(text, '')", (HOSTILE_NVTX,))
    con.execute("UPDATE TARGET_INFO_GPU SET name = ?", (HOSTILE_GPU,))
    con.commit()
    con.close()
    return p


def test_terminal_output_has_no_escape_sequences(hostile_export):
    r = run_cli("analyze", str(hostile_export), "-v")
    assert r.returncode == 0, r.stderr
    assert ESC not in r.stdout and "\x9b" not in r.stdout and "\x07" not in r.stdout
    assert "evil_kernel" in r.stdout  # the name is shown, without its escapes
    assert "pwned" not in r.stdout  # the window-title sequence is removed whole
    assert "H200link" in r.stdout


def test_markdown_output_is_inert(hostile_export):
    r = run_cli("analyze", str(hostile_export), "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert ESC not in md and "<script>" not in md and "</td>" not in md
    assert "&lt;script" in md  # shown escaped (and clipped in the summary row)
    # Table rows keep their cell count: no | from a name splits a cell.
    for line in md.splitlines():
        if line.startswith("| ") and "evil_kernel" in line:
            assert len(re.findall(r"(?<!\\)\|", line)) == 3, line
    assert "\n# step" not in md  # no heading injected by NVTX text


def test_json_output_keeps_the_strings_exactly(hostile_export):
    r = run_cli("analyze", str(hostile_export), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert ESC not in r.stdout  # JSON escapes control characters (\u001b)
    top = json.loads(r.stdout)["summary"]["top_kernels"]
    assert HOSTILE_KERNEL in [t["name"] for t in top]


def test_error_messages_quoting_files_have_no_escape_sequences(tmp_path):
    p = tmp_path / "run\x1b[31m\x1b]0;t\x07.sqlite"
    p.write_text("text")
    r = run_cli("analyze", str(p))
    assert r.returncode == 2
    assert ESC not in r.stderr and "\x07" not in r.stderr
    assert r.stderr.startswith("nsight-doctor: error: ") and "run" in r.stderr


@pytest.mark.parametrize(
    "raw,shown",
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("a\x9b2Jb", "ab"),
        ("\x1bPdevice control\x1b\\x", "x"),
        ("bell\x07", "bell?"),
        ("ok ü 你好 µs", "ok ü 你好 µs"),
    ],
)
def test_sanitize(raw, shown):
    assert sanitize(raw) == shown


@pytest.mark.parametrize(
    "raw,escaped",
    [
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ("a|b", "a\\|b"),
        ("`code`", "\\`code\\`"),
        ("[link](javascript:x)", "\\[link\\](javascript:x)"),
        ("# heading", "\\# heading"),
        ("1. item", "1\\. item"),
        ("line\nbreak", "line break"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("&amp;", "&amp;amp;"),
    ],
)
def test_markdown_escape(raw, escaped):
    assert escape(raw) == escaped


@pytest.mark.slow
def test_paths_with_quotes_reach_sql_only_as_literals(tmp_path):
    """File names are untrusted too: quotes and SQL in them do not change a statement."""
    folder = tmp_path / "it's; DROP TABLE x; --"
    folder.mkdir()
    p = folder / "run\"'.sqlite"
    shutil.copyfile(GRAPHS, p)
    r = run_cli("analyze", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    pq = folder / "pq'dir"
    shutil.copytree(sample("decode_b1", "").parent / "decode_b1_pqtdir", pq)
    (pq / "NVTX_EVENTS.parquet").rename(pq / "NVTX'\"EVENTS.parquet")
    r = run_cli("analyze", str(pq), "--format", "json")
    assert r.returncode == 0, r.stderr


def test_no_sql_is_built_from_data_by_interpolation():
    """Where ingest must splice a value into SQL (ATTACH, read_json, LOAD take no
    parameters), it goes through db.literal or db.quote: no f-string puts a path or a name
    between quotes by hand."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "nsight_doctor"
    hand_quoted = re.compile(r"""f["'][^"'\n]*'\{[^}]*\}'""")
    offenders = []
    for f in sorted(src.rglob("*.py")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if hand_quoted.search(line) and ("SELECT" in line or "ATTACH" in line or "LOAD" in line or "read_" in line):
                offenders.append(f"{f.name}:{n}: {line.strip()}")
    assert offenders == []


# --- redaction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "MYSQL_PWD",
        "PGPASSWORD",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "apiKey",
        "--api-key",
        "--hf-token",
        "--password",
        "AUTHTOKEN",
        "PRIVATE_KEY",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        # Seen in the corpus's recorded environments, and not secrets.
        "PWD",
        "OLDPWD",
        "GIT_ASKPASS",
        "VSCODE_GIT_ASKPASS_MAIN",
        "SSH_AUTH_SOCK",
        "XDG_SESSION_ID",
        "DBUS_SESSION_BUS_ADDRESS",
        "XAUTHORITY",
        "SSL_CERT_FILE",
        "NSIGHT_COMPUTE_VERSION",
        "CUDA_VISIBLE_DEVICES",
        "TOKENIZERS_PARALLELISM",
        "TIKTOKEN_CACHE_DIR",
        "KEYBOARD_LAYOUT",
        "MAX_TOKENS",
        "--model",
    ],
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_redact_env_entries_as_nsys_records_them():
    assert redact_env('HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz012345"') == f'HF_TOKEN="{REDACTED}"'
    assert redact_env("OPENAI_API_KEY=sk-live") == f"OPENAI_API_KEY={REDACTED}"
    assert redact_env('PATH="/usr/bin:/bin"') == 'PATH="/usr/bin:/bin"'
    assert (
        redact_env('DATABASE_URL="postgres://me:hunter2@db:5432/x"')
        == f'DATABASE_URL="postgres://me:{REDACTED}@db:5432/x"'
    )
    # A token of a known kind is hidden whatever variable holds it.
    assert redact_env("NOTE=use hf_abcdefghijklmnopqrstuvwxyz012345 here") == f"NOTE=use {REDACTED} here"
    assert redact_env("EMPTY_TOKEN=") == "EMPTY_TOKEN="


def test_redact_device_environment_block():
    block = "CUDA_VISIBLE_DEVICES=0;AWS_SECRET_ACCESS_KEY=abc/def+ghi;HOME=/root;GH=ghp_abcdefghijklmnopqrstuvwxyz0123"
    assert (
        redact_env_block(block) == f"CUDA_VISIBLE_DEVICES=0;AWS_SECRET_ACCESS_KEY={REDACTED};HOME=/root;GH={REDACTED}"
    )


def test_redact_command_lines():
    args = ["vllm", "serve", "m", "--api-key", "s3cret", "--hf-token=hf_x", "--port", "8000"]
    assert redact_args(args) == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--port",
        "8000",
    ]
    assert redact_args(["HF_TOKEN=abc", "python", "x.py"]) == [f"HF_TOKEN={REDACTED}", "python", "x.py"]
    assert redact("python serve.py --token abc --model llama") == f"python serve.py --token {REDACTED} --model llama"
    assert redact("A=1;SECRET_KEY=x") == f"A=1;SECRET_KEY={REDACTED}"


def test_redact_capture_metadata_rows():
    rows = [
        ("PROCESS_0:COMMAND", "python3"),
        ("PROCESS_0:ARGUMENT_0", "serve.py"),
        ("PROCESS_0:ARGUMENT_1", "--api-key"),
        ("PROCESS_0:ARGUMENT_2", "s3cret"),
        ("PROCESS_0:ARGUMENT_3", "--port"),
        ("PROCESS_0:ARGUMENT_4", "8000"),
        ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz"'),
        ("PROCESS_0:ENVIRONMENT_VARIABLE", 'PWD="/work"'),
        ("PROCESS_0:WORKING_DIR", "/work"),
    ]
    values = [v for _, v in redact_capture_meta(rows)]
    assert values == [
        "python3",
        "serve.py",
        "--api-key",
        REDACTED,
        "--port",
        "8000",
        f'HF_TOKEN="{REDACTED}"',
        'PWD="/work"',
        "/work",
    ]


def test_redaction_on_a_real_recorded_environment():
    """The sample's META_DATA_CAPTURE with a token planted among its 88 real variables:
    only the token goes."""
    import sqlite3

    con = sqlite3.connect(f"file:{sample('decode_b1')}?mode=ro&immutable=1", uri=True)
    rows = con.execute("SELECT name, value FROM META_DATA_CAPTURE").fetchall()
    con.close()
    planted = [*rows, ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz"')]
    out = redact_capture_meta(planted)
    changed = [(a, b) for a, b in zip(planted, out) if a != b]
    assert changed == [(planted[-1], ("PROCESS_0:ENVIRONMENT_VARIABLE", f'HF_TOKEN="{REDACTED}"'))]


# --- user rules run sandboxed -------------------------------------------------------------

RULE = textwrap.dedent("""\
    id: sneaky
    name: Sneaky
    title: "{{n}}"
    severity: low
    tags: [launch-bound]
    requires: [kernels]
    thresholds: {{}}
    query: {query}
    message: "{{n}}"
    recommendation: Nothing.
    impact: Nothing to recover, this is a test rule.
    explanation: {{what: w, why: w, evidence: e, action: a}}
    """)


@pytest.mark.parametrize(
    "query,needle",
    [
        ("\"SELECT 0 AS impact_ns, count(*) AS n FROM read_csv('/etc/passwd')\"", "calls read_csv"),
        ("\"SELECT 0 AS impact_ns, content AS n FROM read_text('/etc/hostname')\"", "calls read_text"),
        ("\"SELECT 0 AS impact_ns, count(*) AS n FROM glob('/root/*')\"", "calls glob"),
        # The SQLite reader stays loaded in an in-memory store (small inputs): its table
        # functions open any SQLite file, and would attach one that sqlite_query could write.
        (f"\"SELECT 0 AS impact_ns, count(*) AS n FROM sqlite_scan('{GRAPHS}', 'StringIds')\"", "calls sqlite_scan"),
        (f"\"SELECT 0 AS impact_ns, 1 AS n FROM sqlite_attach('{GRAPHS}')\"", "calls sqlite_attach"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM sqlite_query('x', 'DELETE FROM t')\"", "calls sqlite_query"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM (SELECT * FROM SQLITE_SCAN('/tmp/x.db', 't'))\"", "calls sqlite_scan"),
        # SQL in a string would not be checked at all.
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM query('ATTACH ''/tmp/x.db'' AS x')\"", "calls query,"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM query_table('kernels')\"", "calls query_table"),
        (
            '"SELECT 0 AS impact_ns, 1 AS n FROM json_execute_serialized_sql(json_serialize_sql('
            f"'SELECT * FROM sqlite_scan(''{GRAPHS}'', ''StringIds'')'))\"",
            "calls json_execute_serialized_sql",
        ),
        # Table functions that change the database or its settings, or break later queries.
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM enable_logging(level='trace')\"", "calls enable_logging"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM enable_profiling(save_location='/tmp/x')\"", "calls enable_profiling"),
        ('"SELECT 0 AS impact_ns, 1 AS n FROM (SELECT * FROM checkpoint())"', "calls checkpoint"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM histogram('kernels', duration)\"", "calls histogram"),
        # Planning SQL given as a string opens the SQLite files its table functions name (and
        # SQLite creates -wal and -shm files beside one in WAL mode).
        (
            '"SELECT 0 AS impact_ns, json_serialize_plan('
            f"'SELECT * FROM sqlite_scan(''{GRAPHS}'', ''StringIds'')') AS n\"",
            "calls json_serialize_plan",
        ),
        ('"SELECT 0 AS impact_ns, [1].list_transform(x -> setseed(0.3)) AS n"', "calls setseed"),
        ('"SELECT 0 AS impact_ns, sleep_ms(1) OVER () AS n"', "calls sleep_ms"),
        # A forged aggregate state reads any memory, or crashes the process.
        ('"SELECT 0 AS impact_ns, (first(name) EXPORT_STATE)::BLOB AS n FROM kernels"', "EXPORT_STATE"),
        ('"SELECT 0 AS impact_ns, finalize(NULL) AS n"', "calls finalize"),
        ('"SELECT 0 AS impact_ns, combine(NULL, NULL) AS n"', "calls combine"),
        # Deeply nested JSON overflows the stack of these (the process crashed).
        ("\"SELECT 0 AS impact_ns, json_structure(repeat('[', 100000)) AS n\"", "calls json_structure"),
        ("\"SELECT 0 AS impact_ns, variant_typeof('[1]'::JSON::VARIANT) AS n\"", "calls variant, variant_typeof"),
        (
            '"SELECT 0 AS impact_ns, 1 AS n FROM kernels WHERE TRY_CAST(name AS STRUCT(a VARIANT)) IS NULL"',
            "calls variant",
        ),
        (
            '"SELECT 0 AS impact_ns, reservoir_quantile(duration, 0.5, 2147483647) AS n FROM kernels"',
            "reservoir_quantile",
        ),
        # Too deep for the check itself: refused, not an internal error.
        ('"SELECT 0 AS impact_ns, ' + "abs(" * 600 + "1" + ")" * 600 + ' AS n"', "nested too deeply"),
        ("\"ATTACH '/tmp/x.db' AS x\"", "exactly one SELECT"),
        ("\"COPY (SELECT 1) TO '/tmp/leak.csv'\"", "exactly one SELECT"),
        ('"INSTALL httpfs"', "exactly one SELECT"),
        ('"LOAD httpfs"', "exactly one SELECT"),
        ('"SET enable_external_access = true"', "exactly one SELECT"),
        ("\"SELECT 0 AS impact_ns, 1 AS n; COPY (SELECT 1) TO '/tmp/leak.csv'\"", "exactly one SELECT"),
        # Writes to the store stop at the same check, before the read-only connection refuses them.
        ('"DELETE FROM base_kernels"', "exactly one SELECT"),
        ('"CREATE TABLE x AS SELECT 1"', "exactly one SELECT"),
        ("\"SELECT 0 AS impact_ns, 1 AS n FROM query('DROP TABLE base_kernels')\"", "calls query,"),
        ('"CHECKPOINT"', "exactly one SELECT"),
    ],
)
@pytest.mark.slow  # one CLI run per case; the in-process cases below stay in the fast tier
def test_a_rule_that_reaches_outside_the_store_fails_clearly(tmp_path, query, needle):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sneaky.yaml").write_text(RULE.format(query=query))
    r = run_cli("analyze", str(GRAPHS), "--rules", str(rules), "--select", "sneaky")
    assert r.returncode == 2, r.stdout
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("nsight-doctor: error: ") and needle in line and "sneaky" in line
    assert not (tmp_path / "leak.csv").exists()


def test_rules_may_call_none_of_the_functions_the_sqlite_reader_adds():
    """An in-memory store (small inputs, built-in rules only) keeps the SQLite reader loaded;
    every function it adds is refused by the second line (a new version may add more)."""
    from nsight_doctor.ingest.nsys_export import load_sqlite_extension
    from nsight_doctor.rules import SQLITE_READER_FUNCTIONS, denied_table_functions

    def functions(con):
        return {r[0].lower() for r in con.execute("SELECT function_name FROM duckdb_functions()").fetchall()}

    fresh, loaded = duckdb.connect(), duckdb.connect()
    load_sqlite_extension(loaded)
    added = functions(loaded) - functions(fresh)
    assert added and added <= SQLITE_READER_FUNCTIONS <= denied_table_functions()


def test_rule_test_cases_are_sandboxed_too(tmp_path):
    """`rules test` builds stores from a rule's test file: its SQL cannot read files either."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sneaky.yaml").write_text(RULE.format(query='"SELECT 0 AS impact_ns, count(*) AS n FROM kernels"'))
    (rules / "sneaky.test.yaml").write_text(
        textwrap.dedent("""\
            rule: sneaky
            cases:
              - name: reads a file
                expect: fire
                tables:
                  kernels:
                    sql: "SELECT 0 AS start, 1 AS \\"end\\", column0 AS name FROM read_csv('/etc/passwd')"
            """)
    )
    r = run_cli("rules", "test", "sneaky", "--rules", str(rules))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "disabled by configuration" in r.stderr and "root:" not in r.stdout + r.stderr


# --- the construction holds without the second line of defence -----------------------------
# With check_functions (the list of what reviews found) turned off, what a rule from --rules could
# do to reach outside the store still fails: its store is in a file, opened read-only in an
# instance that never loaded the SQLite reader, external access is off, the configuration is
# locked, what runs is the one parsed SELECT, and a query is interrupted after its time limit.
# What only the second line stops is listed in the parametrization above and not tried here:
# forged aggregate states and deeply nested documents crash the process, reservoir_quantile
# invalidates the instance, and enable_logging, enable_profiling or setseed change the
# instance's state despite the lock.

CONSTRUCTION = [
    ("\"SELECT 0 AS impact_ns, count(*) AS n FROM read_csv('/etc/passwd')\"", "disabled by configuration"),
    ("\"SELECT 0 AS impact_ns, content AS n FROM read_text('/etc/hostname')\"", "disabled by configuration"),
    ("\"SELECT 0 AS impact_ns, count(*) AS n FROM glob('/root/*')\"", "disabled by configuration"),
    (f"\"SELECT 0 AS impact_ns, count(*) AS n FROM sqlite_scan('{GRAPHS}', 'StringIds')\"", "not in the catalog"),
    (f"\"SELECT 0 AS impact_ns, 1 AS n FROM sqlite_attach('{GRAPHS}')\"", "not in the catalog"),
    ("\"SELECT 0 AS impact_ns, 1 AS n FROM sqlite_query('x', 'DELETE FROM t')\"", "not in the catalog"),
    (
        '"SELECT 0 AS impact_ns, 1 AS n FROM json_execute_serialized_sql(json_serialize_sql('
        f"'SELECT * FROM sqlite_scan(''{GRAPHS}'', ''StringIds'')'))\"",
        "not in the catalog",
    ),
    ("\"SELECT 0 AS impact_ns, 1 AS n FROM query('ATTACH ''/tmp/x.db'' AS x')\"", "Expected a single SELECT"),
    ("\"SELECT 0 AS impact_ns, 1 AS n FROM query('DROP TABLE base_kernels')\"", "Expected a single SELECT"),
    ("\"COPY (SELECT 1) TO '/tmp/leak.csv'\"", "exactly one SELECT"),
    ('"DELETE FROM base_kernels"', "exactly one SELECT"),
    ('"SET enable_external_access = true"', "exactly one SELECT"),
    ('"LOAD sqlite_scanner"', "exactly one SELECT"),
    ('"SELECT 0 AS impact_ns, sleep_ms(600000) AS n"', "ran longer than 1 s"),
    ('"SELECT 0 AS impact_ns, count(*) AS n FROM range(1000000000000) a"', "ran longer than 1 s"),
]


# The same store either way (a file): --db's half is in the slow tier.
@pytest.mark.parametrize("where", ["temporary", pytest.param("db", marks=pytest.mark.slow)])
@pytest.mark.parametrize("query,needle", CONSTRUCTION)
def test_the_store_holds_without_the_function_checks(tmp_path, monkeypatch, where, query, needle):
    from nsight_doctor import AnalyzeOptions, analyze
    from nsight_doctor import rules as rules_mod
    from nsight_doctor.errors import DoctorError

    monkeypatch.setattr(rules_mod, "check_functions", lambda *args: None)
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "sneaky.yaml").write_text(RULE.format(query=query))
    db = str(tmp_path / "store.duckdb") if where == "db" else None
    opts = AnalyzeOptions(rules_dirs=[str(folder)], select=["sneaky"], db=db, rule_timeout=1)
    with pytest.raises(DoctorError) as e:
        analyze([str(GRAPHS)], opts)
    assert needle in str(e.value) and "sneaky" in str(e.value)
    assert not (tmp_path / "leak.csv").exists()


@pytest.mark.parametrize("where", ["temporary", "db"])
def test_the_rules_store_never_loaded_the_sqlite_reader(tmp_path, where):
    """Ingest reads the SQLite export through DuckDB's SQLite reader; the store that rules from
    --rules read (in a file: engine.py asks for one) is opened in an instance that never loaded
    it, locked down and read-only."""
    from nsight_doctor import store

    built = store.build([GRAPHS], db=tmp_path / "store.duckdb" if where == "db" else None, reopen=True)
    assert built.builder is None
    try:
        con = built.connect()
        assert con.execute("SELECT count(*) > 0 FROM base_kernels").fetchall() == [(True,)]
        functions = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions()").fetchall()}
        assert not {f for f in functions if f.startswith("sqlite")}
        settings = dict(con.execute("SELECT name, value FROM duckdb_settings()").fetchall())
        assert settings["enable_external_access"] == "false" and settings["lock_configuration"] == "true"
        assert settings["autoload_known_extensions"] == "false"
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("DELETE FROM base_kernels")
    finally:
        built.close()


def test_the_in_memory_store_loads_no_extension_though_built_to_skip_signatures(tmp_path):
    """The build connection may load unsigned extensions (store_config: the SQLite reader's
    signature check costs 0.16 s); once built, the sandbox refuses any LOAD, signed or not,
    and the setting cannot be turned back."""
    import duckdb_extension_sqlite_scanner as pkg

    from nsight_doctor import store

    built = store.build([GRAPHS])
    assert built.builder is not None
    # (an unsigned copy of the reader: the loaded reader itself is a no-op to LOAD again)
    fake = tmp_path / "unsigned.duckdb_extension"
    reader = next(Path(pkg.__file__).parent.glob("extensions/*/sqlite_scanner.duckdb_extension"))
    fake.write_bytes(reader.read_bytes()[:-1024])
    try:
        con = built.connect()
        with pytest.raises(duckdb.Error, match="disabled through configuration"):
            con.execute(f"LOAD '{fake}'")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET allow_unsigned_extensions = false")
    finally:
        built.close()


def test_a_rule_that_runs_too_long_fails_clearly(tmp_path):
    """An interrupt of the rule's own time limit is an error (exit code 2), not a Ctrl-C (130)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    endless = '"SELECT 0 AS impact_ns, count(*) AS n FROM range(1000000000000) a"'
    (rules / "sneaky.yaml").write_text(RULE.format(query=endless))
    (rules / "sneaky.test.yaml").write_text("rule: sneaky\ncases: [{name: x, expect: quiet}]\n")
    r = run_cli("analyze", str(GRAPHS), "--rules", str(rules), "--select", "sneaky", "--rule-timeout", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = r.stderr.strip().splitlines()
    assert "ran longer than 1 s" in line and "--rule-timeout" in line


def test_a_query_that_passed_the_function_checks_is_remembered(tmp_path, monkeypatch):
    """A query that passed is not parsed again (the cache is keyed by its text); one that failed
    is checked, and refused, every time."""
    from nsight_doctor import rules as rules_mod

    parsed = []
    real = rules_mod.functions_called

    def parse(*args):
        parsed.append(args[2])
        return real(*args)

    monkeypatch.setattr(rules_mod, "functions_called", parse)
    ok = f"SELECT 1 AS n -- {tmp_path.name}"  # (text no other test checks)
    bad = f"SELECT * FROM query('SELECT 1') -- {tmp_path.name}"
    for _ in range(2):
        rules_mod.check_functions(tmp_path / "r.yaml", "query", ok)
        with pytest.raises(RuleError, match="calls query"):
            rules_mod.check_functions(tmp_path / "r.yaml", "query", bad)
    assert parsed == [ok, bad, bad]
