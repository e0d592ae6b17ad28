"""Renderers: each turns a finished Diagnosis into text. They never query a database.

render(diagnosis, "markdown") -> str
"""

from __future__ import annotations

from nsight_doctor.model import Diagnosis
from nsight_doctor.render import json_out, markdown, text

FORMATS = {"text": text.render, "markdown": markdown.render, "json": json_out.render}


def render(diagnosis: Diagnosis, fmt: str = "text", **options) -> str:
    return FORMATS[fmt](diagnosis, **options)
