"""Penn Treebank trees as a DatasetDict: WSJ .mrg folders split by section, or one-tree-per-line files.

Two layouts are read:

1. **A folder of .mrg files** (searched recursively), such as the LDC layout `<path>/NN/wsj_NNXX.mrg` or a flat
   folder of `wsj_NNXX.mrg` files (NLTK's sample). A file's WSJ section is the `NN` of its name `wsj_NNXX.mrg`.
   The default splits are the standard ones: sections 02-21 train, 22 validation, 23 test. `splits` names
   others, as {split: spec}, where a spec is one item or a list of items, each
   - a section `"00"`, or a range of sections `"02-21"` (inclusive);
   - a file number `"0199"` (= wsj_0199.mrg), or a range of file numbers `"0001-0159"` (inclusive);
   - anything else: a file name or glob, matched against the file's name and its path inside the folder
     (`"wsj_0199.mrg"`, `"wsj_01[5-9]?.mrg"`, `"00/*.mrg"`).
   E.g. `{"train": "00", "validation": "01"}` or `{"train": ["00-00"], "test": ["wsj_0199.mrg"]}`. Every item
   must match at least one file and no file may fall in two splits. The CLI spells the same as
   `--splits train=00,validation=01` (several items joined by `+`: `train=00+0100-0150`).

2. **One tree per line** (Dyer et al. 2016 and most LM set-ups): a folder whose file names name their splits
   (`train.txt`, `dev.txt`, `test.txt`, `ptb-train.txt`, `train.02-21`, ...; see split_files.py), a
   mapping {split: file(s)}, or `splits` naming files (or globs) inside the folder, e.g.
   `{"train": "train.02-21", "validation": "dev.24"}`. Blank lines are skipped; a line holding anything but
   one tree is an error naming the file and line. Mapped files ending in `.mrg` are read as .mrg files
   (trees may span lines).

Columns: `tree` (the normalized tree, one line of PTB brackets), `words` (its leaves), `file` (the file,
relative to the folder when there is one) and `index` (the tree's position in that file, from 0).
Normalization options are those of `hf_slm.tokenization.trees.normalize_tree` (by default -NONE- traces and
the constituents they leave empty are removed, POS tags and the wrapper root dropped; function tags kept).
"""

import fnmatch
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from datasets import Features, List, Value

from .text_files import _not_utf8, check_text_file, open_text
from ..tokenization.trees import normalize_tree, parse_tree, read_tree_file, tree_to_string
from .split_files import (
    build_dataset_dict, describe_files, file_stamps, find_split_files, marked_errors, require_examples,
    require_path,
)

STANDARD_WSJ_SPLITS = {"train": "02-21", "validation": "22", "test": "23"}
TREE_FEATURES = Features({"tree": Value("string"), "words": List(Value("string")), "file": Value("string"),
                          "index": Value("int64")})
NORMALIZE_OPTIONS = tuple(
    name for name, parameter in inspect.signature(normalize_tree).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
)
_WSJ_FILE_RE = re.compile(r"^wsj_(\d{2})(\d{2})\.mrg$", re.IGNORECASE)
_SECTIONS_RE = re.compile(r"^(\d{2})(?:-(\d{2}))?$")
_FILE_NUMBERS_RE = re.compile(r"^(\d{4})(?:-(\d{4}))?$")


def check_normalize_options(options):
    """A ValueError naming any option that normalize_tree does not take."""
    unknown = sorted(set(options) - set(NORMALIZE_OPTIONS))
    if unknown:
        raise ValueError(f"unknown tree normalization option(s) {unknown}; expected any of {list(NORMALIZE_OPTIONS)}")
    return dict(options)


def read_tree_lines(path, normalize_options, shard=None):
    """Yield (line number, normalized tree or None) for each line of a one-tree-per-line file; None marks a
    blank line (document boundaries in BLLIP). The file is read line by line, never whole; with `shard` (a
    LineShard of `line_shards`) only the lines of that byte range."""
    lines = enumerate(_open_lines(path, shard), start=1 if shard is None else shard.first_line)
    for number, line in lines:
        if not line.strip():
            yield number, None
            continue
        yield number, _tree_of_line(path, number, line, normalize_options)


