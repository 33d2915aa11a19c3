"""CoNLL-U dependency treebanks (Universal Dependencies) as a DatasetDict, read with the `conllu` package.

Files: a folder of `.conllu` files whose names name their splits (UD's `<lang>_<treebank>-ud-train.conllu`,
`-dev`, `-test`; see split_files.py), one such file, or a mapping {split: file(s)}. Files are streamed
sentence by sentence (conllu.parse_incr).

One example per sentence, with columns
- `words`: the forms of the syntactic words, i.e. the lines with an integer ID. Multiword-token lines
  (ID `3-4`, the surface token `can't` whose words are `ca` and `n't`) and empty nodes of enhanced
  dependencies (ID `5.1`) are skipped, so word i of the list has ID i + 1, which is what HEAD refers to;
- `heads` (int; 0 is the root), `deprels`, `upos`: one per word;
- `sent_id` and `text` from the sentence's comments (None when a sentence has none);
- `file` and `index` (the sentence's position in its file, from 0), to trace an example back;
- `lifted_arcs`: how many arcs `non_projective="lift"` lifted to make the tree projective (0 otherwise).

Dependency Transformer Grammars read projective trees only. `load_conllu(..., non_projective=...)` says what
to do with the others: "keep" them (the default: a words-only model does not look at the heads), "error"
(naming the file, the sentence and two crossing arcs), "skip" them (one warning per split says how many), or
"lift" them (tokenization/dependency_trees.lift_to_projective; `lifted_arcs` counts the lifted arcs).

Every token line must have the 10 tab-separated fields of CoNLL-U (CoNLL-U Plus column sets are not
read), word IDs must run 1, 2, 3, ..., every word needs an integer HEAD, and the heads must make one tree
(HEAD 0 or a word of the sentence, no self-loop, exactly one root, no cycle); anything else is an error
naming the file and line.
"""

import warnings
from collections.abc import Mapping
from pathlib import Path

import conllu
from conllu.exceptions import ParseException
from datasets import DatasetDict, Features, List, Value

from .numbering import sentence_name
from .text_files import open_text
from ..tokenization.dependency_trees import DependencyTree, check_heads, is_projective, projective_tree
from ..tokenization.trees import check_word_separators
from .split_files import (
    build_dataset_dict, describe_files, file_stamps, find_split_files, require_examples,
)

CONLLU_FIELDS = 10
CONLLU_FEATURES = Features({
    "words": List(Value("string")),
    "heads": List(Value("int64")),
    "deprels": List(Value("string")),
    "upos": List(Value("string")),
    "sent_id": Value("string"),
    "text": Value("string"),
    "file": Value("string"),
    "index": Value("int64"),
    "lifted_arcs": Value("int64"),
})
NON_PROJECTIVE_OPTIONS = ("keep", "error", "skip", "lift")


class _CheckedLines:
    """The lines of an open CoNLL-U file for conllu.parse_incr, checking each token line's field count and
    remembering where the current sentence began (conllu's own errors carry no line numbers)."""

    def __init__(self, handle, path):
        self.handle, self.path = handle, path
        self.line = 0
        self.sentence_start = None

    def read(self, *args):  # parse_incr only checks that this exists
        return self.handle.read(*args)

    def __iter__(self):
        in_sentence = False
        for text in self.handle:
            self.line += 1
            if not text.strip():
                in_sentence = False
            else:
                if not in_sentence:
                    self.sentence_start, in_sentence = self.line, True
                if not text.startswith("#"):
                    # a token line's words are separated as every reader's are (no U+00A0 inside a FORM)
                    check_word_separators(text.rstrip("\r\n"), f"CoNLL-U file {self.path}, line {self.line}")
                    fields = text.rstrip("\r\n").split("\t")
                    if len(fields) != CONLLU_FIELDS:
                        raise ValueError(
                            f"CoNLL-U file {self.path}, line {self.line}: {len(fields)} tab-separated field(s), "
                            f"expected {CONLLU_FIELDS} (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)"
                        )
            yield text


def is_conllu_file(path, what="file"):
    """Whether `path` is a CoNLL-U file: a .conllu / .conll name, or a first non-blank line that is a `#` comment or
    has tabs (plain sentences, trees and inline dependency trees have neither). `what` names the file in errors."""
    path = Path(path)
    if path.suffix.lower() in (".conllu", ".conll"):
        return True
    with open_text(path, what) as handle:
        for line in handle:
            if line.strip():
                return line.startswith("#") or "\t" in line
    return False


