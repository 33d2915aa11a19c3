"""Penn Treebank constituency trees -> unlabeled dependency trees, by head rules.

**This is a head-rule conversion in the style of Collins (1999, Appendix A) / Magerman (1995), written for this
library; it is not Stanford CoreNLP's Universal Dependencies conversion, which paper 001 used (Table 1), and
models trained on its trees give numbers that are not the paper's.** The two differ by design: head rules make
function words heads where UD makes content words heads. Here an auxiliary heads its verb phrase
("was" heads "was rejected"), a preposition heads its prepositional phrase ("on" heads "on the mat"), a
complementizer or wh-word heads its SBAR, the copula heads the clause; UD attaches all of these to the content word.
Coordination takes the first conjunct as head (as UD), with the conjunction and the later conjuncts depending on
it. Arcs carry no labels (DEPREL is `dep`, or `root`).

The conversion, for one tree:
1. `-NONE-` leaves (traces, empty elements) and the constituents they leave empty are removed; function tags and
   co-indices are stripped from the labels (`NP-SBJ-1` -> `NP`, `PP-LOC=2` -> `PP`); an unlabeled, ROOT or TOP
   wrapper is not a constituent of its own.
2. Bottom up, each constituent's head child is chosen by the rules of its label (`HEAD_RULES`; noun phrases by
   `_noun_phrase_head`), and its head word is the head word of that child. A POS preterminal's head word is its
   word; a word directly under a phrase (a tree without POS tags) is its own head with an unknown tag.
3. The head word of every other child depends on the constituent's head word; the head word of the whole tree is
   the root (HEAD 0). So every sentence has exactly one root and, since each constituent is a contiguous span
   whose words all hang (transitively) from its head word, the tree is projective.

The rules (`HEAD_RULES`): for a label, a direction and a priority list of child labels. The list is searched
category first: the first category of the list that some child has wins, and among children of that category the
first one met in the direction (`left`: from the first child, `right`: from the last). When no child matches, the
first child in the direction is the head. Punctuation children (`, . : `` '' -LRB- -RRB- HYPH NFP`) are never
heads unless a constituent has nothing else, which keeps e.g. `(FRAG (INTJ yes) (. !))` headed by "yes"
(Collins's rules treat punctuation separately in the same spirit). Noun phrases follow Collins's special rule: a
final possessive `POS` is the head; else the last noun-like child (NN, NNS, NNP, NNPS, NX, POS, JJR); else the first
NP; else the last of $, ADJP, PRN; else the last CD; else the last of JJ, JJS, RB, QP; else the last child. After any
rule, Collins's coordination adjustment applies: a head child right after a coordinating conjunction (`... X CC
head`) gives way to the child before the conjunction, the first conjunct. Labels with no rule (GUM's uncommon
ones, X) take their first non-punctuation child.

Use:
    `ptb_to_dependencies(tree)` -> `ConvertedSentence(words, heads, tags)` for an nltk Tree as read with
    `hf_slm.tokenization.trees.read_trees(path, **RAW_TREE_OPTIONS)` (POS tags and traces kept);
    `convert_tree_files(paths)` -> the sentences of .mrg / bracketed files; `conllu_lines(sentence)` and
    `write_conllu(sentences, path)` write CoNLL-U (10 columns: UPOS from the PTB tag, XPOS the tag itself).

    python -m hf_slm.data.dependency_conversion treebank/combined --output ptb-train.conllu
    hf-slm data prepare --loader conllu --grammar dtg --path ptb-train.conllu --vocab-size 2000 \
        --output prepared/ptb-dtg      # DTG (paper 002) on the converted trees
    hf-slm train --preset esom-tiny --train treebank/combined --convert-to-dependencies --output runs/som
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..runs.user_files import check_replaceable
from ..tokenization.trees import read_trees, remove_traces, strip_function_tag
from ..tokenization.tree_type import Tree

# How tree files are read for the conversion: nothing removed yet (the conversion needs the POS tags; it strips the
# traces and function tags itself).
RAW_TREE_OPTIONS = dict(strip_traces=False, strip_function_tags=False, preterminals=False, drop_root=False)

PUNCTUATION_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP"})
WRAPPER_LABELS = frozenset({"", "ROOT", "TOP"})

# label: (direction, priority list). Collins (1999), Appendix A, as this library reads it; PP is searched from the
# left (its preposition is its first word: "because of" is headed by "because").
HEAD_RULES = {
    "ADJP": ("left", ("NNS", "QP", "NN", "$", "ADVP", "JJ", "VBN", "VBG", "ADJP", "JJR", "NP", "JJS", "DT", "FW",
                      "RBR", "RBS", "SBAR", "RB")),
    "ADVP": ("right", ("RB", "RBR", "RBS", "FW", "ADVP", "TO", "CD", "JJR", "JJ", "IN", "NP", "JJS", "NN")),
    "CONJP": ("right", ("CC", "RB", "IN")),
    "FRAG": ("right", ()),
    "INTJ": ("left", ()),
    "LST": ("right", ("LS", ":")),
    "NAC": ("left", ("NN", "NNS", "NNP", "NNPS", "NP", "NAC", "EX", "$", "CD", "QP", "PRP", "VBG", "JJ", "JJS", "JJR",
                     "ADJP", "FW")),
    "PP": ("left", ("IN", "TO", "VBG", "VBN", "RP", "FW")),
    "PRN": ("left", ()),
    "PRT": ("right", ("RP",)),
    "QP": ("left", ("$", "IN", "NNS", "NN", "JJ", "RB", "DT", "CD", "NCD", "QP", "JJR", "JJS")),
    "RRC": ("right", ("VP", "NP", "ADVP", "ADJP", "PP")),
    "S": ("left", ("TO", "IN", "VP", "S", "SBAR", "ADJP", "UCP", "NP")),
    "SBAR": ("left", ("WHNP", "WHPP", "WHADVP", "WHADJP", "IN", "DT", "S", "SQ", "SINV", "SBAR", "FRAG")),
    "SBARQ": ("left", ("SQ", "S", "SINV", "SBARQ", "FRAG")),
    "SINV": ("left", ("VBZ", "VBD", "VBP", "VB", "MD", "VP", "S", "SINV", "ADJP", "NP")),
    "SQ": ("left", ("VBZ", "VBD", "VBP", "VB", "MD", "VP", "SQ")),
    "UCP": ("right", ()),
    "VP": ("left", ("TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "VP", "ADJP", "NN", "NNS", "NP")),
    "WHADJP": ("left", ("CC", "WRB", "JJ", "ADJP")),
    "WHADVP": ("right", ("CC", "WRB")),
    "WHNP": ("left", ("WDT", "WP", "WP$", "WHADJP", "WHPP", "WHNP")),
    "WHPP": ("right", ("IN", "TO", "FW")),
    "X": ("right", ()),
}
NOUN_PHRASE_LABELS = frozenset({"NP", "NX", "NML"})
_NOUN_TAGS = ("NN", "NNP", "NNPS", "NNS", "NX", "POS", "JJR")

# PTB tag -> UPOS, for the CoNLL-U UPOS column (the evaluation leaves out words whose UPOS is PUNCT).
UPOS_OF_TAG = {
    "CC": "CCONJ", "CD": "NUM", "DT": "DET", "EX": "PRON", "FW": "X", "IN": "ADP", "JJ": "ADJ", "JJR": "ADJ",
    "JJS": "ADJ", "LS": "X", "MD": "AUX", "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN",
    "PDT": "DET", "POS": "PART", "PRP": "PRON", "PRP$": "PRON", "RB": "ADV", "RBR": "ADV", "RBS": "ADV",
    "RP": "ADP", "SYM": "SYM", "TO": "PART", "UH": "INTJ", "VB": "VERB", "VBD": "VERB", "VBG": "VERB",
    "VBN": "VERB", "VBP": "VERB", "VBZ": "VERB", "WDT": "DET", "WP": "PRON", "WP$": "PRON", "WRB": "ADV",
    "$": "SYM", "#": "SYM", **{tag: "PUNCT" for tag in PUNCTUATION_TAGS},
}


@dataclass(frozen=True)
class ConvertedSentence:
    """One converted tree: `words`, their 1-based `heads` (0 = the root) and PTB `tags` ("" where the tree had none)."""

    words: tuple
    heads: tuple
    tags: tuple


@dataclass
class _Child:
    label: str  # a phrase label without function tags, or a POS tag, or "" for a bare word
    head: int  # 0-based index of its head word in the sentence


def _is_preterminal(node):
    return isinstance(node, Tree) and len(node) == 1 and isinstance(node[0], str)


def _search(children, direction, labels):
    """Index of the head child: the first of `labels` (priority order) found scanning in `direction`, else None."""
    order = range(len(children)) if direction == "left" else range(len(children) - 1, -1, -1)
    for label in labels:
        for index in order:
            if children[index].label == label:
                return index
    return None


def _noun_phrase_head(children):
    """Collins's rule for NP (module docstring); `children` exclude punctuation unless they are all punctuation."""
    last = len(children) - 1
    if children[last].label == "POS":
        return last
    for direction, labels in (("right", _NOUN_TAGS), ("left", ("NP",)), ("right", ("$", "ADJP", "PRN")),
                              ("right", ("CD",)), ("right", ("JJ", "JJS", "RB", "QP"))):
        # position first within a set (the last noun-like child, whichever tag): search each position for any label
        order = range(len(children)) if direction == "left" else range(last, -1, -1)
        for index in order:
            if children[index].label in labels:
                return index
    return last


