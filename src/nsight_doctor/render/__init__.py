"""Renderers: each turns a finished Diagnosis into a report. They never query a database.

render(diagnosis, "markdown") -> str          text, markdown, json, html, ipynb
render_bytes(diagnosis, "pdf") -> bytes        any format, as the bytes of its file
"""

from __future__ import annotations

from typing import Any

from nsight_doctor.model import Diagnosis
from nsight_doctor.render import json_out, markdown, text


def _html(d: Diagnosis, **options: Any) -> str:
    from nsight_doctor.render import html

    return html.render(d, **options)


def _ipynb(d: Diagnosis, **options: Any) -> str:
    from nsight_doctor.render import notebook

    return notebook.render(d, **options)


FORMATS = {"text": text.render, "markdown": markdown.render, "json": json_out.render, "html": _html, "ipynb": _ipynb}
# Formats that are files rather than text for a terminal, with their extension.
FILE_FORMATS = {"html": ".html", "ipynb": ".ipynb", "pdf": ".pdf"}
ALL_FORMATS = [*FORMATS, "pdf"]


def render(diagnosis: Diagnosis, fmt: str = "text", **options: Any) -> str:
    return FORMATS[fmt](diagnosis, **options)


def render_bytes(diagnosis: Diagnosis, fmt: str, **options: Any) -> bytes:
    if fmt == "pdf":
        from nsight_doctor.render import pdf

        return pdf.render(diagnosis, **options)
    return render(diagnosis, fmt, **options).encode("utf-8")
