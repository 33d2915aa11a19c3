"""Dependency trees: the one-tree rule, projectivity, pseudo-projective lifting and the inline form.

A sentence's dependency tree is its words and, for each word, its head: `heads[i]` is the 1-based position of
the head of word i + 1, or 0 for the root (the HEAD column of CoNLL-U). The generative transition systems of
paper 002 (transitions.py) build unlabeled projective trees with one root, so:

- `check_heads` is the one rule that heads make a tree: every head is 0 or a word of the sentence, no word is
  its own head, exactly one word has head 0, and every word reaches it (no cycle). The CoNLL-U loader and
  `DependencyTree` both call it.
- `crossing_arcs` finds two arcs that cross (the artificial root sits at position 0, before the first word,
  so an arc over the root word's arc counts too); a tree without them is projective.
- `lift_to_projective` is the pseudo-projective lifting of Nivre and Nilsson (2005): while an arc is
  non-projective (a word between its head and its dependent is not dominated by the head), the shortest such
  arc is lifted, i.e. the dependent is reattached to its head's head. It ends at the latest when every lifted
  word hangs from the root word, which dominates the whole sentence, so the tree keeps its single root.
- The inline form `There/2 is/0 a/4 difference/2` writes a tree on one line (the CLI's input): each word is
  followed by `/` and its head; a word may itself contain `/` (the last one separates the head).

This file is hub code: it is copied into checkpoints and must import nothing from hf_slm.
"""

import re
from dataclasses import dataclass

from .trees import check_word_separators

# What `non_projective` may ask for when a tree is not projective.
NON_PROJECTIVE_POLICIES = ("error", "skip", "lift")
INLINE_ITEM = re.compile(r"^\S+/\d+$")
CONLLU_COLUMNS = 10


def is_inline_tree(text):
    """Whether every whitespace-separated item of `text` is WORD/HEAD (an inline dependency tree)."""
    items = text.split()
    return bool(items) and all(INLINE_ITEM.match(item) for item in items)


def is_conllu_text(text):
    """Whether `text` holds a CoNLL-U word line: ten tab-separated fields, the first a word index."""
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == CONLLU_COLUMNS and fields[0].strip().isdigit():
            return True
    return False


def refuse_dependency_tree(text, where, expected):
    """Raise ValueError naming `where` and `expected` when `text` is a dependency tree (CoNLL-U lines, or an
    inline tree whose heads make a tree: `The/2 cat/3 sleeps/0`) given to a tokenizer that reads another format.
    A sentence whose words merely contain a slash and digits (`1/2`) is no tree, and passes."""
    found = None
    if is_conllu_text(text):
        found = "CoNLL-U lines"
    elif is_inline_tree(text):
        try:
            DependencyTree.from_inline(text, where)
            found = "an inline dependency tree (WORD/HEAD)"
        except ValueError:
            pass
    if found:
        shown = text.strip().replace("\n", " ")[:60]
        raise ValueError(f"{where} {shown!r} is {found}, a dependency tree; this tokenizer reads {expected} (a "
                         "dependency tree goes to a dependency model's tokenizer)")


def check_heads(words, heads, where="sentence"):
    """Raise ValueError naming `where` and the words involved unless `heads` make one tree over `words`."""
    count = len(words)
    if len(heads) != count:
        raise ValueError(f"{where}: {count} words but {len(heads)} heads; expected one head per word")
    if count == 0:
        raise ValueError(f"{where}: an empty sentence; expected at least one word")
    for position, (word, head) in enumerate(zip(words, heads), start=1):
        if isinstance(head, bool) or not isinstance(head, int):
            raise ValueError(f"{where}: word {position} ({word!r}) has head {head!r}; expected an integer")
        if not 0 <= head <= count:
            raise ValueError(f"{where}: word {position} ({word!r}) has head {head}; expected 0 (the root) or a word "
                             f"position from 1 to {count}")
        if head == position:
            raise ValueError(f"{where}: word {position} ({word!r}) is its own head")
    roots = [position for position, head in enumerate(heads, start=1) if head == 0]
    if len(roots) != 1:
        raise ValueError(f"{where}: {len(roots)} words have head 0 (positions {roots}); expected exactly one root")
    reaches_root = {0}
    for start in range(1, count + 1):
        path, node = [], start
        while node not in reaches_root:
            if node in path:
                cycle = path[path.index(node):]
                raise ValueError(f"{where}: the heads of words {cycle} form a cycle; expected a tree")
            path.append(node)
            node = heads[node - 1]
        reaches_root.update(path)


def _arcs(heads):
    """Every arc as (left end, right end, dependent), positions 0 (the root) to n."""
    return [(min(head, dependent), max(head, dependent), dependent)
            for dependent, head in enumerate(heads, start=1)]