def head_child(label, children):
    """Index in `children` (a list with .label) of the head child of a constituent labeled `label` (function tags
    stripped), by `HEAD_RULES`, the NP rule and the coordination adjustment (module docstring)."""
    candidates = [index for index, child in enumerate(children) if child.label not in PUNCTUATION_TAGS]
    if not candidates:
        candidates = list(range(len(children)))
    kept = [children[index] for index in candidates]
    if label in NOUN_PHRASE_LABELS:
        chosen = _noun_phrase_head(kept)
    else:
        direction, labels = HEAD_RULES.get(label, ("left", ()))
        chosen = _search(kept, direction, labels)
        if chosen is None:
            chosen = 0 if direction == "left" else len(kept) - 1
    # Coordination (Collins): X CC head -> X, the first conjunct heads.
    if chosen >= 2 and kept[chosen - 1].label == "CC":
        chosen -= 2
    return candidates[chosen]


def _label(node):
    label = node.label()
    return label if label in WRAPPER_LABELS else strip_function_tag(label)


def ptb_to_dependencies(tree, where="tree"):
    """The dependency tree of one PTB tree (module docstring): a ConvertedSentence. `tree` is an nltk Tree with POS
    preterminals, traces and function tags as in the treebank (they are removed here). A tree with no word left
    after removing the traces raises ValueError naming `where`."""
    if not isinstance(tree, Tree):
        raise ValueError(f"{where}: expected an nltk Tree, got {type(tree).__name__}")
    stripped = remove_traces(tree)
    if stripped is None:
        raise ValueError(f"{where}: the tree has only -NONE- traces; expected at least one word")
    words, tags, heads = [], [], []

    def visit(node):
        """The _Child of `node` (a subtree or a bare word), after attaching its non-head children's heads."""
        if isinstance(node, str):
            words.append(node)
            tags.append("")
            heads.append(None)
            return _Child("", len(words) - 1)
        if _is_preterminal(node):
            words.append(node[0])
            tags.append(node.label())
            heads.append(None)
            return _Child(node.label(), len(words) - 1)
        label = _label(node)
        children = [visit(child) for child in node]
        chosen = children[head_child(label, children)]
        for child in children:
            if child is not chosen:
                heads[child.head] = chosen.head + 1
        return _Child(label, chosen.head)

    root = visit(stripped)
    heads[root.head] = 0
    return ConvertedSentence(tuple(words), tuple(heads), tuple(tags))


