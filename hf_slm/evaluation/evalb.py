"""Bracketing precision, recall and F1 with the rules of EVALB's COLLINS.prm (Sekine & Collins, 1997).

This is our own implementation of the rules EVALB documents (its README, sections [6] and [7]), not a port
of its code. What is scored, for one gold tree and one test tree over the same words:

- Traces (DELETE_LABEL -NONE-): words tagged `-NONE-` are removed with their preterminal, and so is every
  constituent left dominating nothing. Sentence length (used by `max_length`, EVALB's <= 40 cut-off) counts
  the remaining words, punctuation included (DELETE_LABEL_FOR_LENGTH -NONE-).
- Punctuation (DELETE_LABEL , : `` '' .): words with these POS tags are removed before matching, so spans are
  counted over the other words, and a constituent holding only punctuation disappears. Other symbols
  (-LRB-, -RRB-, $, #, HYPH, SYM ...) are words like any other, as in COLLINS.prm.
- The root: the top-level wrapper of the tree (label "", ROOT or TOP: WSJ's `( (S ...) )`, GUM's
  `(ROOT ...)`, tgrep's `(TOP ...)`) is not a bracket; the constituent under it (S of `(TOP (S ...))`) is.
  A bracket labeled TOP anywhere is dropped too (DELETE_LABEL TOP). EVALB itself only drops TOP and would
  count an unlabeled or ROOT wrapper as a bracket; treating all three alike is what every parser's gold
  and output need here, since predicted trees have no wrapper at all.
- POS preterminals are not brackets. Gold trees usually carry POS tags; trees predicted by our models do not
  (words sit directly under phrases). Both are handled: `gold_pos` / `test_pos` say whether a tree carries
  POS tags; "auto" decides by `trees.has_preterminals` (every word is the only child of its parent). A
  POS-free tree in which every word happens to be an only child, `(S (NP it) (VP sings))`, looks tagged to
  "auto": pass `test_pos=False` for model output.
- Labels: function tags and co-indices are cut at the first `-` or `=` that is not the label's first
  character (`NP-SBJ-1` -> `NP`, `NP=2` -> `NP`, `PP-LOC-PRD` -> `PP`), and PRT counts as ADVP
  (EQ_LABEL ADVP PRT). A labeled bracket is (label, start, end) over the kept words, end exclusive.
- Trivial spans (`trivial_spans=False`, not EVALB's default): brackets of one kept word and the bracket of the whole
  sentence (all kept words) are dropped from both trees, the convention of unsupervised and incremental parsing's
  unlabeled F1 (Kim et al. 2019, followed by paper 001's Table 8).
- Duplicates: brackets are multisets; a (label, span) seen n times in gold and m times in the test matches
  min(n, m) times (EVALB README [7].5: precision n/m when m > n, recall m/n when n > m).

Where punctuation is decided. EVALB deletes punctuation in each tree by that tree's own tags (its 2006
revision reinserts words whose tags disagree, to avoid false length mismatches). Predicted trees have no
tags, so here the positions to delete are decided once, from the GOLD tree's POS tags, and the same word
positions are deleted in the test tree. When the gold tree has no POS tags either, `punctuation="auto"`
falls back to word forms (PUNCTUATION_WORDS: tokens whose PTB tag is always one of the five; `'` and `-`
are left out because they are also possessives and hyphens) and counts the sentence in
`punctuation_from_words`; `punctuation="tags"` makes that an error and `"none"` deletes nothing.

Words must agree: after removing traces, the gold and test words must be the same sequence; otherwise a
ValueError names the sentence index (EVALB's "length unmatch" / "word unmatch" sentences, which it skips).

Reported per corpus (`corpus_f1`): precision, recall and F1 in percent from the summed counts (EVALB's
"Bracketing Recall / Precision / FMeasure"), exact match (percent of sentences whose bracket multisets are
equal, EVALB's "Complete match"), average crossing and the percentage of sentences without crossing, and
the counts. Sentences longer than 40 words are NOT excluded unless `max_length=40` is passed (EVALB prints
both; papers quote the all-sentences line for PTB section 23). A ratio with a zero denominator is 0, except
that a sentence with no brackets on either side is an exact match with precision = recall = F1 = 100.
"""

from collections import Counter

from ..data.numbering import sentence_name
from ..tokenization.tree_type import Tree
from ..tokenization.trees import has_preterminals, parse_tree

