"""BLLIP-LG (as released by Hu et al. 2020) as a DatasetDict: one tree per line, sentence or document level.

Files: a folder whose file names name their splits (`train.txt`, `dev.txt`, `test.txt`, ...; see
split_files.py) or a mapping {split: file(s)}. Each non-blank line holds one PTB-bracketed tree.

Sentence level: one example per tree, with the columns of the PTB loader (`tree`, `words`, `file`, `index`).

Document level: one example per document, with columns `trees` (one-line tree strings), `words` (one word
list per tree), `document_id`, and `file` / `index` of the document's first tree. Documents come from
- blank lines: consecutive non-blank lines form a document (several blank lines count as one break, and a
  file's end ends a document); document_id is `<tree file>:<n>`, n counting the file's documents from 0;
- or a boundary file per split (`boundaries`): one line per document, in order, holding the number of
  sentences (trees) in that document, optionally followed by whitespace and the document's id:

      3 wsj-1989-0001
      2 wsj-1989-0002

  Blank lines in boundary files and tree files are skipped. Without an id, document_id is
  `<boundary file>:<n>`. The counts run over the split's tree files in order; counts that need more trees
  than there are, or that leave trees over, are errors. `boundaries` is a mapping {split: file}, a folder of
  boundary files named after their splits (`train.docs`, `dev.docs`, ...), or one file when one split is
  loaded.
"""

import re
from collections.abc import Mapping
from pathlib import Path

from datasets import Features, List, Value

from .text_files import open_text
from ..tokenization.trees import tree_to_string
from .ptb import check_normalize_options, read_tree_lines, tree_dataset_dict
from .split_files import (
    build_dataset_dict, describe_files, file_stamps, find_split_files, require_examples, require_path,
)

DOCUMENT_FEATURES = Features({
    "trees": List(Value("string")),
    "words": List(List(Value("string"))),
    "document_id": Value("string"),
    "file": Value("string"),
    "index": Value("int64"),
})
_BOUNDARY_LINE_RE = re.compile(r"^\s*(\d+)(?:\s+(\S.*?))?\s*$")


def _split_names(files, root):
    return [Path(file).relative_to(root).as_posix() if root else str(file) for file in files]


def _numbered_trees(files, names, normalize_options):
    """Yield (file name, index in file, tree or None at a blank line) over the files in order."""
    for file, name in zip(files, names):
        index = 0
        for _, tree in read_tree_lines(file, normalize_options):
            yield name, (index if tree is not None else None), tree
            if tree is not None:
                index += 1
        yield name, None, None  # a file's end ends a blank-line document


def _document(trees, document_id, file, index):
    return {"trees": [tree_to_string(tree) for tree in trees], "words": [list(tree.leaves()) for tree in trees],
            "document_id": document_id, "file": file, "index": index}


def _documents_by_blank_lines(files, names, normalize_options):
    trees, start, number = [], None, {}
    for name, index, tree in _numbered_trees(files, names, normalize_options):
        if tree is not None:
            if not trees:
                start = (name, index)
            trees.append(tree)
        elif trees:
            count = number.get(start[0], 0)
            number[start[0]] = count + 1
            yield _document(trees, f"{start[0]}:{count}", *start)
            trees = []


def read_boundaries(path):
    """Yield (line number, sentence count, document id or None) for each non-blank line of a boundary file."""
    with open_text(path, "boundary file") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            match = _BOUNDARY_LINE_RE.match(line)
            if not match or int(match.group(1)) == 0:
                raise ValueError(
                    f"boundary file {path}, line {number}: expected a positive number of sentences, optionally "
                    f"followed by a document id, found {line.strip()[:60]!r}"
                )
            yield number, int(match.group(1)), match.group(2)


