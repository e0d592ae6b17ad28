"""The summary's record of what was run: the processes the capture launched, the long options
on their command lines, and the environment variables of theirs that a reader should see
(recorded_processes, recorded_options, recorded_settings). Secrets are hidden at ingest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nsight_doctor.sections.base import Section


@dataclass
class RecordedProcess(Section):
    VIEW: ClassVar[str] = "recorded_processes"
    process: int
    command: str | None
    working_dir: str | None
    environment: int


@dataclass
class RecordedOption(Section):
    VIEW: ClassVar[str] = "recorded_options"
    process: int
    option: str
    value: str | None


@dataclass
class RecordedSetting(Section):
    VIEW: ClassVar[str] = "recorded_settings"
    process: int
    name: str
    value: str
    kind: str
    effect: str
    reference: str
