"""The inputs `hf-slm masks` shows for one tree, by tree format (a TreeFormat's `mask_example`).

Each whitespace-separated word is one token (no subword model), over a vocabulary made for the tree, so the
output reads against the papers' figures:
- brackets: the top-down actions (paper 000, Figure 2); several trees are a document;
- words: the words and `</s>`; several trees are a document;
- unlabelled brackets: the tree as the grammar's linearization writes it (paper 003, section 2, Figure 3):
  unary chains removed, left-binarized for `bi`, top-down `(` / `)` or bottom-up with each `)`'s start;
- dependency: an inline tree `There/2 is/0 a/4 difference/2`, the oracle's transitions (paper 002, Figures 2, 4
  and 5); with `pieces`, a word is its pieces joined by `|` (`▁Th|ere/2`, Appendix B); the `reference` variant
  starts with `<s>` and ends its last arc with pop_root.

Light: numpy and the readers of tokenization/ only (`hf-slm masks` imports no torch or transformers).
"""

from .action_vocab import ActionVocabulary
from ..tokenization.linearizers import (
    UNLABELED_CLOSE,
    bottom_up_actions,
    bottom_up_pointers,
    is_close_nt,
    is_open_nt,
    terminal_actions,
    top_down_actions,
)
from ..tokenization.trees import (
    input_format,
    left_binarize,
    normalize_tree,
    parse_trees,
    read_tree_string,
    remove_unary_chains,
)
from .registry import get_grammar, grammar_class
from .tree_formats import MaskExample

WHERE = "the tree argument"


def trees_from_text(text, tree_format="auto", **normalize_options):
    """The trees of a tree or a document: one tree, or several written one after another (action strings
    `(S ... S) (S ... S)` or PTB brackets, as `read_tree_string` reads one). A tree with a wrapper root over the
    sentences, `(DOC (S ...) (S ...))`, is one tree."""
    found = input_format(text) if tree_format == "auto" else tree_format
    if found == "ptb":
        trees = parse_trees(text, WHERE)
        return [normalize_tree(tree, **normalize_options) for tree in trees]
    if found != "actions":  # plain words, or an unknown format: read_tree_string names the problem
        return [read_tree_string(text, WHERE, tree_format, **normalize_options)]
    groups, depth = [[]], 0
    for token in text.split():  # a tree ends where its root's closing bracket brings the depth back to 0
        groups[-1].append(token)
        depth += is_open_nt(token) - is_close_nt(token)
        if depth == 0:
            groups.append([])
    groups = [group for group in groups if group]
    if len(groups) == 1:
        return [read_tree_string(text, WHERE, tree_format)]
    return [read_tree_string(" ".join(group), f"tree {index} of the document argument", "actions")
            for index, group in enumerate(groups)]


def _trees(text, tree_format, several, normalize_options):
    if several:
        return trees_from_text(text, tree_format, **normalize_options)
    return [read_tree_string(text, WHERE, tree_format, **normalize_options)]


def bracketed_example(text, grammar, tree_format="auto", several=False, **normalize_options):
    """Labelled trees: `<s>` and the top-down actions of each tree (a document when there are several)."""
    trees = _trees(text, tree_format, several, normalize_options)
    actions = [action for tree in trees for action in top_down_actions(tree)]
    vocab = ActionVocabulary.from_action_sequences([actions])
    rules = get_grammar(grammar, vocab.layout, document_level=len(trees) > 1)
    return MaskExample(rules, vocab.tokens, vocab.encode(actions), {}, len(trees))


def words_example(text, grammar, tree_format="auto", several=False, **normalize_options):
    """Words only: `<s>`, the words of each tree, `</s>`."""
    trees = _trees(text, tree_format, several, normalize_options)
    words = [word for tree in trees for word in terminal_actions(tree)]
    vocab = ActionVocabulary.from_action_sequences([words])
    rules = get_grammar(grammar, vocab.layout, document_level=len(trees) > 1)
    return MaskExample(rules, vocab.tokens, vocab.encode(words, add_eos=True), {}, len(trees))


