"""The one error type of the wire formats: which field is wrong, and why, on one line."""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with line breaks escaped, so a topic or member name cannot split a log line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class WireError(ValueError):
    """A text is not a usable message of its format. The message is one line naming the field
    (`epoch`, `partitions.orders[2]`, `input` for the text as a whole); `.field` and `.problem`
    carry the two parts for callers that count or compare them."""

    def __init__(self, field_name: str, problem: str) -> None:
        self.field = field_name
        self.problem = problem
        super().__init__(f"{one_line(field_name)}: {one_line(problem)}")


class DocumentError(WireError):
    """An assignment document (`assignment.json`) that cannot be acted on."""


class MetadataError(WireError):
    """Commit metadata that is not `{"member": M, "epoch": E}`."""


class UserDataError(WireError):
    """Assignor user_data that is not the plan-following assignor's."""
