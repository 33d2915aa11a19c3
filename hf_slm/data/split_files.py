"""Which files make up which split, and building a DatasetDict from per-split generators.

Every loader accepts its data as either
- a folder: the files directly inside it (not in subfolders) are assigned to splits by the words of their
  names, split at `.`, `-`, `_` and spaces: `train` or `training` -> "train"; `dev`, `val`, `valid` or
  `validation` -> "validation"; `test` -> "test". So `train.txt`, `dev.txt`, `ptb-test.txt`,
  `en_ewt-ud-train.conllu`, `valid.jsonl` and `train-00000-of-00002.parquet` are all recognized; a split may
  have several files (read in sorted order). Hidden files and files whose names name no split are left out;
  a name that names two splits is an error.
- a mapping {split name: file or list of files}, for any other names or layout;
- a single file whose name names its split.

Loaders stream with `datasets.Dataset.from_generator`. The generator's arguments carry every file's size and
modification time, so that `datasets`' cache (keyed on those arguments) never serves an edited file's old
contents.
"""

import re
from collections.abc import Mapping
from pathlib import Path

from datasets import Dataset, DatasetDict
from datasets.exceptions import DatasetGenerationError

SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "dev": "validation",
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "test": "test",
}
_NAME_WORD_RE = re.compile(r"[.\-_\s]+")


def splits_named_in(file_name):
    """The split names that the words of `file_name` name (`ptb-dev.txt` -> {"validation"})."""
    return {SPLIT_WORDS[word] for word in _NAME_WORD_RE.split(file_name.lower()) if word in SPLIT_WORDS}


def require_path(path, what):
    """`path` as a Path; a ValueError naming it when it does not exist."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} {str(path)!r} does not exist")
    return path


def _as_file_list(split, value, what):
    values = [value] if isinstance(value, (str, Path)) else list(value)
    if not values:
        raise ValueError(f"split {split!r}: expected at least one {what} file, got an empty list")
    files = []
    for item in values:
        file = Path(item)
        if not file.is_file():
            state = "is a directory, not a file" if file.is_dir() else "does not exist"
            raise ValueError(f"split {split!r}: {what} file {str(file)!r} {state}")
        files.append(file)
    return files


def find_split_files(path, what, suffixes=None):
    """{split name: [files]} for a folder, a mapping or one file (see the module docstring).

    Args:
        path: a folder, a file, or a mapping {split: file or [files]}.
        what: what the files hold, for error messages ("tree", "CoNLL-U").
        suffixes: in a folder, only files ending in one of these (e.g. (".conllu",)); None for any file.
    """
    if isinstance(path, Mapping):
        if not path:
            raise ValueError(f"empty mapping of splits to {what} files: expected at least one split")
        return {str(split): _as_file_list(split, value, what) for split, value in path.items()}
    path = require_path(path, f"{what} path")
    if path.is_file():
        named = splits_named_in(path.name)
        if len(named) != 1:
            raise ValueError(
                f"{what} file {str(path)!r}: its name does not say which split it is ({_recognized()}); pass a "
                f"mapping such as {{'train': {str(path)!r}}}"
            )
        return {named.pop(): [path]}
    candidates = sorted(
        file for file in path.iterdir()
        if file.is_file() and not file.name.startswith(".")
        and (suffixes is None or file.name.lower().endswith(tuple(suffixes)))
    )
    splits = {}
    for file in candidates:
        named = splits_named_in(file.name)
        if len(named) > 1:
            raise ValueError(
                f"{what} file {str(file)!r}: its name names several splits {sorted(named)}; rename it or pass a "
                "mapping {split: files}"
            )
        if named:
            splits.setdefault(named.pop(), []).append(file)
    if not splits:
        shown = ", ".join(file.name for file in candidates[:10]) or "none"
        kinds = f" ending in {', '.join(suffixes)}" if suffixes else ""
        raise ValueError(
            f"{what} folder {str(path)!r}: no file{kinds} is named after a split ({_recognized()}); files found: "
            f"{shown}; pass a mapping {{split: files}} instead"
        )
    return {split: splits[split] for split in sorted(splits, key=_split_order)}


def _recognized():
    return "recognized words: " + ", ".join(sorted(SPLIT_WORDS))


def _split_order(split):
    order = ("train", "validation", "test")
    return (order.index(split), split) if split in order else (len(order), split)


def file_stamps(files):
    """`path:size:mtime_ns` of each file: put into gen_kwargs so that datasets' cache sees edits."""
    stamps = []
    for file in files:
        status = Path(file).stat()
        stamps.append(f"{Path(file).resolve()}:{status.st_size}:{status.st_mtime_ns}")
    return stamps


def describe_files(names, shown=3):
    """`a.txt, b.txt, c.txt and 12 more`: file lists in messages stay short."""
    names = [str(name) for name in names]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def require_examples(examples, description):
    """Yield from `examples`; raise a ValueError naming `description` when there were none."""
    count = 0
    for example in examples:
        count += 1
        yield example
    if not count:
        raise ValueError(f"{description}: no examples found")


# Under num_proc, a generator's error reaches this process only as the text of its traceback (multiprocess.pool's
# RemoteTraceback, the __cause__ of datasets' DatasetGenerationError): generators raise their errors through
# `marked_errors`, whose marks let build_dataset_dict find the message in that text and raise it again.
_MARK = "\x1e"


def marked_errors(examples):
    """Yield from `examples`; a ValueError or OSError they raise is raised again with its message marked."""
    try:
        yield from examples
    except (ValueError, OSError) as error:
        raise _like(error, f"{_MARK}{error}{_MARK}") from None


def _like(error, message):
    """An error of `error`'s type with `message` (its base ValueError / OSError where the type takes other
    arguments, as UnicodeDecodeError does)."""
    try:
        return type(error)(message)
    except TypeError:
        return (ValueError if isinstance(error, ValueError) else OSError)(message)


def _generator_error(error):
    """The ValueError / OSError a generator raised inside `error` (a DatasetGenerationError), marks removed; None
    when there is none."""
    cause = error.__cause__
    if isinstance(cause, (ValueError, OSError)):
        return _like(cause, str(cause).replace(_MARK, ""))
    parts = str(cause).split(_MARK) if cause is not None else []
    return ValueError(parts[1]) if len(parts) >= 3 else None


def _processes_for(gen_kwargs, num_proc):
    """from_generator's num_proc: none asked, or fewer than 2 list entries to share out (datasets would warn and
    fall back to one process), leave it out."""
    entries = min((len(value) for value in gen_kwargs.values() if isinstance(value, list)), default=0)
    processes = min(1 if num_proc is None else num_proc, entries)
    return {"num_proc": processes} if processes > 1 else {}


def build_dataset_dict(generator, split_kwargs, features, cache_dir=None, num_proc=None):
    """DatasetDict {split: Dataset.from_generator(generator, gen_kwargs=split_kwargs[split])}; with num_proc,
    datasets runs the generator in that many processes over parts of the gen_kwargs' lists (at most one process
    per list entry), in order.

    Errors raised inside the generator come out as themselves (datasets wraps them in a
    DatasetGenerationError that hides the file and line they name).
    """
    splits = {}
    for split, gen_kwargs in split_kwargs.items():
        try:
            splits[split] = Dataset.from_generator(
                generator, features=features, gen_kwargs=gen_kwargs, cache_dir=cache_dir, split=split,
                **_processes_for(gen_kwargs, num_proc),
            )
        except DatasetGenerationError as error:
            original = _generator_error(error)
            if original is not None:
                raise original from None
            raise
    return DatasetDict(splits)