def _documents_by_boundaries(files, names, boundary_file, normalize_options):
    sentences = ((name, index, tree) for name, index, tree in _numbered_trees(files, names, normalize_options)
                 if tree is not None)
    boundary_name = Path(boundary_file).name
    used = 0
    for document, (line, count, document_id) in enumerate(read_boundaries(boundary_file)):
        trees, start = [], None
        for name, index, tree in sentences:
            if start is None:
                start = (name, index)
            trees.append(tree)
            if len(trees) == count:
                break
        if len(trees) < count:
            raise ValueError(
                f"boundary file {boundary_file}, line {line}: document {document} needs {count} sentences but only "
                f"{len(trees)} remain in {describe_files(names)} ({used + len(trees)} sentences in all)"
            )
        used += count
        yield _document(trees, document_id or f"{boundary_name}:{document}", *start)
    left = sum(1 for _ in sentences)
    if left:
        raise ValueError(
            f"boundary file {boundary_file} covers {used} sentences but {describe_files(names)} hold {used + left}: "
            f"{left} sentence(s) belong to no document"
        )


def generate_documents(files, names, stamps, split, normalize_options, boundary_file=None, boundary_stamp=None):
    """Document-level examples of one split (stamps only key datasets' cache)."""
    del stamps, boundary_stamp
    if boundary_file is None:
        documents = _documents_by_blank_lines(files, names, normalize_options)
    else:
        documents = _documents_by_boundaries(files, names, boundary_file, normalize_options)
    yield from require_examples(documents, f"split {split!r} ({describe_files(names)})")


def _boundary_files(boundaries, splits):
    """{split: boundary file} for every loaded split."""
    if isinstance(boundaries, Mapping):
        found = {str(split): file for split, file in boundaries.items()}
    else:
        path = require_path(boundaries, "boundary path")
        if path.is_file():
            if len(splits) != 1:
                raise ValueError(
                    f"one boundary file {str(path)!r} for {len(splits)} splits {sorted(splits)}: pass a mapping "
                    "{split: boundary file} or a folder of boundary files named after their splits"
                )
            found = {next(iter(splits)): path}
        else:
            found = {}
            for split, files in find_split_files(path, "boundary").items():
                if len(files) > 1:
                    raise ValueError(f"split {split!r} has several boundary files "
                                     f"({', '.join(str(file) for file in files)}); expected one")
                found[split] = files[0]
    missing = sorted(set(splits) - set(found))
    extra = sorted(set(found) - set(splits))
    if missing or extra:
        raise ValueError(
            f"boundary files are given for splits {sorted(found)} but the tree files are for {sorted(splits)}"
            + (f": missing {missing}" if missing else "") + (f": no tree files for {extra}" if extra else "")
        )
    for split, file in found.items():
        if not Path(file).is_file():
            raise ValueError(f"split {split!r}: boundary file {str(file)!r} does not exist or is not a file")
    return found


def load_bllip(path, document_level=False, boundaries=None, cache_dir=None, num_proc=None, **normalize_options):
    """Load BLLIP-LG trees (one per line) as a DatasetDict, by sentence or by document (module docstring).

    Args:
        path: a folder of split files or a mapping {split: file(s)}.
        document_level: one example per document instead of per tree.
        boundaries: document-boundary file(s) (document level only); without them, blank lines separate
            documents.
        cache_dir: datasets' cache folder (default: datasets' own).
        num_proc: processes reading sentence-level files (ptb.tree_dataset_dict cuts large files into byte
            ranges; the result does not depend on it); documents, whose trees span lines, are read by one.
        normalize_options: options of `hf_slm.tokenization.trees.normalize_tree`.
    """
    normalize_options = check_normalize_options(normalize_options)
    split_files = find_split_files(path, "BLLIP tree")
    root = None if isinstance(path, Mapping) or Path(path).is_file() else Path(path)
    if not document_level:
        if boundaries is not None:
            raise ValueError("boundaries mark documents: they need document_level=True")
        return tree_dataset_dict(split_files, normalize_options, cache_dir, root=root, num_proc=num_proc)
    boundary_files = _boundary_files(boundaries, split_files) if boundaries is not None else {}
    split_kwargs = {}
    for split, files in split_files.items():
        kwargs = {"files": [str(file) for file in files], "names": _split_names(files, root),
                  "stamps": file_stamps(files), "split": split, "normalize_options": normalize_options}
        if split in boundary_files:
            kwargs["boundary_file"] = str(boundary_files[split])
            kwargs["boundary_stamp"] = file_stamps([boundary_files[split]])[0]
        split_kwargs[split] = kwargs
    return build_dataset_dict(generate_documents, split_kwargs, DOCUMENT_FEATURES, cache_dir)
