"""The rule for a study's names (the study's, each objective's label, each variant's): one
path component that stays inside the output folder, and the pydantic field that holds one.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

# A study name, objective label or variant label becomes part of a path, so it must be one path
# component that stays inside the output folder: letters, digits, `_`, `=` and `-`, with single
# dots only between them (no `..`, no leading dot, no `/` or `\`), at most NAME_MAX_LENGTH
# characters. pydantic's regex engine has no look-around, hence the dot-separated groups.
NAME_PATTERN = r"^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*$"
NAME_MAX_LENGTH = 100
NAME_RULE = (
    "must be a single path component: letters, digits, _ = - and single dots between them "
    f"(no '..', no leading dot, no / or \\), at most {NAME_MAX_LENGTH} characters"
)


def name_field(description: str, default: Any = ...) -> Any:
    """A pydantic field holding a name that becomes part of a path (``NAME_PATTERN``)."""
    return Field(default, pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description=description)
