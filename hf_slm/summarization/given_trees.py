"""Silver trees a user gives: a file of their own parses instead of an hf-slm parser model.

Paper 003 (section 3) parses its data with Supar's CRF constituency parser, a model outside this library. A user who
has such parses gives them as a file of bracketed trees, one per sentence (PTB brackets, POS tags or not, a ROOT/TOP
wrapper or not: they are read as training trees are, `tokenization/trees.read_trees`), in any order: each sentence of
the documents and summaries (split into sentences and PTB-style words as the parser would get them,
hf_slm/data/sentence_splitting.py) takes the tree whose words are its words. A sentence that no tree's words match is
an error that counts such sentences and names the first with its words; the file may hold more trees than the
sentences need (several splits' in one file). Two trees with the same words are one too many: an error naming both.
"""

import hashlib
from pathlib import Path

from ..search.beam import SentenceResults
from ..tokenization.trees import read_trees
from .silver import _documents, document_sentences

SENTENCES_SHOWN = 3  # the sentences without a tree an error message names


class GivenTrees:
    """The trees of a file, by their words (module docstring). `path`: the file; `fingerprint`: the sha256 of its
    bytes (what a prepared split depends on)."""

    kind = "constituency"  # the kind of tree format its trees are (a constituency tokenizer encodes them)

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"silver trees {str(self.path)!r}: no such file; expected a file of bracketed trees, one "
                             "per sentence")
        self.fingerprint = hashlib.sha256(self.path.read_bytes()).hexdigest()
        trees = read_trees(self.path)
        if not trees:
            raise ValueError(f"silver trees {str(self.path)!r} holds no tree; expected bracketed trees, one per sentence")
        self.trees, where = {}, {}
        for number, tree in enumerate(trees, start=1):
            key = " ".join(tree.leaves())
            if key in self.trees and self.trees[key] != tree:
                raise ValueError(f"silver trees {str(self.path)!r}: trees {where[key]} and {number} have the same words "
                                 f"({key[:80]!r}) but differ; expected one tree per sentence")
            self.trees.setdefault(key, tree)
            where.setdefault(key, number)

    def __len__(self):
        return len(self.trees)

    def silver_trees(self, documents, line_breaks=True):
        """As silver.silver_trees, from the file: a SentenceResults of {"id", "words", "trees"} per document (`documents`:
        {id: text}, (id, text) pairs or dicts with "id" and "document"), nothing left out. A sentence without a tree
        is a ValueError (module docstring)."""
        results, missing, total = [], [], 0
        for document_id, text in _documents(documents):
            sentences = [words for words, _ in document_sentences(text, line_breaks)]
            total += len(sentences)
            for number, words in enumerate(sentences, start=1):
                if " ".join(words) not in self.trees:
                    missing.append(f"document {document_id}, sentence {number}: {' '.join(words)[:100]!r}")
            results.append({"id": document_id, "words": sentences,
                            "trees": [self.trees.get(" ".join(words)) for words in sentences]})
        if missing:
            shown = "; ".join(missing[:SENTENCES_SHOWN]) + (" ..." if len(missing) > SENTENCES_SHOWN else "")
            raise ValueError(
                f"silver trees {str(self.path)!r}: {len(missing)} of {total} sentences have no tree whose words are "
                f"theirs ({len(self)} distinct trees in the file): {shown}. Expected a tree for every sentence, its "
                "leaves the sentence's words as hf-slm splits them (hf_slm/data/sentence_splitting.py: PTB-style words, "
                "e.g. -LRB- for '(')")
        return SentenceResults(results, [])
