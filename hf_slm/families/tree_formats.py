"""Tree formats: how the trees of a model are read, written and recognized, one object per format a Variant
names (`Variant.tree_format`).

- "brackets": labelled constituency trees, PTB brackets `(S (NP (DT the) (NN bird)) (VP sings))` or top-down
  actions `(S (NP the bird NP) S)` (tokenization/trees.py); nltk Trees in memory.
- "unlabelled_brackets": constituency trees without labels, `( ( Write ( an essay ) ) quickly )` (paper 003).
- "dependency": dependency trees, CoNLL-U files or one inline tree per line, `There/2 is/0 a/4 difference/2`
  (tokenization/dependency_trees.py).
- "words": no tree, the words (a tree given is read for its words).

Generic code (summarization, data preparation, training, mask inspection) asks the format of a model's
Variant, or the format that recognizes a string, instead of testing families. A format's behaviour is built
on the readers of tokenization/; this module imports them when a method runs, so that `hf-slm masks` stays
light (no transformers): only the unlabelled format's reading and writing need the compositional tokenizer's
module.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .registry import family_for_grammar, grammar_class, grammar_names, resolve

# The prompt of a summary (hf_slm/summarization/summaries.py) as a tree of each format: a constituent of its own.
BRACKETED_PROMPT = "(NP Summary :)"
# In inline WORD/HEAD: `:` depends on `Summary`, the root.
DEPENDENCY_PROMPT = "Summary/0 :/1"
_INLINE_ITEM = re.compile(r"^\S+/\d+$")


@dataclass(frozen=True)
class MaskExample:
    """The inputs `hf-slm masks` shows for one tree (hf_slm/cli/mask_inspection.py): the grammar over a vocabulary
    made for the tree, each id's token, the action ids, what the grammar's `sequence` / `batch` take beside
    them, how many trees the ids hold, and the fields a report adds (`report_fields(sequence)`)."""

    grammar: object
    tokens: list
    ids: list
    sequence_options: dict
    trees: int = 1
    report_fields: object = None

    def fields(self, sequence):
        return {} if self.report_fields is None else self.report_fields(sequence)


class ProposalBlock(NamedTuple):
    """The candidate trees of one sentence in a proposal file (`TreeFormat.proposal_blocks`).

    trees: the trees, as this format reads them (normalized as asked).
    locations: where each tree is, for messages (`FILE, line N`, or `FILE, analysis N (sent_id)` in CoNLL-U).
    sent_id: the sentence's `# sent_id` where the file gives one, else None.
    """

    trees: list
    locations: list
    sent_id: object = None


class TreeFormat:
    """The behaviour every format has (module docstring); a subclass per format.

    name: what a Variant's `tree_format` says.
    description: the format in words, for messages.
    kind: "constituency", "dependency" or "words": a parser's trees serve a model whose format is of the same
        kind (a labelled parser's trees are unlabelled for an unlabelled model).
    from_tree_files: bracketed tree files (tokenization/trees.read_trees) give its trees, so training reads
        them; otherwise its data is prepared by `hf-slm data prepare --loader <data_loader>`.
    data_loader: the loader of its own files (None: tree files).
    summary_prompt: the default prompt of a summary, as a tree of this format.
    proposal_description: what a proposal file of this format holds and how, for messages (`proposal_blocks`).
    mask_example: "module:function" building the inputs `hf-slm masks` shows (MaskExample).
    example_options: ((name, default), ...) the options its mask example takes (other formats refuse them).
    """

    name = None
    description = None
    kind = "constituency"
    from_tree_files = True
    data_loader = None
    summary_prompt = BRACKETED_PROMPT
    proposal_description = "one tree per line, the trees of each sentence a block, blocks separated by blank lines"
    mask_example = "hf_slm.families.mask_examples:bracketed_example"
    example_options = ()

    def recognizes(self, text):
        """Whether a string is a tree (or sentence) of this format."""
        raise NotImplementedError

    def read(self, text, where="tree"):
        """The tree of one string (errors name `where`)."""
        raise NotImplementedError

    def read_file(self, path):
        """The trees of a file, in order."""
        raise NotImplementedError

    def write(self, tree):
        """A tree as one line of this format."""
        raise NotImplementedError

    def read_proposal(self, text, where, normalization=None):
        """The tree of one line of a proposal file: with `normalization` (a tokenizer's options, possibly empty) as
        that tokenizer reads it, with None as written."""
        return self.read(text, where, **(normalization or {}))

    def proposal_blocks(self, path, limit=None, normalization=None):
        """Yield a ProposalBlock per sentence of a proposal file of this format (`proposal_description`), lazily, at most
        `limit` of them; each line read by `read_proposal`, comment lines (`# `: what drew the trees, each tree's
        log q, hf_slm/parsers/proposals.py) skipped. Errors name the file, the line and the layout expected.
        The evaluations that read proposals (perplexity, BLiMP, reranking) all read them here."""
        path = _proposal_file(path)
        if limit is not None and limit <= 0:
            return
        from ..data.text_files import open_text

        trees, locations, count = [], [], 0
        with open_text(path, "proposal file") as handle:
            for number, line in enumerate(handle, start=1):
                if is_comment(line):
                    continue
                if line.strip():
                    where = f"{path}, line {number}"
                    trees.append(self.read_proposal(line, where, normalization))
                    locations.append(where)
                    continue
                if trees:
                    yield ProposalBlock(trees, locations)
                    trees, locations, count = [], [], count + 1
                    if limit is not None and count >= limit:
                        return
        if trees:
            yield ProposalBlock(trees, locations)

    def encodable(self, tree):
        """What a tokenizer of this format encodes for a tree of it (`tokenizer(...)` takes a list of these)."""
        return tree

    def words(self, tree):
        """The words of a tree of this format (a string is read first)."""
        raise NotImplementedError

    def first_words(self, tree, count):
        """The tree of its first `count` words (what is cut lies after everything kept), as documents hold this
        format's trees (hf_slm/summarization/summaries.py): bracketed trees as nltk Trees, dependency trees as given (an
        inline string stays a string), words as a list. A ValueError when `tree` is not one of this format."""
        raise NotImplementedError

    def draw(self, tree):
        """Print a tree of this format (a string a model wrote) for a terminal, over several lines
        (`hf-slm parse --pretty`)."""
        raise NotImplementedError

    def __repr__(self):
        return f"<tree format {self.name}>"


class BracketedTrees(TreeFormat):
    name = "brackets"
    description = "bracketed trees"
    proposal_description = ("one bracketed tree per line, e.g. '(S (NP (DT The) (NN bird)) (VP (VBZ sings)))', the "
                            "trees of each sentence a block, blocks separated by blank lines")

    def recognizes(self, text):
        from ..tokenization.trees import input_format

        return isinstance(text, str) and input_format(text) != "words"

    def read(self, text, where="tree", tree_format="auto", **normalize_options):
        from ..tokenization.trees import read_tree_string

        return read_tree_string(text, where, tree_format, **normalize_options)

    def read_file(self, path, **normalize_options):
        from ..tokenization.trees import read_trees

        return read_trees(path, **normalize_options)

    def write(self, tree):
        from ..tokenization.trees import tree_to_string

        return tree_to_string(tree)

    def read_proposal(self, text, where, normalization=None):
        """One PTB tree per line (POS tags allowed), normalized with `normalization` when given (the tokenizer's
        options, as the tokenizer normalizes bracketed input); a reranker keeps the tree as written for EVALB."""
        from ..tokenization.trees import normalize_tree, parse_trees

        try:
            trees = parse_trees(text, source="proposal")
        except ValueError as error:
            message = str(error)
            message = message.removeprefix("proposal, tree 0, line 1: ")
            raise ValueError(f"{where}: {message} (expected {self.proposal_description})") from None
        if len(trees) != 1:
            raise ValueError(f"{where}: {len(trees)} trees on one line; expected one tree per line "
                             f"({self.proposal_description})")
        if normalization is None:
            return trees[0]
        try:
            return normalize_tree(trees[0], **normalization)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from error

    def words(self, tree):
        return list((self.read(tree) if isinstance(tree, str) else tree).leaves())

    def draw(self, tree):
        """nltk's drawing of the tree, its labels over its words (`drawing`)."""
        from ..tokenization.trees import parse_tree

        print(drawing(parse_tree(tree) if isinstance(tree, str) else tree))

    def first_words(self, tree, count):
        """An nltk Tree, or a string: PTB brackets taken as written (not normalized), or actions."""
        from ..tokenization.tree_type import Tree
        from ..tokenization.trees import input_format, parse_tree

        if isinstance(tree, str):
            tree = parse_tree(tree) if input_format(tree) == "ptb" else self.read(tree)
        remaining = [count]

        def cut(node):
            children = []
            for child in node:
                if remaining[0] <= 0:
                    break
                if isinstance(child, Tree):
                    kept = cut(child)
                    if kept is not None:
                        children.append(kept)
                else:
                    children.append(child)
                    remaining[0] -= 1
            return Tree(node.label(), children) if children else None

        return cut(tree)


class UnlabelledTrees(BracketedTrees):
    """Unlabelled brackets, each `(` and `)` a token of its own; labelled trees are unlabelled."""

    name = "unlabelled_brackets"
    description = "unlabelled bracketed trees"
    proposal_description = ("one tree per line, unlabelled '( ( The bird ) sings )' or labelled PTB brackets "
                            "'(S (NP The bird) (VP sings))' (its labels left out), the trees of each sentence a "
                            "block, blocks separated by blank lines")
    mask_example = "hf_slm.families.mask_examples:unlabelled_example"

    def recognizes(self, text):
        return isinstance(text, str) and "(" in text.split()

    def read(self, text, where="tree", **_):
        from ..tokenization.tokenization_compositional import parse_unlabeled

        return parse_unlabeled(text, where)

    def read_file(self, path, **_):
        return [self.read(line, f"{path}, line {number}") for number, line in _lines(path)]

    def write(self, tree):
        from ..tokenization.tokenization_compositional import unlabeled_string

        return unlabeled_string(tree)

    def read_proposal(self, text, where, normalization=None):
        """An unlabelled tree `( ( The bird ) sings )`, or a labelled one (PTB brackets, POS tags allowed, or labelled
        actions) unlabelled as the tokenizer's `unlabel` does: normalized with `normalization`, labels left out."""
        from ..tokenization.trees import read_tree_string

        try:
            if self.recognizes(text):
                return self.read(text, where)
            labelled = read_tree_string(text, where, **(normalization or {}))
        except ValueError as error:
            raise ValueError(f"{error} (expected {self.proposal_description})") from None
        return self.read(self.write(labelled), where)

    def encodable(self, tree):
        """The unlabelled string (a checkpoint's tokenizer, loaded as its own code, has its own tree class)."""
        return self.write(tree)

    def draw(self, tree):
        print(drawing(self.read(tree) if isinstance(tree, str) else tree))


class DependencyTrees(TreeFormat):
    """Dependency trees: DependencyTree objects, inline `word/head` strings, CoNLL-U files."""

    name = "dependency"
    description = "dependency trees"
    kind = "dependency"
    from_tree_files = False
    data_loader = "conllu"
    summary_prompt = DEPENDENCY_PROMPT
    proposal_description = ("CoNLL-U (several analyses of each sentence, consecutive, grouped by '# sent_id' or, "
                            "without it, by their words) or one inline tree per line, e.g. 'There/2 is/0 a/4 "
                            "difference/2', the trees of each sentence a block, blocks separated by blank lines")
    mask_example = "hf_slm.families.mask_examples:dependency_example"
    # the grammar's variant (paper, or the authors' released code); words written as pieces joined by "|"
    example_options = (("variant", "paper"), ("pieces", False))

    def recognizes(self, text):
        items = text.split() if isinstance(text, str) else ()
        return bool(items) and all(_INLINE_ITEM.match(item) for item in items)

    def read(self, text, where="tree", **_):
        from ..tokenization.dependency_trees import DependencyTree

        if isinstance(text, DependencyTree):
            return text
        if isinstance(text, dict):  # what `encodable` gives
            return DependencyTree(list(text["words"]), list(text["heads"]))
        return DependencyTree.from_inline(text, where=where)

    def read_file(self, path, **_):
        """A CoNLL-U file (.conllu / .conll, or lines with tabs) or one inline tree per line."""
        from ..data.conllu_loader import is_conllu_file, read_conllu_file
        from ..tokenization.dependency_trees import DependencyTree

        path = Path(path)
        if is_conllu_file(path):
            return [DependencyTree(example["words"], example["heads"]) for example in read_conllu_file(path, path.name)]
        return [self.read(line, f"{path}, line {number}") for number, line in _lines(path)]

    def write(self, tree):
        return self.read(tree).to_inline()

    def read_proposal(self, text, where, normalization=None):
        try:
            return self.read(text, where)
        except ValueError as error:
            raise ValueError(f"{error} (expected {self.proposal_description})") from None

    def proposal_blocks(self, path, limit=None, normalization=None):
        """CoNLL-U (a .conllu / .conll name, or a first line that is a `#` comment or has tabs): a sentence's block
        is a run of consecutive analyses with the same `# sent_id`, or without sent_ids the same words. Otherwise
        inline trees in blank-line separated blocks (TreeFormat.proposal_blocks)."""
        from ..data.conllu_loader import is_conllu_file

        path = _proposal_file(path)
        if not is_conllu_file(path, "proposal file"):
            yield from super().proposal_blocks(path, limit, normalization)
            return
        if limit is not None and limit <= 0:
            return
        from ..data.conllu_loader import read_conllu_file
        from ..tokenization.dependency_trees import DependencyTree

        def analyses():  # a reading error says what a proposal file holds (a file without heads, e.g.)
            examples = read_conllu_file(path, str(path))
            while True:
                try:
                    yield next(examples)
                except StopIteration:
                    return
                except ValueError as error:
                    raise ValueError(f"{error} (expected a proposal file of {self.proposal_description})") from None

        trees, locations, key, sent_id, count = [], [], None, None, 0
        for number, example in enumerate(analyses(), start=1):
            this = example["sent_id"] if example["sent_id"] is not None else tuple(example["words"])
            if trees and this != key:
                yield ProposalBlock(trees, locations, sent_id)
                trees, locations, count = [], [], count + 1
                if limit is not None and count >= limit:
                    return
            key, sent_id = this, example["sent_id"]
            trees.append(DependencyTree(example["words"], example["heads"]))
            locations.append(f"{path}, analysis {number}" + (f" ({sent_id})" if sent_id else ""))
        if trees:
            yield ProposalBlock(trees, locations, sent_id)

    def encodable(self, tree):
        """A mapping {"words", "heads"} (a checkpoint's tokenizer, loaded as its own code, has its own DependencyTree
        class; and an inline string of a word with a bracket, `(/2 ...`, would read as PTB brackets)."""
        tree = self.read(tree)
        return {"words": list(tree.words), "heads": list(tree.heads)}

    def words(self, tree):
        return list(self.read(tree).words)

    def draw(self, tree):
        """A table: each word's position, the word, its head's position and the head word."""
        tree = self.read(tree)
        width = max(len(word) for word in tree.words)
        for position, (word, head) in enumerate(zip(tree.words, tree.heads), start=1):
            print(f"{position:>3}  {word:<{width}}  {head:>3}  {'(root)' if head == 0 else tree.words[head - 1]}")
        print()

    def first_words(self, tree, count):
        """Each kept word takes as its head its nearest kept ancestor; of those whose every ancestor was cut, the
        first is the root and the others its dependents. A projective tree stays projective."""
        from ..tokenization.dependency_trees import DependencyTree

        given, tree = tree, self.read(tree)
        heads = list(tree.heads)

        def kept_ancestor(word):  # 1-based word -> its nearest kept ancestor, 0 where none
            head = heads[word - 1]
            while head > count:
                head = heads[head - 1]
            return head

        new_heads = [kept_ancestor(word) for word in range(1, count + 1)]
        roots = [word for word, head in enumerate(new_heads, start=1) if head == 0]
        new_heads = [roots[0] if head == 0 and word != roots[0] else head
                     for word, head in enumerate(new_heads, start=1)]
        cut = DependencyTree(list(tree.words[:count]), new_heads)
        return cut.to_inline() if isinstance(given, str) else cut


class WordSequences(TreeFormat):
    """Words only: a model that reads none of a tree but its words (trees given are read for their words)."""

    name = "words"
    description = "words"
    kind = "words"
    proposal_description = "no trees: a model of words scores its words exactly"
    mask_example = "hf_slm.families.mask_examples:words_example"

    def recognizes(self, text):
        from ..tokenization.trees import input_format

        return isinstance(text, str) and bool(text.split()) and input_format(text) == "words"

    def read(self, text, where="sentence", **_):
        from ..tokenization.trees import read_words

        return read_words(text, where)

    def read_file(self, path, **_):
        return [self.read(line, f"{path}, line {number}") for number, line in _lines(path)]

    def write(self, tree):
        return " ".join(self.words(tree))

    def proposal_blocks(self, path, limit=None, normalization=None):
        raise ValueError(f"proposal file {path}: a model of words reads no trees, so it has no proposal trees to "
                         "score; its p(x) is exact without them")

    def words(self, tree):
        from ..tokenization.tree_type import Tree

        if isinstance(tree, str):
            return self.read(tree) if self.recognizes(tree) else BRACKETED.words(tree)
        return list(tree.leaves()) if isinstance(tree, Tree) else list(tree)

    def first_words(self, tree, count):
        return self.words(tree)[:count]

    def draw(self, tree):
        """The words on one line; a bracketed tree (a model of words with a parser of its own writes one) drawn as
        the bracketed format draws it."""
        if isinstance(tree, str) and not self.recognizes(tree):
            BRACKETED.draw(tree)
            return
        print(" ".join(self.words(tree)))


def drawing(tree):
    """nltk's text drawing of a tree, its words in order. Given words as leaves, nltk's printer places a word that
    stands beside constituents (`(VP are (ADJP happy))`) out of order; given each leaf's index and the words, it
    places them by index."""
    from nltk.tree import TreePrettyPrinter

    indexed = tree.copy(deep=True)
    for index, position in enumerate(indexed.treepositions("leaves")):
        indexed[position] = index
    return TreePrettyPrinter(indexed, tree.leaves()).text()


def is_comment(line):
    """A comment line of a proposal file: `#` alone or followed by a space (an inline dependency tree may start with
    the word `#`, as `#/2`, never with `# `)."""
    stripped = line.strip()
    return stripped == "#" or stripped.startswith("# ")


def _proposal_file(path):
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"proposal file {str(path)!r} {'is a directory' if path.is_dir() else 'does not exist'}")
    return path