def _sentence_example(sentence, where, file, index, heads=True):
    words = [token for token in sentence if isinstance(token["id"], int)]
    for position, token in enumerate(words, start=1):
        if token["id"] != position:
            raise ValueError(f"{where}: word IDs must run 1, 2, 3, ...; found {token['id']} at position {position}")
        if heads and not isinstance(token["head"], int):
            raise ValueError(
                f"{where}: word {position} ({token['form']!r}) has HEAD {token['head']!r}; expected an integer"
            )
    if not words:
        raise ValueError(f"{where}: a sentence without words (only multiword tokens or empty nodes)")
    if heads:
        check_heads([token["form"] for token in words], [token["head"] for token in words], where)
    return {
        "words": [token["form"] for token in words],
        "heads": [token["head"] for token in words],
        "deprels": [token["deprel"] for token in words],
        "upos": [token["upos"] for token in words],
        "sent_id": sentence.metadata.get("sent_id"),
        "text": sentence.metadata.get("text"),
        "file": file,
        "index": index,
        "lifted_arcs": 0,
    }


def read_conllu_file(path, name, heads=True):
    """Yield the examples of one CoNLL-U file; `name` is what the `file` column shows. With heads=False the HEAD
    column is not read into a tree (a file of sentences: `heads` holds what the column says, `_` as None)."""
    with open_text(path, "CoNLL-U file") as handle:
        lines = _CheckedLines(handle, path)
        sentences = conllu.parse_incr(lines)
        index = 0
        while True:
            try:
                sentence = next(sentences)
            except StopIteration:
                return
            except ParseException as error:
                raise ValueError(
                    f"CoNLL-U file {path}, sentence starting on line {lines.sentence_start}: {error}"
                ) from None
            yield _sentence_example(sentence, f"CoNLL-U file {path}, sentence starting on line {lines.sentence_start}",
                                    name, index, heads)
            index += 1


def _projective(example, non_projective):
    """The example with projective heads as `non_projective` says (module docstring), or None to leave it out."""
    tree = DependencyTree(example["words"], example["heads"])
    where = f"CoNLL-U file {example['file']}, {sentence_name(example['index'])}" + (
        f" ({example['sent_id']})" if example["sent_id"] else "")
    projective, lifts = projective_tree(tree, non_projective, where=where)
    if projective is None:
        return None
    return {**example, "heads": list(projective.heads), "lifted_arcs": lifts}


def generate_conllu_examples(files, names, stamps, split):
    """Examples of one split, every tree as read (stamps only key datasets' cache); the projectivity policy is
    applied to the Dataset afterwards (`_apply_non_projective`), so that what it leaves out is counted and said on
    every run, datasets' cache hits included."""
    del stamps

    def examples():
        for file, name in zip(files, names):
            yield from read_conllu_file(file, name)

    yield from require_examples(examples(), f"split {split!r} ({describe_files(names)})")


def _apply_non_projective(split, dataset, non_projective):
    """`dataset` (one split) under the policy: "error" raises naming the first non-projective tree, "skip" leaves
    them out with one warning that counts them (and an error when none is left), "lift" lifts them."""
    if non_projective == "keep":
        return dataset
    crossing = [index for index, heads in enumerate(dataset["heads"]) if not is_projective(heads)]
    if not crossing:
        return dataset
    if non_projective == "error":
        _projective(dataset[crossing[0]], "error")  # raises, naming the sentence and two crossing arcs
    if non_projective == "lift":
        return dataset.map(lambda example: _projective(example, "lift"), features=CONLLU_FEATURES)
    if len(crossing) == len(dataset):
        raise ValueError(f"split {split!r}: no examples left: all {len(dataset)} sentence(s) are non-projective and "
                         "non_projective='skip' (--non-projective skip) leaves them out")
    warnings.warn(f"split {split!r}: left out {len(crossing)} non-projective sentence(s) of {len(dataset)} "
                  "(non_projective='skip')", stacklevel=2)
    left_out = set(crossing)
    return dataset.select([index for index in range(len(dataset)) if index not in left_out])


def load_conllu(path, cache_dir=None, non_projective="keep"):
    """Load CoNLL-U files as a DatasetDict of `words`, `heads`, `deprels`, `upos`, `sent_id`, `text`, `file`,
    `index`, `lifted_arcs` (module docstring): multiword-token lines and empty nodes are skipped.

    Args:
        path: a folder of `*-ud-{train,dev,test}.conllu` files, one such file, or a mapping {split: file(s)}.
        cache_dir: datasets' cache folder (default: datasets' own).
        non_projective: "keep", "error", "skip" or "lift" (module docstring).
    """
    if non_projective not in NON_PROJECTIVE_OPTIONS:
        raise ValueError(f"non_projective must be one of {NON_PROJECTIVE_OPTIONS}, got {non_projective!r}")
    split_files = find_split_files(path, "CoNLL-U", suffixes=(".conllu",))
    root = Path(path) if not isinstance(path, Mapping) and Path(path).is_dir() else None
    split_kwargs = {}
    for split, files in split_files.items():
        names = [file.relative_to(root).as_posix() if root else str(file) for file in files]
        split_kwargs[split] = {"files": [str(file) for file in files], "names": names,
                               "stamps": file_stamps(files), "split": split}
    read = build_dataset_dict(generate_conllu_examples, split_kwargs, CONLLU_FEATURES, cache_dir)
    return DatasetDict({split: _apply_non_projective(split, dataset, non_projective)
                        for split, dataset in read.items()})
