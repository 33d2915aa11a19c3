"""A proposal parser's training data: treebank trees or CoNLL-U files in, padded batches out.

- Constituency parsers read bracketed tree files (one tree or many per file; a folder means its .mrg files, else all
  its files), each tree normalized by the parser's tokenizer (tokenization/tokenization_parser.py: traces, function
  tags and a wrapper root as its options say; POS tags taken off and predicted beside the tree).
- Dependency parsers read CoNLL-U files (FORM, HEAD, DEPREL). The projective CRF draws projective trees only, so a
  non-projective training tree is lifted (Nivre and Nilsson's pseudo-projective lifting, as `hf-slm data prepare
  --non-projective lift` does), and the count is said.

An evaluation tree whose label (or tag, or relation) the training trees never had cannot be scored by the parser;
it is left out of the evaluation loss and counted (`encode_examples`' `left_out`), never silently.
"""

from pathlib import Path

import torch
from datasets import Dataset

from ..data.conllu_loader import is_conllu_file, read_conllu_file
from ..tokenization.dependency_trees import DependencyTree, projective_tree
from ..tokenization.tokenization_parser import CHAR_PAD, PAD_ID
from ..tokenization.trees import read_tree_file

IGNORE_INDEX = -100


def _files(path, suffixes):
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        return [p for p in files if p.suffix in suffixes] or files
    if not path.is_file():
        raise ValueError(f"training data {str(path)!r} does not exist")
    return [path]


def read_constituency_examples(paths):
    """[(tree as written, "FILE, tree K")] of bracketed tree files (not normalized: the tokenizer does that)."""
    examples = []
    for path in paths:
        for file in _files(path, (".mrg",)):
            raw = read_tree_file(file, strip_traces=False, preterminals=False, drop_root=False)
            examples.extend((tree, f"{file}, tree {index + 1}") for index, tree in enumerate(raw))
    return examples


def read_dependency_examples(paths, log=print):
    """[({"words", "heads", "relations"}, "FILE, sentence K")] of CoNLL-U files, non-projective trees lifted."""
    examples, lifted = [], 0
    for path in paths:
        for file in _files(path, (".conllu", ".conll")):
            if not is_conllu_file(file, "training data"):
                raise ValueError(f"{file}: not CoNLL-U; a dependency parser trains on CoNLL-U files (FORM, HEAD, "
                                 "DEPREL columns)")
            for example in read_conllu_file(file, str(file)):
                where = f"{file}, sentence {example['index'] + 1}"
                tree, lifts = projective_tree(DependencyTree(example["words"], example["heads"]), "lift", where=where)
                lifted += lifts > 0
                examples.append(({"words": example["words"], "heads": list(tree.heads),
                                  "relations": list(example["deprels"])}, where))
    if lifted:
        log(f"{lifted} non-projective training tree(s) of {len(examples)} lifted to projective ones (the parser's CRF "
            "draws projective trees)")
    return examples


def read_examples(kind, paths, log=print):
    """The (example, location) pairs of a parser kind's training files."""
    if kind.tree_kind == "dependency":
        return read_dependency_examples(paths, log)
    return read_constituency_examples(paths)


def encode_examples(tokenizer, examples, skip_unknown=False):
    """(a datasets.Dataset of the tokenizer's targets, [(location, why)] of the examples left out). With
    skip_unknown an example the tokenizer cannot encode (a label it never saw) is left out; otherwise it raises."""
    rows, left_out = [], []
    for example, where in examples:
        try:
            rows.append(tokenizer.encode_target(example, where))
        except ValueError as error:
            if not skip_unknown:
                raise
            left_out.append((where, str(error)))
    if not rows:
        raise ValueError("no example could be encoded: " + "; ".join(why for _, why in left_out[:3]))
    columns = {key: [row.get(key) for row in rows] for key in rows[0]}
    return Dataset.from_dict(columns), left_out


class ParserCollator:
    """Pads a batch of `encode_target` rows: input_ids, attention_mask and char_ids (right-padded; a pretrained
    encoder's piece_ids, piece_attention_mask and word_piece_spans too), and the targets
    the parser's forward reads: span_labels [B, T-1, T-1] (label id per gold span, -1 elsewhere) and tags [B, T]
    (-100 where none) for a constituency parser; heads and relations [B, T-2] (-1 / -100 padding) for a dependency
    parser."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, rows):
        width = max(len(row["input_ids"]) for row in rows)
        batch = {
            "input_ids": torch.full((len(rows), width), PAD_ID, dtype=torch.long),
            "attention_mask": torch.zeros(len(rows), width, dtype=torch.long),
            "char_ids": torch.full((len(rows), width, self.tokenizer.max_word_length), CHAR_PAD, dtype=torch.long),
        }
        for index, row in enumerate(rows):
            length = len(row["input_ids"])
            batch["input_ids"][index, :length] = torch.as_tensor(row["input_ids"])
            batch["attention_mask"][index, :length] = 1
            batch["char_ids"][index, :length] = torch.as_tensor(row["char_ids"])
        if "piece_ids" in rows[0]:  # a pretrained encoder's pieces
            pieces = max(len(row["piece_ids"]) for row in rows)
            batch["piece_ids"] = torch.zeros(len(rows), pieces, dtype=torch.long)
            batch["piece_attention_mask"] = torch.zeros(len(rows), pieces, dtype=torch.long)
            batch["word_piece_spans"] = torch.zeros(len(rows), width, 2, dtype=torch.long)
            for index, row in enumerate(rows):
                batch["piece_ids"][index, : len(row["piece_ids"])] = torch.as_tensor(row["piece_ids"])
                batch["piece_attention_mask"][index, : len(row["piece_ids"])] = 1
                batch["word_piece_spans"][index, : len(row["input_ids"])] = torch.as_tensor(row["word_piece_spans"])
        if "spans" in rows[0]:
            batch["span_labels"] = torch.full((len(rows), width - 1, width - 1), -1, dtype=torch.long)
            for index, row in enumerate(rows):
                spans = torch.as_tensor(row["spans"], dtype=torch.long)
                batch["span_labels"][index, spans[:, 0], spans[:, 1]] = spans[:, 2]
            if rows[0].get("tags") is not None:
                batch["tags"] = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
                for index, row in enumerate(rows):
                    batch["tags"][index, 1 : 1 + len(row["tags"])] = torch.as_tensor(row["tags"])
        if "heads" in rows[0]:
            batch["heads"] = torch.full((len(rows), width - 2), -1, dtype=torch.long)
            batch["relations"] = torch.full((len(rows), width - 2), IGNORE_INDEX, dtype=torch.long)
            for index, row in enumerate(rows):
                batch["heads"][index, : len(row["heads"])] = torch.as_tensor(row["heads"])
                batch["relations"][index, : len(row["relations"])] = torch.as_tensor(row["relations"])
        return batch
