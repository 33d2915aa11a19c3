"""XSum (Narayan et al. 2018) as a DatasetDict with the Hugging Face columns `document`, `summary`, `id`.

Two kinds of input:

1. **Tables**: parquet, JSON lines (`.jsonl`, or `.json` holding one object per line) or CSV (with a header
   row) files holding at least the columns document, summary and id; one file (or several shards) per
   split, in a folder whose file names name their splits (`train.parquet`, `validation.jsonl`,
   `test.csv`, `train-00000-of-00002.parquet`, ...; see split_files.py), one such file, or a mapping
   {split: file(s)}. Other columns are not kept. Ids are stored as strings (CSV and JSON may give numbers).
2. **The original release**: a folder holding `bbc-summary-data/` (or that folder itself) of `<id>.summary`
   files, plus the split file (`XSum-TRAINING-DEV-TEST-SPLIT-90-5-5.json`: {"train": [ids],
   "validation": [ids], "test": [ids]}), given as `split_file` or found in the folder (a .json file with
   "split" in its name). A .summary file is made of sections, each introduced by a line `[SN]NAME[SN]`:
   URL, TITLE, FIRST-SENTENCE (the summary) and RESTBODY (the document). As the Hugging Face XSum builder
   (version 1.2.0) does, blank lines and the BBC page's share-widget lines ("Share this with", "Email",
   "Facebook", ...) are left out, and the remaining lines of a section are joined with newlines.
"""

import csv
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

import pyarrow.parquet as pq
from datasets import Features, Value

from .jsonl import iter_jsonl
from .text_files import open_text, read_text
from .split_files import (
    build_dataset_dict, describe_files, file_stamps, find_split_files, require_examples, require_path,
)

XSUM_COLUMNS = ("document", "summary", "id")
XSUM_FEATURES = Features({column: Value("string") for column in XSUM_COLUMNS})
TABLE_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")
SUMMARY_SECTIONS = ("URL", "TITLE", "FIRST-SENTENCE", "RESTBODY")
# Lines of the BBC page's sharing widget that the crawl kept inside articles.
SHARE_WIDGET_LINES = frozenset([
    "Share this with", "Email", "Facebook", "Messenger", "Twitter", "Pinterest", "WhatsApp", "Linkedin",
    "LinkedIn", "Copy this link", "These are external links and will open in a new window",
])
_SECTION_RE = re.compile(r"^\[SN\](.*)\[SN\]\s*$")


def _example(record, where):
    """The XSum example of one table row; a ValueError naming `where` when a value is missing or not text."""
    example = {}
    for column in XSUM_COLUMNS:
        value = record.get(column)
        if column == "id" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise ValueError(f"{where}: column {column!r} is {value!r}; expected a string")
        example[column] = value
    return example


def _check_columns(found, file):
    missing = [column for column in XSUM_COLUMNS if column not in found]
    if missing:
        raise ValueError(f"XSum file {file}: missing column(s) {missing}; found {list(found)}")


def _jsonl_rows(file):
    for number, record in iter_jsonl(file, "XSum file"):
        _check_columns(record, f"{file}, line {number}")
        yield _example(record, f"XSum file {file}, line {number}")


def _csv_rows(file):
    with open_text(file, "XSum file", newline="") as handle:
        reader = csv.DictReader(handle)
        _check_columns(reader.fieldnames or [], file)
        for row_number, row in enumerate(reader, start=1):
            if None in row or None in row.values():  # more or fewer fields than the header
                raise ValueError(
                    f"XSum file {file}, row {row_number} (ending on line {reader.line_num}): expected "
                    f"{len(reader.fieldnames)} fields as in the header"
                )
            yield _example(row, f"XSum file {file}, row {row_number}")


def _parquet_rows(file):
    parquet = pq.ParquetFile(file)
    _check_columns(parquet.schema_arrow.names, file)
    row_number = 0
    for batch in parquet.iter_batches(batch_size=1000, columns=list(XSUM_COLUMNS)):
        for record in batch.to_pylist():
            yield _example(record, f"XSum file {file}, row {row_number}")
            row_number += 1


def _table_rows(file):
    suffix = Path(file).suffix.lower()
    if suffix == ".parquet":
        return _parquet_rows(file)
    if suffix in (".jsonl", ".json"):
        return _jsonl_rows(file)
    if suffix == ".csv":
        return _csv_rows(file)
    raise ValueError(f"XSum file {file}: unknown format {suffix!r}; expected one of {list(TABLE_SUFFIXES)}")


def generate_table_examples(files, stamps, split):
    """Examples of one split from parquet / JSON lines / CSV files (stamps only key datasets' cache)."""
    del stamps

    def examples():
        for file in files:
            yield from _table_rows(file)

    yield from require_examples(examples(), f"split {split!r} ({describe_files(files)})")