# COLLINS.prm, DELETE_LABEL for preterminals: the word goes with its bracket.
PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
TRACE_TAG = "-NONE-"
# COLLINS.prm, DELETE_LABEL for nonterminals: the bracket goes, its children stay.
DELETED_BRACKET_LABELS = frozenset({"TOP", TRACE_TAG}) | PUNCTUATION_TAGS
# Labels of a wrapper root, which is never a bracket.
WRAPPER_ROOT_LABELS = frozenset({"", "ROOT", "TOP"})
# COLLINS.prm, EQ_LABEL ADVP PRT: every label maps to one representative.
EQUIVALENT_LABELS = {"PRT": "ADVP"}
# Word forms whose PTB POS tag is always one of PUNCTUATION_TAGS; used only for gold trees without tags.
PUNCTUATION_WORDS = frozenset({",", ".", "?", "!", ":", ";", "--", "...", "``", "''", "`"})
_PUNCTUATION_MODES = ("auto", "tags", "words", "none")


def evalb_label(label):
    """The label EVALB compares: function tags cut, PRT read as ADVP. `NP-SBJ-1` -> `NP`, `PRT` -> `ADVP`."""
    if not (len(label) > 1 and label[0] == "-" and label[-1] == "-"):  # -NONE-, -LRB- stay whole
        for position in range(1, len(label)):
            if label[position] in "-=":
                label = label[:position]
                break
    return EQUIVALENT_LABELS.get(label, label)


def _as_tree(tree, what, index):
    if isinstance(tree, Tree):
        return tree
    if isinstance(tree, str):
        return parse_tree(tree, source=f"{sentence_name(index)} ({what})")
    raise ValueError(
        f"{sentence_name(index)} ({what}): expected an nltk.Tree or a bracketed string, got {type(tree).__name__}"
    )


def _is_tagged(tree, option, what, index):
    if option == "auto":
        return has_preterminals(tree)
    if option in (True, False):
        return option
    raise ValueError(f"{sentence_name(index)}: {what}_pos={option!r}; expected 'auto', True or False")


def _read_tree(tree, tagged):
    """Words, their tags (None when untagged) and the constituents (label, first word, end word, is_root).

    Word indices count every word, traces included. An explicit stack instead of recursion: any depth.
    """
    words, tags, constituents = [], [], []
    if tagged and len(tree) == 1 and isinstance(tree[0], str):  # a one-word tree that is only a preterminal
        return [tree[0]], [tree.label()], []
    pending = [(tree, 0, 0)]  # (node, index of its next child, index of its first word)
    while pending:
        node, child_index, first = pending.pop()
        if child_index == len(node):
            constituents.append((node.label(), first, len(words), node is tree))
            continue
        pending.append((node, child_index + 1, first))
        child = node[child_index]
        if isinstance(child, str):
            words.append(child)
            tags.append(None)
        elif tagged and len(child) == 1 and isinstance(child[0], str):
            words.append(child[0])
            tags.append(child.label())
        else:
            pending.append((child, 0, len(words)))
    return words, tags, constituents


def _without_traces(words, tags, constituents):
    """Drop words tagged -NONE- and re-index the constituents over the remaining words."""
    if TRACE_TAG not in tags:
        return words, tags, constituents
    kept_before = [0]
    for tag in tags:
        kept_before.append(kept_before[-1] + (tag != TRACE_TAG))
    kept = [i for i, tag in enumerate(tags) if tag != TRACE_TAG]
    constituents = [(label, kept_before[a], kept_before[b], root) for label, a, b, root in constituents]
    return [words[i] for i in kept], [tags[i] for i in kept], constituents


def _brackets(constituents, kept_before, labeled, trivial_spans=True):
    """The multiset of (label, start, end) over the kept words; kept_before[i] = kept words before word i.
    trivial_spans=False leaves out the brackets of one word and of all the kept words."""
    brackets = Counter()
    for label, first, end, is_root in constituents:
        start, stop = kept_before[first], kept_before[end]
        if start == stop:  # dominates nothing but deleted words
            continue
        if not trivial_spans and (stop - start == 1 or (start, stop) == (0, kept_before[-1])):
            continue
        if is_root and label in WRAPPER_ROOT_LABELS:
            continue
        label = evalb_label(label)
        if label in DELETED_BRACKET_LABELS:
            continue
        brackets[(label if labeled else "", start, stop)] += 1
    return brackets