def _open_lines(path, shard):
    """The lines of `path` (text), or of one byte range of it."""
    if shard is None:
        with open_text(path, "tree file") as handle:
            yield from handle
        return
    check_text_file(path, "tree file")
    with open(path, "rb") as handle:
        handle.seek(shard.start)
        position = shard.start
        while position < shard.stop:
            line = handle.readline()
            if not line:
                break
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError:
                raise _not_utf8(path, "tree file") from None  # the message open_text gives
            position += len(line)


def _tree_of_line(path, number, line, normalize_options):
    """The normalized tree of one line; errors name the file and line."""
    where = f"{path}, line {number}"
    try:
        tree = parse_tree(line, source=where)
    except ValueError as error:
        # parse_tree locates errors as "<source>, tree 0, line 1", which inside one line says nothing.
        message = str(error)
        redundant = f"{where}, tree 0, line 1: "
        if message.startswith(redundant):
            raise ValueError(f"{where}: {message[len(redundant):]}") from None
        raise
    try:
        return normalize_tree(tree, **normalize_options)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from error


@dataclass(frozen=True)
class LineShard:
    """Lines [start, stop) (byte offsets at line starts) of a one-tree-per-line file: the number of its first line
    (from 1) and the index of its first tree in the file (blank lines hold none)."""

    start: int
    stop: int
    first_line: int
    first_index: int


# A file is cut into shards only where each holds at least this much (smaller ones: one reader is quicker).
MIN_SHARD_BYTES = 1 << 20


