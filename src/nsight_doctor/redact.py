"""Hides secrets in what profiles record about the profiled process: its environment and its
command line.

Nsight Systems stores the environment of the process it launched (META_DATA_CAPTURE rows
``PROCESS_n:ENVIRONMENT_VARIABLE`` holding ``KEY="value"``, and the ``DeviceEnvironment``
entry of TARGET_INFO_SYSTEM_ENV holding ``KEY=value;KEY=value``) and its command line
(``PROCESS_n:COMMAND`` and ``PROCESS_n:ARGUMENT_i``). Those can hold API keys and tokens
(HF_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, ``--api-key ...``). Anything that shows them
to a user, or writes them into a report that gets pasted into a ticket, passes them through
this module first.

What is hidden (the value becomes REDACTED; names stay, so that a reader still sees that the
variable was set):

- values of variables and options whose name has a word that means a secret: KEY (API_KEY,
  AWS_ACCESS_KEY_ID, but not KEYBOARD), TOKEN (HF_TOKEN, but not TOKENIZERS_PARALLELISM or
  TIKTOKEN_CACHE_DIR), SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIALS, AUTHORIZATION,
  COOKIE, PRIVATE, SIGNATURE, DSN, WEBHOOK, CONNECTION_STRING; PWD and PASS after another
  word (MYSQL_PWD, but not PWD or OLDPWD, which are folders, nor GIT_ASKPASS, a program);
  and glued forms (APIKEY, AUTHTOKEN, PGPASSWORD);
- values that look like a known kind of token whatever their name: Hugging Face (hf_...),
  OpenAI and Anthropic (sk-...), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab
  (glpat-), Slack (xox?-), AWS access key ids (AKIA..., ASIA...), Google API keys (AIza...),
  JSON web tokens (eyJ...);
- passwords in URLs (scheme://user:password@host).

Redaction errs on the side of hiding: a path in SSH_KEY_PATH is hidden too.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

REDACTED = "REDACTED"

# Words (split at _, -, . and lower-to-upper case changes) that name a secret on their own.
SECRET_WORDS = {
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTHORIZATION",
    "COOKIE",
    "COOKIES",
    "PRIVATE",
    "SIGNATURE",
    "DSN",
    "WEBHOOK",
}
# Words that name a secret only after another word (PWD alone is the working directory).
SECRET_SUFFIX_WORDS = {"PWD", "PASS"}
# One word made of a prefix glued to a secret word: APIKEY, AUTHTOKEN, PGPASSWORD, DBPASS.
GLUED_PREFIXES = {"API", "AUTH", "ACCESS", "CLIENT", "SECRET", "PRIVATE", "SESSION", "BEARER", "DB", "PG", "ADMIN"}
GLUED_SUFFIXES = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD")
# Pairs of words that together name a secret.
SECRET_PAIRS = {("CONNECTION", "STRING"), ("AUTH", "HEADER")}

# Known token formats, hidden wherever they appear.
TOKEN_RE = re.compile(
    r"\b(?:"
    r"hf_[A-Za-z0-9]{20,}"
    r"|sk-[A-Za-z0-9_\-]{16,}"
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|AIza[A-Za-z0-9_\-]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r")"
)
# scheme://user:password@host: the password.
URL_PASSWORD_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)([^\s@/]+)(@)")
WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# NAME=value at the start of a string, the value optionally quoted as nsys records it.
ASSIGNMENT_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)=(.*)$", re.S)
# --name=value or -name=value inside a command line.
OPTION_VALUE_RE = re.compile(r"^(--?[A-Za-z][A-Za-z0-9_.\-]*)=(.*)$", re.S)


def words(name: str) -> list[str]:
    """A variable or option name split into upper-case words: hfToken -> [HF, TOKEN]."""
    return [w.upper() for part in re.split(r"[^A-Za-z0-9]+", name) for w in WORD_RE.findall(part)]


def is_secret_name(name: str) -> bool:
    """Whether a variable or option name (HF_TOKEN, --api-key, awsSecretAccessKey) names a
    value that must not be shown."""
    ws = words(name)
    for i, w in enumerate(ws):
        if w in SECRET_WORDS or (i > 0 and w in SECRET_SUFFIX_WORDS):
            return True
        if any(w.endswith(s) and w[: -len(s)] in GLUED_PREFIXES for s in GLUED_SUFFIXES):
            return True
    return any(pair in SECRET_PAIRS for pair in itertools.pairwise(ws))


def redact_text(text: str) -> str:
    """Hides known token formats and URL passwords inside any text."""
    text = TOKEN_RE.sub(REDACTED, text)
    return URL_PASSWORD_RE.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)


def redact_value(name: str, value: str) -> str:
    """The value of a variable or option called name, as it may be shown."""
    if is_secret_name(name):
        return REDACTED if value.strip() else value
    return redact_text(value)


def redact_env(entry: str) -> str:
    """One environment entry, NAME=value or NAME="value" (as META_DATA_CAPTURE records it)."""
    m = ASSIGNMENT_RE.match(entry)
    if not m:
        return redact_text(entry)
    name, value = m.groups()
    if is_secret_name(name) and value.strip():
        quote = value[0] if value[:1] in ("'", '"') and value.endswith(value[0]) and len(value) > 1 else ""
        return f"{name}={quote}{REDACTED}{quote}"
    return f"{name}={redact_text(value)}"


def redact_env_block(block: str, sep: str = ";") -> str:
    """Entries joined by sep (TARGET_INFO_SYSTEM_ENV's DeviceEnvironment: A=1;B=2)."""
    return sep.join(redact_env(e) for e in block.split(sep))


def redact_args(args: Iterable[str]) -> list[str]:
    """A command line as a list of arguments: values of secret-named options (--api-key X,
    --token=X), secret-named assignments before the command (HF_TOKEN=x python ...), and
    tokens anywhere are hidden."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        m = OPTION_VALUE_RE.match(arg)
        if m:
            out.append(f"{m.group(1)}={redact_value(m.group(1), m.group(2))}")
            continue
        if arg.startswith("-") and len(arg) > 1 and is_secret_name(arg):
            out.append(arg)
            hide_next = True
            continue
        if ASSIGNMENT_RE.match(arg) and not arg.startswith("-"):
            out.append(redact_env(arg))
            continue
        out.append(redact_text(arg))
    return out


def redact(text: str) -> str:
    """A free-form string that may be an environment entry, a block of them, or a command
    line (split at whitespace): the right one of the functions above, applied."""
    if ";" in text and ASSIGNMENT_RE.match(text.split(";", 1)[0]):
        return redact_env_block(text)
    if ASSIGNMENT_RE.match(text) and " " not in text.split("=", 1)[0]:
        first = text.split(None, 1)
        if len(first) == 1 or '"' in text.split("=", 1)[1][:1]:
            return redact_env(text)
    parts = re.split(r"(\s+)", text)
    args = parts[::2]
    red = redact_args(args)
    parts[::2] = red
    return "".join(parts)


def redact_capture_meta(rows: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name, value) rows of META_DATA_CAPTURE (base_capture_meta) with secrets hidden:
    environment variables by their names, arguments that follow a secret-named option, and
    tokens anywhere. The other rows are nsys's own settings, whose names are not the
    program's (TRACE_NVTX_RANGE_HOT_KEY is a keyboard key): only tokens are hidden there."""
    out: list[tuple[str, str]] = []
    hide_next_arg = False
    for name, value in rows:
        value = "" if value is None else str(value)
        if name.endswith("ENVIRONMENT_VARIABLE"):
            out.append((name, redact_env(value)))
            continue
        if ":ARGUMENT_" in name:
            if hide_next_arg:
                out.append((name, REDACTED))
                hide_next_arg = False
                continue
            [red] = redact_args([value])
            hide_next_arg = value.startswith("-") and "=" not in value and is_secret_name(value)
            out.append((name, red))
            continue
        # nsys's own settings (NVTX_OPTIONS:TRACE_NVTX_RANGE_HOT_KEY = false): only tokens.
        out.append((name, redact_text(value)))
    return out