def unlabelled_actions(tree, rules):
    """The action strings and starts (`<s>` = 0, -1 where none, `<s>` and a bottom-up `</s>` included) of a tree
    as the grammar class `rules` reads it, by its linearization `{bi,nb}-{dn,up}`: unary chains removed,
    left-binarized for `bi`; `(` and `)` top-down, or the words and `)` bottom-up with each `)`'s start."""
    if "(" in tree.leaves():
        raise ValueError("the word '(' would read as the unlabeled opening bracket; write it -LRB-")
    shape, _, order = rules.linearization.partition("-")
    tree = remove_unary_chains(left_binarize(tree) if shape == "bi" else tree)
    if order == "dn":
        actions = ["(" if is_open_nt(action) else action for action in top_down_actions(tree, labeled=False)]
        return ["<s>"] + actions, [-1] * (len(actions) + 1)
    actions, starts = bottom_up_actions(tree)
    pointers = [-1 if pointer is None else pointer + 1 for pointer in bottom_up_pointers(actions, starts)]
    return ["<s>"] + actions + ["</s>"], [-1] + pointers + [-1]


def unlabelled_example(text, grammar, tree_format="auto", several=False, **normalize_options):
    """One tree, unlabelled as the grammar's linearization writes it; a Nb-Up `)` carries its start. The report
    adds, where the grammar gives them, each externally composed `)`'s inputs (`composes`) and the start each `)`
    points at, at the position that predicts the `)` (`starts`)."""
    rules = grammar_class(grammar)
    actions, starts = unlabelled_actions(read_tree_string(text, WHERE, tree_format, **normalize_options), rules)
    words = [a for a in actions[1:] if a not in ("</s>", "(", UNLABELED_CLOSE)]
    vocab = ActionVocabulary(words, [""])  # one `(`, one `)`
    options = {"starts": starts} if any(start >= 0 for start in starts) else {}
    return MaskExample(get_grammar(grammar, vocab.layout), vocab.tokens, [vocab.ids[a] for a in actions], options,
                       report_fields=rules.report_fields)


DEPENDENCY_SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<root>")


def dependency_example(text, grammar, tree_format="auto", several=False, variant="paper", pieces=False,
                       **normalize_options):
    """An inline dependency tree: the oracle's transitions of the grammar's transition system (its
    linearization) over a vocabulary made for the tree (the reference variant: `<s>` first, pop_root instead of
    the last RA)."""
    from ..tokenization.dependency_trees import DependencyTree
    from ..tokenization.transitions import GEN, POP, transition_system

    tree = DependencyTree.from_inline(text, where=WHERE)
    rules = grammar_class(grammar)
    transitions = transition_system(rules.linearization).transitions(tree, where=WHERE)
    split = (lambda word: word.split("|")) if pieces else (lambda word: [word])
    for word in tree.words:
        if pieces and "" in split(word):
            raise ValueError(f"{WHERE}: word {word!r} has an empty piece; expected pieces joined by '|'")
    max_k = max([t.value for t in transitions if t.action != GEN and t.action != POP] + [1])
    left, right = len(DEPENDENCY_SPECIAL_TOKENS), len(DEPENDENCY_SPECIAL_TOKENS) + max_k
    pop_id = right + max_k
    tokens = list(DEPENDENCY_SPECIAL_TOKENS) + [f"LA[{k}]" if max_k > 1 else "LA" for k in range(1, max_k + 1)]
    tokens += [f"RA[{k}]" if max_k > 1 else "RA" for k in range(1, max_k + 1)] + ["POP"]
    piece_ids, continuation_ids = {}, []
    for word in tree.words:  # a piece that continues a word is another id than the same piece starting one
        for index, piece in enumerate(split(word)):
            if (piece, index > 0) not in piece_ids:
                piece_ids[piece, index > 0] = len(tokens)
                tokens.append(piece)
                if index > 0:
                    continuation_ids.append(piece_ids[piece, True])
    layout = rules.layout_class(
        pad_token_id=0, bos_token_id=1, eos_token_id=2, root_token_id=4, left_arc_start=left,
        left_arc_stop=left + max_k, right_arc_start=right, right_arc_stop=right + max_k, pop_token_id=pop_id,
        unk_token_id=3, vocab_size=len(tokens), continuation_ids=continuation_ids)
    ids = [1 if variant == "reference" else 4]
    for transition in transitions:
        if transition.action == GEN:
            ids += [piece_ids[piece, index > 0] for index, piece in enumerate(split(transition.value))]
        elif transition.action == POP:
            ids.append(pop_id)
        else:
            ids.append((left if transition.action == "LA" else right) + transition.value - 1)
    if variant == "reference":
        ids[-1] = pop_id  # the arc onto the root is pop_root in the released code
    ids.append(2)
    return MaskExample(rules(layout, variant=variant), tokens, ids, {},
                       report_fields=lambda sequence: {"variant": variant})