def line_shards(path, count):
    """Up to `count` LineShards of about equal size covering a one-tree-per-line file, cut at line ends, found in
    one pass over its bytes; one shard (None) for a small file, or one with a carriage return (universal newlines,
    which the byte ranges would not follow)."""
    size = Path(path).stat().st_size
    count = min(count, size // MIN_SHARD_BYTES)
    if count < 2:
        return [None]
    shards, position, line, trees = [], 0, 1, 0
    start, start_line, start_index = 0, 1, 0
    with open(path, "rb") as handle:
        for raw in handle:
            if b"\r" in raw:
                return [None]
            position += len(raw)
            line += 1
            trees += bool(raw.strip()) and bool(raw.decode("utf-8", "replace").strip())  # str.strip's blanks
            if len(shards) < count - 1 and position >= size * (len(shards) + 1) // count:
                shards.append(LineShard(start, position, start_line, start_index))
                start, start_line, start_index = position, line, trees
    shards.append(LineShard(start, position, start_line, start_index))
    return shards


def tree_example(tree, file, index):
    return {"tree": tree_to_string(tree), "words": list(tree.leaves()), "file": file, "index": index}


def generate_tree_examples(files, names, stamps, split, normalize_options, shards=None):
    """Examples of one split: files ending in .mrg read whole (trees may span lines), others line by line.

    `names` are the files as shown in the `file` column; `stamps` only key datasets' cache. `shards` (one per
    entry of `files`, None for a whole file) cut one-tree-per-line files into byte ranges, which datasets reads in
    parallel (from_generator's num_proc shares out the lists of gen_kwargs); a split of several shards is checked
    for examples once loaded (tree_dataset_dict), since one shard of blank lines alone is no error.
    """
    del stamps
    shards = shards if shards is not None else [None] * len(files)

    def examples():
        for file, name, shard in zip(files, names, shards):
            if file.lower().endswith(".mrg"):
                for index, tree in enumerate(read_tree_file(file, **normalize_options)):
                    yield tree_example(tree, name, index)
            else:
                index = 0 if shard is None else shard.first_index
                for _, tree in read_tree_lines(file, normalize_options, shard):
                    if tree is not None:
                        yield tree_example(tree, name, index)
                        index += 1

    if any(shard is not None for shard in shards):
        yield from marked_errors(examples())
    else:
        yield from marked_errors(require_examples(examples(), f"split {split!r} ({describe_files(names)})"))


def tree_dataset_dict(split_files, normalize_options, cache_dir=None, root=None, num_proc=None):
    """The DatasetDict of `split_files` {split: [paths]}; `file` shows paths relative to `root` if given.

    With num_proc > 1, one-tree-per-line files of several MiB are cut into up to num_proc byte ranges (line_shards)
    and read by num_proc processes; the examples, their order and their `index` are those one process reads.
    """
    split_kwargs, sharded = {}, set()
    for split, files in split_files.items():
        entries = []  # (path, name, stamp, shard)
        for file, stamp in zip(files, file_stamps(files)):
            name = Path(file).relative_to(root).as_posix() if root else str(file)
            plain = not str(file).lower().endswith(".mrg")
            for shard in line_shards(file, num_proc) if plain and num_proc and num_proc > 1 else [None]:
                entries.append((str(file), name, stamp, shard))
        paths, names, stamps, shards = (list(column) for column in zip(*entries))
        split_kwargs[split] = {"files": paths, "names": names, "stamps": stamps, "split": split,
                               "normalize_options": normalize_options}
        if any(shard is not None for shard in shards):
            split_kwargs[split]["shards"] = shards
            sharded.add(split)
    dataset = build_dataset_dict(generate_tree_examples, split_kwargs, TREE_FEATURES, cache_dir, num_proc=num_proc)
    for split in sharded:  # what require_examples checks in an unsharded split
        if len(dataset[split]) == 0:
            raise ValueError(f"split {split!r} ({describe_files(split_kwargs[split]['names'])}): no examples found")
    return dataset


def wsj_section(file):
    """The WSJ section ("00" .. "24") of a file named wsj_NNXX.mrg, else None."""
    match = _WSJ_FILE_RE.match(Path(file).name)
    return match.group(1) if match else None


def _spec_items(split, spec):
    items = [spec] if isinstance(spec, (str, int)) else list(spec)
    if not items:
        raise ValueError(f"split {split!r}: expected at least one section, range or file name, got an empty list")
    return [str(item) for item in items]


def _item_matches(item, relative):
    """Whether the spec item selects the file at `relative` (a posix path inside the folder)."""
    name = relative.rsplit("/", 1)[-1]
    match = _WSJ_FILE_RE.match(name)
    sections = _SECTIONS_RE.match(item)
    if sections:
        low, high = sections.group(1), sections.group(2) or sections.group(1)
        return bool(match) and low <= match.group(1) <= high
    numbers = _FILE_NUMBERS_RE.match(item)
    if numbers:
        low, high = numbers.group(1), numbers.group(2) or numbers.group(1)
        return bool(match) and low <= match.group(1) + match.group(2) <= high
    return fnmatch.fnmatchcase(name, item) or fnmatch.fnmatchcase(relative, item)


def _describe_mrg_folder(root, relatives):
    sections = sorted({wsj_section(relative) for relative in relatives} - {None})
    if sections:
        shown = ", ".join(sections) if len(sections) <= 8 else f"{sections[0]} ... {sections[-1]}"
        return f"{str(root)!r} holds {len(relatives)} .mrg files in WSJ section(s) {shown}"
    return f"{str(root)!r} holds {len(relatives)} .mrg files, none named wsj_NNXX.mrg (name them by file or glob)"


def select_mrg_files(root, splits=None):
    """{split: [.mrg files]} of a folder, by sections, file numbers or globs (see the module docstring)."""
    root = Path(root)
    relatives = sorted(file.relative_to(root).as_posix() for file in root.rglob("*") if file.is_file()
                       and file.name.lower().endswith(".mrg"))
    using_default = splits is None
    splits = STANDARD_WSJ_SPLITS if using_default else splits
    if not isinstance(splits, Mapping) or not splits:
        raise ValueError(f"splits {splits!r}: expected a mapping {{split: sections, ranges or file names}}")
    chosen, owner = {}, {}
    for split, spec in splits.items():
        selected = set()
        for item in _spec_items(split, spec):
            matched = {relative for relative in relatives if _item_matches(item, relative)}
            if not matched:
                message = f"split {split!r}: {item!r} matches no .mrg file; {_describe_mrg_folder(root, relatives)}"
                if using_default:
                    message += (
                        ". The standard WSJ splits (sections 02-21 train, 22 validation, 23 test) need the full "
                        "treebank; name the splits by section or file with `splits`, e.g. "
                        "splits={'train': '00', 'validation': '01'} (CLI: --splits train=00,validation=01)"
                    )
                raise ValueError(message)
            selected |= matched
        for relative in selected:
            if relative in owner:
                raise ValueError(f"{relative!r} is selected by both split {owner[relative]!r} and split {split!r}")
            owner[relative] = split
        chosen[str(split)] = [root / relative for relative in sorted(selected)]
    return chosen


def _select_named_files(root, splits):
    """{split: [files]} of a folder of one-tree-per-line files, by file names or globs."""
    names = sorted(file.name for file in root.iterdir() if file.is_file())
    chosen = {}
    for split, spec in splits.items():
        selected = set()
        for item in _spec_items(split, spec):
            matched = {name for name in names if fnmatch.fnmatchcase(name, item)}
            if not matched:
                raise ValueError(
                    f"split {split!r}: {item!r} matches no file in {str(root)!r}; files there: "
                    f"{', '.join(names[:10]) or 'none'}"
                )
            selected |= matched
        chosen[str(split)] = [root / name for name in sorted(selected)]
    return chosen


def load_ptb(path, splits=None, cache_dir=None, num_proc=None, **normalize_options):
    """Load PTB trees as a DatasetDict of `tree`, `words`, `file`, `index` (layouts: module docstring).

    Args:
        path: a folder of .mrg files (WSJ), a folder of one-tree-per-line files, one such file, or a
            mapping {split: file(s)}.
        splits: {split: spec}: WSJ sections, ranges or file names/globs for a .mrg folder (default 02-21 /
            22 / 23); file names or globs for a folder of one-tree-per-line files.
        cache_dir: datasets' cache folder (default: datasets' own).
        num_proc: processes reading the files (tree_dataset_dict: large one-tree-per-line files are cut into
            byte ranges; .mrg files are shared out whole). The result does not depend on it.
        normalize_options: options of `normalize_tree` (strip_traces, strip_function_tags, binarize,
            preterminals, drop_root, remove_unary, horizontal_markov).
    """
    normalize_options = check_normalize_options(normalize_options)
    read = dict(cache_dir=cache_dir, num_proc=num_proc)
    if isinstance(path, Mapping):
        if splits is not None:
            raise ValueError("splits names files inside a folder; with a mapping {split: files} as path, leave it out")
        return tree_dataset_dict(find_split_files(path, "tree"), normalize_options, **read)
    root = require_path(path, "PTB path")
    if root.is_dir() and any(file.name.lower().endswith(".mrg") for file in root.rglob("*") if file.is_file()):
        return tree_dataset_dict(select_mrg_files(root, splits), normalize_options, root=root, **read)
    if root.is_dir() and splits is not None:
        if not isinstance(splits, Mapping) or not splits:
            raise ValueError(f"splits {splits!r}: expected a mapping {{split: file names or globs}}")
        return tree_dataset_dict(_select_named_files(root, splits), normalize_options, root=root, **read)
    if root.is_file() and splits is not None:
        raise ValueError(f"splits applies to a folder; {str(root)!r} is a file (pass a mapping {{split: file}})")
    return tree_dataset_dict(find_split_files(root, "tree"), normalize_options,
                             root=root if root.is_dir() else None, **read)
