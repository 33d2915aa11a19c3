"""Writing a file at a path the user names, never replacing one the user wrote (issue 30, class 2).

A command that writes a file the user names (`hf-slm card`'s README.md, `hf-slm masks --png`, the dependency
conversion's CoNLL-U file) goes through `write_user_file`: a file already there is replaced only when this
command wrote it before (its mark, `marker`, is in it: running the command again refreshes its own output) or
when the user says so (`--overwrite`). Otherwise the command stops before writing, naming the file and the
option. Folders a run fills (training output, evaluation results, prepared data) have their own guard: a journal
and a lock (hf_slm/runs/journal.py).
"""

from pathlib import Path


def check_replaceable(path, marker=None, overwrite=False, option="--overwrite"):
    """Raise ValueError when `path` exists and may not be replaced: it is not a file, or it is a file without
    `marker` (bytes or str; None: no file counts as this command's) and `overwrite` is false."""
    path = Path(path)
    if not path.exists():
        return path
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected the path of a file to write")
    if overwrite:
        return path
    if marker is not None:
        mark = marker.encode() if isinstance(marker, str) else marker
        with open(path, "rb") as handle:
            if mark in handle.read():
                return path
    raise ValueError(f"{path} already exists and this command did not write it; pass {option} to replace it, or "
                     "choose another path")


def write_user_file(path, write, marker=None, overwrite=False, option="--overwrite"):
    """`write(path)` after `check_replaceable`; returns the path. `write` must leave `marker` in the file, so
    that running the command again may replace it."""
    path = check_replaceable(path, marker, overwrite, option)
    write(path)
    return path


__all__ = ["check_replaceable", "write_user_file"]