def crossing_arcs(heads):
    """The first pair of crossing arcs, as ((head, dependent), (head, dependent)), or None if the tree is
    projective. Two arcs cross when exactly one end of one lies strictly inside the other."""
    arcs = sorted(_arcs(heads))
    for index, (left, right, dependent) in enumerate(arcs):
        for other_left, other_right, other_dependent in arcs[index + 1 :]:
            if other_left >= right:
                break  # sorted by left end: no later arc starts inside this one
            if left < other_left < right < other_right:
                return ((heads[dependent - 1], dependent), (heads[other_dependent - 1], other_dependent))
    return None


def is_projective(heads):
    return crossing_arcs(heads) is None


def _dominates(heads, ancestor, node):
    while node != 0:
        if node == ancestor:
            return True
        node = heads[node - 1]
    return ancestor == 0


def _non_projective_arcs(heads):
    """Arcs (head, dependent) that some word between their ends is not dominated by the head."""
    found = []
    for dependent, head in enumerate(heads, start=1):
        left, right = min(head, dependent), max(head, dependent)
        if any(not _dominates(heads, head, between) for between in range(left + 1, right)):
            found.append((head, dependent))
    return found


def lift_to_projective(heads):
    """(projective heads, number of lifts): the shortest non-projective arc is lifted (its dependent takes its
    head's head) until none is left (Nivre and Nilsson 2005; ties: the leftmost arc)."""
    heads = list(heads)
    lifts = 0
    while True:
        offending = _non_projective_arcs(heads)
        if not offending:
            return heads, lifts
        head, dependent = min(offending, key=lambda arc: (abs(arc[0] - arc[1]), min(arc)))
        heads[dependent - 1] = heads[head - 1]
        lifts += 1


@dataclass(frozen=True)
class DependencyTree:
    """An unlabeled dependency tree: `words` and 1-based `heads` (0 = the root), checked by `check_heads`."""

    words: tuple
    heads: tuple

    def __post_init__(self):
        object.__setattr__(self, "words", tuple(self.words))
        object.__setattr__(self, "heads", tuple(self.heads))
        for position, word in enumerate(self.words, start=1):
            if not isinstance(word, str) or not word or any(character.isspace() for character in word):
                raise ValueError(f"word {position} is {word!r}; expected a non-empty string without spaces")
        check_heads(self.words, self.heads)

    def __len__(self):
        return len(self.words)

    @classmethod
    def from_inline(cls, text, where="inline tree"):
        """A tree written `There/2 is/0 a/4 difference/2` (module docstring)."""
        words, heads = [], []
        text = check_word_separators(text, where)  # words are separated by ASCII spaces only (trees.py)
        for position, item in enumerate(text.split(), start=1):
            word, slash, head = item.rpartition("/")
            if not slash or not word or not head.isdigit():
                raise ValueError(f"{where}: item {position} {item!r} is not WORD/HEAD; expected e.g. 'is/0' (head 0 "
                                 "is the root, otherwise the 1-based position of the head word)")
            words.append(word)
            heads.append(int(head))
        check_heads(words, heads, where)
        return cls(words, heads)

    def to_inline(self):
        return " ".join(f"{word}/{head}" for word, head in zip(self.words, self.heads))

    def crossing_arcs(self):
        return crossing_arcs(self.heads)

    def is_projective(self):
        return is_projective(self.heads)

    def dependents(self, head):
        """Positions of the dependents of `head` (0: the root word), left to right."""
        return [dependent for dependent, parent in enumerate(self.heads, start=1) if parent == head]


def projective_tree(tree, non_projective="error", where="sentence"):
    """(tree, lifts): `tree` itself when projective; otherwise, as `non_projective` says, a ValueError naming
    `where` and a crossing pair ("error"), (None, 0) to leave it out ("skip"), or the lifted tree and the number
    of arcs lifted ("lift")."""
    if non_projective not in NON_PROJECTIVE_POLICIES:
        raise ValueError(f"non_projective must be one of {NON_PROJECTIVE_POLICIES}, got {non_projective!r}")
    crossing = tree.crossing_arcs()
    if crossing is None:
        return tree, 0
    if non_projective == "skip":
        return None, 0
    if non_projective == "lift":
        heads, lifts = lift_to_projective(tree.heads)
        return DependencyTree(tree.words, heads), lifts
    (head, dependent), (other_head, other_dependent) = crossing
    name = lambda position: "root" if position == 0 else f"{position} ({tree.words[position - 1]!r})"  # noqa: E731
    raise ValueError(f"{where} is not projective: the arc {name(head)} -> {name(dependent)} crosses the arc "
                     f"{name(other_head)} -> {name(other_dependent)}; the transition systems build projective trees "
                     "only (non_projective='skip' leaves such trees out, 'lift' lifts the crossing arcs)")
