"""The PDF report: the HTML report with its charts as inline SVG, printed by a headless
Chromium-based browser (Debian's chromium, Google Chrome, Edge), the most faithful print of
HTML and SVG there is. Without one, --format pdf fails with one line that says what to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from nsight_doctor.cachedir import scratch_dir
from nsight_doctor.errors import DoctorError
from nsight_doctor.model import Diagnosis
from nsight_doctor.render import html

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "microsoft-edge", "chrome")

# Headless, with no network and nothing from the user's profile.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--no-pdf-header-footer",
]


def find_browser() -> str | None:
    """$NSIGHT_DOCTOR_BROWSER, else the first Chromium-based browser on PATH."""
    env = os.environ.get("NSIGHT_DOCTOR_BROWSER")
    if env:
        return env if shutil.which(env) or Path(env).is_file() else None
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_browser() -> str:
    exe = find_browser()
    if not exe:
        raise DoctorError(
            "--format pdf prints the report with a Chromium-based browser, and none was found "
            "(install Debian's chromium: apt-get install chromium, or set NSIGHT_DOCTOR_BROWSER); "
            "or write --format html and print it from any browser"
        )
    return exe


def render(d: Diagnosis, browser: str | None = None, timeout: float = 180) -> bytes:
    exe = browser or require_browser()
    page = html.render(d, static=True)
    with scratch_dir("nsight-doctor-pdf-") as tmp:
        src = tmp / "report.html"
        out = tmp / "report.pdf"
        src.write_text(page, encoding="utf-8")
        cmd = [exe, *FLAGS, f"--user-data-dir={tmp}/profile", f"--print-to-pdf={out}", src.as_uri()]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DoctorError(f"could not print the PDF with {exe}: {e}") from None
        if not out.exists() or out.stat().st_size == 0:
            tail = " ".join((r.stderr or "").split()[-30:])
            raise DoctorError(f"{exe} did not write the PDF (exit {r.returncode}): {tail}")
        return out.read_bytes()