def read_summary_file(path):
    """(document, summary) of one original-format `<id>.summary` file (module docstring)."""
    sections, current = {}, None
    with open_text(path, "XSum summary file") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            marker = _SECTION_RE.match(line.strip())
            if marker:
                current = marker.group(1)
                if current not in SUMMARY_SECTIONS:
                    raise ValueError(
                        f"XSum file {path}, line {number}: unknown section {line.strip()!r}; expected one of "
                        f"{['[SN]' + name + '[SN]' for name in SUMMARY_SECTIONS]}"
                    )
                sections[current] = []
            elif line.strip() and line not in SHARE_WIDGET_LINES:
                if current is None:
                    raise ValueError(
                        f"XSum file {path}, line {number}: text before the first section marker; expected "
                        "'[SN]URL[SN]' or another '[SN]NAME[SN]' line"
                    )
                sections[current].append(line)
    missing = [name for name in ("FIRST-SENTENCE", "RESTBODY") if name not in sections]
    if missing:
        raise ValueError(f"XSum file {path}: no {' or '.join('[SN]' + name + '[SN]' for name in missing)} section")
    return "\n".join(sections["RESTBODY"]).strip(), "\n".join(sections["FIRST-SENTENCE"]).strip()


def generate_summary_examples(data_dir, ids, stamp, split):
    """Examples of one split from `<data_dir>/<id>.summary` files, in the split file's order."""
    del stamp

    def examples():
        for document_id in ids:
            document, summary = read_summary_file(Path(data_dir) / f"{document_id}.summary")
            yield {"document": document, "summary": summary, "id": document_id}

    yield from require_examples(examples(), f"split {split!r} of {data_dir}")


def read_split_file(path):
    """{split: [ids]} of an XSum split file; a ValueError naming the file when it has another shape."""
    path = require_path(path, "XSum split file")
    try:
        splits = json.loads(read_text(path, "XSum split file"))
    except json.JSONDecodeError as error:
        raise ValueError(f"XSum split file {path}: not JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(splits, dict) or not splits:
        raise ValueError(f"XSum split file {path}: expected an object {{split: [ids]}}, e.g. {{\"train\": [...]}}")
    for split, ids in splits.items():
        if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
            raise ValueError(f"XSum split file {path}: split {split!r} must be a list of document ids")
    return {str(split): [str(i) for i in ids] for split, ids in splits.items()}


def original_data_dir(path):
    """The folder of .summary files when `path` is (or holds) the original release, else None."""
    path = Path(path)
    if (path / "bbc-summary-data").is_dir():
        return path / "bbc-summary-data"
    if path.is_dir() and next(path.glob("*.summary"), None) is not None:
        return path
    return None


def _find_split_file(path, data_dir):
    for folder in dict.fromkeys([Path(path), data_dir.parent]):
        found = sorted(f for f in folder.glob("*.json") if "split" in f.name.lower())
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"several XSum split files in {str(folder)!r} ({', '.join(f.name for f in found)}): "
                             "pass split_file")
    raise ValueError(
        f"{str(path)!r} holds the original XSum release but no split file: pass split_file (the XSum split JSON, "
        "XSum-TRAINING-DEV-TEST-SPLIT-90-5-5.json, {\"train\": [ids], \"validation\": [ids], \"test\": [ids]})"
    )


def _original_split_kwargs(data_dir, splits):
    """gen_kwargs per split, after checking that every named document exists (one stat per file, which
    also gives the sizes and times that key datasets' cache)."""
    split_kwargs = {}
    for split, ids in splits.items():
        digest, missing = hashlib.sha256(), []
        for document_id in ids:
            try:
                status = (data_dir / f"{document_id}.summary").stat()
            except FileNotFoundError:
                missing.append(document_id)
                continue
            digest.update(f"{document_id}:{status.st_size}:{status.st_mtime_ns};".encode())
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise ValueError(
                f"the split file names {len(missing)} {split} document(s) missing from {str(data_dir)!r}: {shown} "
                f"(expected <id>.summary files there)"
            )
        split_kwargs[split] = {"data_dir": str(data_dir), "ids": ids, "stamp": digest.hexdigest(), "split": split}
    return split_kwargs


def load_xsum(path, split_file=None, cache_dir=None):
    """Load XSum as a DatasetDict of `document`, `summary`, `id` (strings) from tables or the original release.

    Args:
        path: a folder of per-split parquet / JSON lines / CSV files, one such file, a mapping
            {split: file(s)}, or the original release's folder (holding bbc-summary-data/, or that folder).
        split_file: the XSum split JSON for the original release (default: found in the folder).
        cache_dir: datasets' cache folder (default: datasets' own).
    """
    data_dir = None if isinstance(path, Mapping) else original_data_dir(require_path(path, "XSum path"))
    if data_dir is not None:
        splits = read_split_file(split_file if split_file is not None else _find_split_file(path, data_dir))
        return build_dataset_dict(generate_summary_examples, _original_split_kwargs(data_dir, splits),
                                  XSUM_FEATURES, cache_dir)
    if split_file is not None:
        raise ValueError(
            f"split_file applies to the original XSum release (bbc-summary-data/*.summary); {path!r} holds tables"
        )
    split_files = find_split_files(path, "XSum", suffixes=None if isinstance(path, Mapping) else TABLE_SUFFIXES)
    split_kwargs = {split: {"files": [str(file) for file in files], "stamps": file_stamps(files), "split": split}
                    for split, files in split_files.items()}
    return build_dataset_dict(generate_table_examples, split_kwargs, XSUM_FEATURES, cache_dir)