def _lines(path):
    """(line number, line) of the non-empty lines of a text file."""
    text = Path(path).read_text(encoding="utf-8")
    return [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


BRACKETED = BracketedTrees()
TREE_FORMATS = {tree_format.name: tree_format
                for tree_format in (BRACKETED, UnlabelledTrees(), DependencyTrees(), WordSequences())}
# The order `recognizing` tries them in: a dependency tree is never bracketed, an unlabelled one would read as PTB,
# and anything without brackets reads as words.
RECOGNITION_ORDER = ["dependency", "unlabelled_brackets", "brackets", "words"]


def register_tree_format(tree_format):
    """Add a TreeFormat (a family of another package whose trees are none of these); `recognizing` tries it before
    the formats that take any bracketed string or any words. Its name must be new."""
    if not isinstance(tree_format, TreeFormat) or not tree_format.name:
        raise TypeError(f"register_tree_format takes a named TreeFormat, got {tree_format!r}")
    if tree_format.name in TREE_FORMATS:
        raise ValueError(f"a tree format named {tree_format.name!r} is already registered")
    TREE_FORMATS[tree_format.name] = tree_format
    RECOGNITION_ORDER.insert(RECOGNITION_ORDER.index("brackets"), tree_format.name)
    return tree_format


def tree_format(name):
    """The TreeFormat called `name` (a Variant's tree_format)."""
    if name not in TREE_FORMATS:
        raise ValueError(f"unknown tree format {name!r}; expected one of {list(TREE_FORMATS)}")
    return TREE_FORMATS[name]


def format_of_grammar(grammar):
    """The TreeFormat of the grammar called `grammar` (its Variant's)."""
    return tree_format(family_for_grammar(grammar).variant(grammar).tree_format)


def grammars_of_linearization(linearization):
    """The registered grammars that read sequences of `linearization` (what a tokenizer writes)."""
    return [name for name in grammar_names() if grammar_class(name).linearization == linearization]


def format_of_tokenizer(tokenizer):
    """The TreeFormat of the trees `tokenizer` encodes: that of the grammars reading its linearization."""
    readers = grammars_of_linearization(tokenizer.linearization)
    if not readers:
        raise ValueError(f"no registered grammar reads the tokenizer's linearization {tokenizer.linearization!r}")
    return format_of_grammar(readers[0])


def recognizing(text):
    """The TreeFormat that recognizes the string `text`, or None."""
    for name in RECOGNITION_ORDER:
        if TREE_FORMATS[name].recognizes(text):
            return TREE_FORMATS[name]
    return None


def build_mask_example(grammar, text, tree_format="auto", several=False, **options):
    """The MaskExample of `text` under the grammar called `grammar`, by its format's `mask_example`.

    `options` are the format's example options and tree normalization options. Another format's example option
    (the command line passes every one) is refused unless it has that format's default value.
    """
    own = format_of_grammar(grammar)
    for other in TREE_FORMATS.values():
        defaults = dict(other.example_options)
        if other is own or not defaults:
            continue
        if any(name in options and options[name] != default for name, default in defaults.items()):
            names = " and ".join(f"--{name}" for name in defaults)
            readers = [name for name in grammar_names() if format_of_grammar(name) is other]
            raise ValueError(f"{names} are options of the {other.name} grammars ({', '.join(readers)}), not of "
                             f"{grammar}")
        for name in defaults:
            if name not in dict(own.example_options):
                options.pop(name, None)
    return resolve(own.mask_example)(text, grammar, tree_format, several=several, **options)


__all__ = [
    "BRACKETED_PROMPT",
    "DEPENDENCY_PROMPT",
    "TREE_FORMATS",
    "MaskExample",
    "ProposalBlock",
    "TreeFormat",
    "build_mask_example",
    "format_of_grammar",
    "format_of_tokenizer",
    "grammars_of_linearization",
    "recognizing",
    "register_tree_format",
    "tree_format",
]