def _crossing(test_brackets, gold_spans):
    """Test brackets (with multiplicity) that cross at least one gold bracket (unlabeled)."""
    count = 0
    for (_, start, end), times in test_brackets.items():
        if any(s < start < e < end or start < s < end < e for s, e in gold_spans):
            count += times
    return count


def _ratio(numerator, denominator):
    return 100.0 * numerator / denominator if denominator else 0.0


def _f1(precision, recall):
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _scores(matched, gold, test):
    if gold == 0 and test == 0:
        return 100.0, 100.0, 100.0
    precision, recall = _ratio(matched, test), _ratio(matched, gold)
    return precision, recall, _f1(precision, recall)


class GoldSentence:
    """One gold tree prepared for scoring many test trees (e.g. every proposal of a sentence).

    Args:
        gold_tree: an nltk.Tree or a bracketed string (POS tags, traces, function tags and a wrapper root
            are all fine).
        index: the sentence index, used in error messages.
        gold_pos: "auto", True or False: whether the gold tree carries POS preterminals.
        punctuation: "auto" (gold tags, or word forms when the gold has no tags), "tags", "words", "none".
        labeled: compare labels (EVALB's LABELED 1); False scores unlabeled spans.
        trivial_spans: count brackets of one word and of the whole sentence (EVALB's rule); False drops them from
            both trees (module doc).
    """

    def __init__(self, gold_tree, index=0, gold_pos="auto", punctuation="auto", labeled=True, trivial_spans=True):
        if punctuation not in _PUNCTUATION_MODES:
            raise ValueError(f"punctuation={punctuation!r}; expected one of {list(_PUNCTUATION_MODES)}")
        self.index = index
        self.labeled = labeled
        self.trivial_spans = trivial_spans
        tree = _as_tree(gold_tree, "gold", index)
        tagged = _is_tagged(tree, gold_pos, "gold", index)
        self.words, tags, constituents = _without_traces(*_read_tree(tree, tagged))
        if not self.words:
            raise ValueError(f"{sentence_name(index)}: the gold tree has no words once -NONE- traces are removed")
        self.punctuation_from_words = False
        if punctuation == "none":
            deleted = [False] * len(self.words)
        elif tagged and punctuation in ("auto", "tags"):
            deleted = [tag in PUNCTUATION_TAGS for tag in tags]
        elif punctuation == "tags":
            raise ValueError(
                f"{sentence_name(index)}: punctuation='tags' needs POS tags in the gold tree, which has none "
                "(pass punctuation='words' to decide punctuation by word form)"
            )
        else:
            deleted = [word in PUNCTUATION_WORDS for word in self.words]
            self.punctuation_from_words = punctuation == "auto"
        self.kept_before = [0]
        for is_deleted in deleted:
            self.kept_before.append(self.kept_before[-1] + (not is_deleted))
        self.brackets = _brackets(constituents, self.kept_before, labeled, trivial_spans)
        self._spans = {(start, end) for _, start, end in self.brackets}

    @property
    def length(self):
        """EVALB's sentence length: words without traces, punctuation included."""
        return len(self.words)

    def score(self, test_tree, test_pos="auto", check_words=True):
        """Counts and scores of one test tree against this gold tree (see `bracket_scores`)."""
        index = self.index
        tree = _as_tree(test_tree, "test", index)
        tagged = _is_tagged(tree, test_pos, "test", index)
        words, _, constituents = _without_traces(*_read_tree(tree, tagged))
        if len(words) != len(self.words):
            raise ValueError(
                f"{sentence_name(index)}: length mismatch, the gold tree has {len(self.words)} words and the test tree "
                f"{len(words)} (traces removed); expected the same words. gold: {' '.join(self.words)[:120]!r}, "
                f"test: {' '.join(words)[:120]!r}"
            )
        if check_words and words != self.words:
            position = next(i for i, (g, t) in enumerate(zip(self.words, words)) if g != t)
            raise ValueError(
                f"{sentence_name(index)}: word mismatch at word {position + 1}: gold {self.words[position]!r}, test "
                f"{words[position]!r}; expected the same words in the same order"
            )
        test = _brackets(constituents, self.kept_before, self.labeled, self.trivial_spans)
        matched = sum((self.brackets & test).values())
        gold_count, test_count = sum(self.brackets.values()), sum(test.values())
        precision, recall, f1 = _scores(matched, gold_count, test_count)
        return {
            "length": self.length,
            "matched": matched,
            "gold": gold_count,
            "test": test_count,
            "crossing": _crossing(test, self._spans),
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "exact": matched == gold_count == test_count,
            "punctuation_from_words": self.punctuation_from_words,
        }


