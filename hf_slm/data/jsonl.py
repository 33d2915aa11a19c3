"""Reading JSON-lines files (XSum, BLiMP) with errors that name the file and line."""

import json

from .text_files import open_text


def iter_jsonl(path, what="JSON-lines file"):
    """Yield (line number, record) for each non-blank line of `path`; every record must be a JSON object.

    A line that is not JSON, or is JSON but not an object, is a ValueError naming `what`, the file and the line.
    """
    with open_text(path, what) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{what} {path}, line {number}: not a JSON object ({error.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{what} {path}, line {number}: expected a JSON object, found {type(record).__name__}")
            yield number, record
