"""Errors that the command line reports as one line on stderr with exit code 2."""


class DoctorError(Exception):
    """The tool could not do its job; str(self) is the whole message for the user."""


class InputError(DoctorError):
    """An input path is missing, unreadable, of an unknown kind, truncated or corrupt."""


class ToolMissingError(DoctorError):
    """An external tool (nsys) that the input needs was not found."""


class ReportVersionError(DoctorError):
    """The report was written by a tool version that the available tools cannot read."""


class RuleError(DoctorError):
    """A rule file is invalid, or a rule failed to evaluate."""