def bracket_scores(gold_tree, test_tree, index=0, gold_pos="auto", test_pos="auto", punctuation="auto",
                   labeled=True, check_words=True):
    """EVALB (COLLINS.prm) scores of one test tree against one gold tree.

    Args:
        gold_tree, test_tree: nltk.Tree objects or bracketed strings over the same words.
        index: the sentence index named in errors.
        gold_pos, test_pos: "auto", True or False: whether the tree carries POS preterminals (module doc).
        punctuation: "auto", "tags", "words" or "none" (module doc).
        labeled: EVALB's LABELED 1 (True) or unlabeled spans (False).
        check_words: require the same words, not only the same number of words.

    Returns:
        {"length", "matched", "gold", "test", "crossing", "precision", "recall", "f1", "exact",
        "punctuation_from_words"}: bracket counts, precision / recall / F1 in percent, and whether the
        bracket multisets are equal.

    Raises:
        ValueError naming `index` when the words differ (after removing traces).
    """
    gold = GoldSentence(gold_tree, index=index, gold_pos=gold_pos, punctuation=punctuation, labeled=labeled)
    return gold.score(test_tree, test_pos=test_pos, check_words=check_words)


def summarize(sentence_scores, skipped_long=0):
    """Corpus metrics from per-sentence results of `bracket_scores` / `GoldSentence.score`."""
    matched = sum(s["matched"] for s in sentence_scores)
    gold = sum(s["gold"] for s in sentence_scores)
    test = sum(s["test"] for s in sentence_scores)
    count = len(sentence_scores)
    precision, recall, f1 = _scores(matched, gold, test) if count else (0.0, 0.0, 0.0)
    crossing = sum(s["crossing"] for s in sentence_scores)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "exact_match": _ratio(sum(s["exact"] for s in sentence_scores), count),
        "sentences": count,
        "skipped_long": skipped_long,
        "matched_brackets": matched,
        "gold_brackets": gold,
        "test_brackets": test,
        "average_crossing": crossing / count if count else 0.0,
        "no_crossing": _ratio(sum(s["crossing"] == 0 for s in sentence_scores), count),
        "punctuation_from_words": sum(s["punctuation_from_words"] for s in sentence_scores),
    }


def corpus_f1(gold_trees, test_trees, max_length=None, gold_pos="auto", test_pos="auto", punctuation="auto",
              labeled=True, check_words=True):
    """EVALB (COLLINS.prm) corpus scores of test trees against gold trees, sentence by sentence.

    Args:
        gold_trees, test_trees: equally long sequences of nltk.Tree objects or bracketed strings.
        max_length: score only sentences of at most this many words (EVALB's length: traces removed,
            punctuation counted); None (the default) scores every sentence.
        Other arguments: see `bracket_scores`.

    Returns:
        {"precision", "recall", "f1", "exact_match" (percent), "sentences" (scored), "skipped_long",
        "matched_brackets", "gold_brackets", "test_brackets", "average_crossing", "no_crossing" (percent of
        sentences), "punctuation_from_words" (sentences whose punctuation was decided by word form)}.
    """
    gold_trees, test_trees = list(gold_trees), list(test_trees)
    if len(gold_trees) != len(test_trees):
        raise ValueError(f"{len(gold_trees)} gold trees but {len(test_trees)} test trees; expected one test tree "
                         "per gold tree, in the same order")
    scores, skipped = [], 0
    for index, (gold_tree, test_tree) in enumerate(zip(gold_trees, test_trees)):
        gold = GoldSentence(gold_tree, index=index, gold_pos=gold_pos, punctuation=punctuation, labeled=labeled)
        if max_length is not None and gold.length > max_length:
            skipped += 1
            continue
        scores.append(gold.score(test_tree, test_pos=test_pos, check_words=check_words))
    return summarize(scores, skipped_long=skipped)