def convert_tree_files(paths):
    """The ConvertedSentence of every tree of the bracketed files (or .mrg folders) `paths`, in order. Errors name
    the file and tree."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    sentences = []
    for path in paths:
        for index, tree in enumerate(read_trees(path, **RAW_TREE_OPTIONS)):
            sentences.append(ptb_to_dependencies(tree, where=f"{path}, tree {index}"))
    return sentences


def conllu_lines(sentence, sent_id=None):
    """The CoNLL-U lines of one ConvertedSentence (comments, then ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS
    MISC per word)."""
    lines = ([f"# sent_id = {sent_id}"] if sent_id is not None else []) + [f"# text = {' '.join(sentence.words)}"]
    for position, (word, head, tag) in enumerate(zip(sentence.words, sentence.heads, sentence.tags), start=1):
        upos = UPOS_OF_TAG.get(tag, "X") if tag else "_"
        lines.append("\t".join([str(position), word, "_", upos, tag or "_", "_", str(head),
                                "root" if head == 0 else "dep", "_", "_"]))
    return lines


def write_conllu(sentences, path, prefix="ptb"):
    """Write ConvertedSentences to a CoNLL-U file (sent_id PREFIX-1, PREFIX-2, ...); return the path."""
    path = Path(path)
    blocks = ["\n".join(conllu_lines(sentence, f"{prefix}-{number}")) + "\n"
              for number, sentence in enumerate(sentences, start=1)]
    path.write_text("\n".join(blocks) + ("\n" if blocks else ""), encoding="utf-8")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m hf_slm.data.dependency_conversion",
        description="Convert PTB bracketed trees to CoNLL-U dependency trees by Collins-style head rules (not "
                    "Stanford CoreNLP's UD conversion: see the module docstring).")
    parser.add_argument("trees", nargs="+", help="tree files or .mrg folders (PTB brackets with POS tags)")
    parser.add_argument("--output", required=True, help="the CoNLL-U file to write (an existing file only with "
                        "--overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)
    try:
        check_replaceable(args.output, overwrite=args.overwrite)  # before converting
        sentences = convert_tree_files(args.trees)
    except ValueError as error:
        print(f"python -m hf_slm.data.dependency_conversion: error: {error}", file=sys.stderr)
        return 2
    write_conllu(sentences, args.output)
    print(f"wrote {len(sentences)} sentences to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
