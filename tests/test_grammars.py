"""Grammars: golden cases from paper 000 (Figure 2, Algorithm 1), hand-derived cases, properties."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nltk import Tree
from tree_strategies import assert_positions_equal_sequence

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import ActionKind, PositionKind
from hf_slm.tokenization.linearizers import top_down_actions

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

NONE = -100


def run(grammar_name, action_string, extra_words=(), extra_labels=()):
    """Vocabulary, grammar and whole-sequence output for one action string."""
    actions = action_string.split()
    vocab = ActionVocabulary.from_action_sequences([actions, list(extra_words)] + [["(" + x] for x in extra_labels])
    grammar = get_grammar(grammar_name, vocab.layout)
    add_eos = grammar_name == "terminals"
    ids = vocab.encode(actions, add_eos=add_eos)
    return vocab, grammar, ids, grammar.sequence(ids)


def attended_sets(mask):
    return [set(np.flatnonzero(row).tolist()) for row in mask]


def label_tokens(vocab, labels):
    return [None if label == NONE else vocab.tokens[label] for label in labels]


# ---- paper 000, Figure 2 ---------------------------------------------------------------------------

FIGURE_2 = "(S (NP the blue bird NP) (VP sings VP) S)"


def test_figure_2_inputs_types_and_labels():
    vocab, _, _, seq = run("tg", FIGURE_2)
    assert vocab.decode(seq.input_ids) == [
        "<s>", "(S", "(NP", "the", "blue", "bird", "NP)", "NP)", "(VP", "sings", "VP)", "VP)", "S)", "S)",
    ]
    K = PositionKind
    assert [K(k) for k in seq.position_kinds] == [
        K.BOS, K.OPEN_NT, K.OPEN_NT, K.TERMINAL, K.TERMINAL, K.TERMINAL, K.CLOSE_COMPOSE, K.CLOSE_STACK,
        K.OPEN_NT, K.TERMINAL, K.CLOSE_COMPOSE, K.CLOSE_STACK, K.CLOSE_COMPOSE, K.CLOSE_STACK,
    ]
    # Figure 2a, column "Label" ("_" = no prediction).
    assert label_tokens(vocab, seq.labels) == [
        "(S", "(NP", "the", "blue", "bird", "NP)", None, "(VP", "sings", "VP)", None, "S)", None, None,
    ]


def test_figure_2_attention_ops_and_mask():
    _, _, _, seq = run("tg", FIGURE_2)
    # Figure 2b, derived row by row from Algorithm 1 (every position also attends itself, as the
    # reference implementation does for the CNT2 copies too).
    expected = [
        {0},                    # <s>
        {0, 1},                 # (S
        {0, 1, 2},              # (NP
        {0, 1, 2, 3},           # the
        {0, 1, 2, 3, 4},        # blue
        {0, 1, 2, 3, 4, 5},     # bird
        {2, 3, 4, 5, 6},        # NP) COMPOSE: (NP, the, blue, bird, itself
        {0, 1, 6, 7},           # NP) STACK
        {0, 1, 6, 8},           # (VP
        {0, 1, 6, 8, 9},        # sings: the composed NP, not the words
        {8, 9, 10},             # VP) COMPOSE
        {0, 1, 6, 10, 11},      # VP) STACK
        {1, 6, 10, 12},         # S) COMPOSE: (S, NP), VP), itself
        {0, 12, 13},            # S) STACK
    ]
    assert attended_sets(seq.attention_mask) == expected
    compose_rows = [i for i, k in enumerate(seq.position_kinds) if k == PositionKind.CLOSE_COMPOSE]
    assert compose_rows == [6, 10, 12]


def test_figure_2_depths_and_relative_positions():
    _, _, _, seq = run("tg", FIGURE_2)
    assert seq.depth.tolist() == [0, 1, 2, 3, 3, 3, 2, 2, 2, 3, 2, 2, 1, 1]
    relpos = seq.relative_positions
    assert relpos[9, [0, 1, 6, 8, 9]].tolist() == [3, 2, 1, 1, 0]  # sings -> <s>, (S, NP), (VP, itself
    assert relpos[6, [2, 3, 4, 5, 6]].tolist() == [0, -1, -1, -1, 0]  # COMPOSE: 0 to its NT, -1 to children
    assert relpos[12, [1, 6, 10, 12]].tolist() == [0, -1, -1, 0]
    assert relpos[13, [0, 12, 13]].tolist() == [1, 0, 0]
    assert (relpos[~seq.attention_mask] == 0).all()


# ---- cases derived by hand from Algorithm 1 --------------------------------------------------------

def test_one_word_sentence():
    vocab, _, _, seq = run("tg", "(S hello S)")
    assert attended_sets(seq.attention_mask) == [{0}, {0, 1}, {0, 1, 2}, {1, 2, 3}, {0, 3, 4}]
    assert seq.depth.tolist() == [0, 1, 2, 1, 1]
    assert label_tokens(vocab, seq.labels) == ["(S", "hello", "S)", None, None]
    assert seq.relative_positions[3, [1, 2, 3]].tolist() == [0, -1, 0]


def test_unary_chain():
    # <s> (S (VP (V go V) V) VP) VP) S) S)
    #  0   1   2   3  4  5  6   7   8   9  10
    vocab, _, _, seq = run("tg", "(S (VP (V go V) VP) S)")
    assert attended_sets(seq.attention_mask) == [
        {0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4},
        {3, 4, 5}, {0, 1, 2, 5, 6},
        {2, 5, 7}, {0, 1, 7, 8},
        {1, 7, 9}, {0, 9, 10},
    ]
    assert seq.depth.tolist() == [0, 1, 2, 3, 4, 3, 3, 2, 2, 1, 1]
    assert label_tokens(vocab, seq.labels) == ["(S", "(VP", "(V", "go", "V)", None, "VP)", None, "S)", None, None]


def test_nesting_ten_deep():
    labels = [f"A{k}" for k in range(1, 11)]
    actions = " ".join("(" + x for x in labels) + " w " + " ".join(x + ")" for x in reversed(labels))
    _, _, _, seq = run("tg", actions)
    mask, relpos = seq.attention_mask, seq.relative_positions
    word = 11  # <s> then ten opening NTs
    assert set(np.flatnonzero(mask[word])) == set(range(12))
    assert relpos[word, :12].tolist() == [11 - j if j else 11 for j in range(12)]  # depth 11 minus depth j
    # The innermost COMPOSE attends (A10, w and itself; each outer COMPOSE attends its NT, the composed
    # child and itself, and each STACK copy attends <s>, the open NTs above it, itself and its composed self.
    for level in range(10):  # level 0 closes A10
        compose = 12 + 2 * level
        opening = 10 - level
        child = word if level == 0 else compose - 2
        assert set(np.flatnonzero(mask[compose])) == {opening, child, compose}
        assert set(np.flatnonzero(mask[compose + 1])) == set(range(opening)) | {compose, compose + 1}
        assert seq.depth[compose] == seq.depth[compose + 1] == opening


def test_flat_forty_word_constituent():
    words = [f"w{k}" for k in range(40)]
    vocab, _, _, seq = run("tg", "(S " + " ".join(words) + " S)")
    compose = 42
    assert set(np.flatnonzero(seq.attention_mask[compose])) == set(range(1, 43))
    assert seq.relative_positions[compose, 2:42].tolist() == [-1] * 40
    for k in range(40):
        assert set(np.flatnonzero(seq.attention_mask[2 + k])) == set(range(3 + k))
    assert set(np.flatnonzero(seq.attention_mask[43])) == {0, 42, 43}
    assert label_tokens(vocab, seq.labels)[:3] == ["(S", "w0", "w1"]
    assert label_tokens(vocab, seq.labels)[41:] == ["S)", None, None]


def test_labels_with_hyphens_and_symbols():
    vocab, grammar, ids, seq = run("tg", "(NP-SBJ-1 (PRP$ his PRP$) (-LRB- -LRB- -LRB-) NP-SBJ-1)")
    assert vocab.decode(seq.input_ids)[-2:] == ["NP-SBJ-1)", "NP-SBJ-1)"]
    # <s> (NP-SBJ-1 (PRP$ his PRP$)c PRP$)s (-LRB- -LRB- -LRB-)c -LRB-)s NP-SBJ-1)c NP-SBJ-1)s
    #  0     1        2    3     4       5      6      7      8          9          10         11
    assert attended_sets(seq.attention_mask)[10] == {1, 4, 8, 10}


def test_sibling_constituents_and_nested_compose():
    # <s> (S (NP (NP a NP)c NP)s b NP)c NP)s (VP c VP)c VP)s S)c S)s
    #  0   1   2   3  4   5     6  7   8     9   10 11  12    13   14  15
    _, _, _, seq = run("tg", "(S (NP (NP a NP) b NP) (VP c VP) S)")
    sets = attended_sets(seq.attention_mask)
    assert sets[7] == {0, 1, 2, 5, 7}  # b sees the inner NP composed, not `a`
    assert sets[8] == {2, 5, 7, 8}  # outer NP COMPOSE: its NT, the inner NP), b, itself
    assert sets[11] == {0, 1, 8, 10, 11}  # c sees the outer NP composed
    assert sets[14] == {1, 8, 12, 14}
    assert seq.relative_positions[8, [2, 5, 7, 8]].tolist() == [0, -1, -1, 0]


def test_choe_charniak_is_causal_with_linear_positions():
    vocab, _, _, seq = run("choe_charniak", FIGURE_2)
    assert vocab.decode(seq.input_ids) == "<s> (S (NP the blue bird NP) (VP sings VP) S)".split()
    n = len(seq.input_ids)
    assert (seq.attention_mask == np.tril(np.ones((n, n), dtype=bool))).all()
    i, j = np.indices((n, n))
    assert (seq.relative_positions == np.where(j <= i, i - j, 0)).all()
    assert label_tokens(vocab, seq.labels) == "(S (NP the blue bird NP) (VP sings VP) S)".split() + [None]
    assert PositionKind.CLOSE_COMPOSE not in seq.position_kinds


def test_terminals_grammar_ends_with_eos():
    vocab, _, _, seq = run("terminals", "the blue bird sings")
    assert vocab.decode(seq.input_ids) == ["<s>", "the", "blue", "bird", "sings", "</s>"]
    assert label_tokens(vocab, seq.labels) == ["the", "blue", "bird", "sings", "</s>", None]
    assert (seq.attention_mask == np.tril(np.ones((6, 6), dtype=bool))).all()


def test_legal_next_kinds():
    vocab, grammar, ids, _ = run("tg", "(S (NP a NP) S)")
    state = grammar.start()
    A = ActionKind
    assert grammar.allowed_next_kinds(state) == {A.BOS}
    expected_after = [
        {A.OPEN_NT},  # after <s>: the root
        {A.OPEN_NT, A.TERMINAL},  # after (S: no closing an empty constituent
        {A.OPEN_NT, A.TERMINAL},  # after (NP
        {A.OPEN_NT, A.TERMINAL, A.CLOSE_NT},  # after a
        {A.OPEN_NT, A.TERMINAL, A.CLOSE_NT},  # after NP)
        set(),  # after S): the sentence is complete
    ]
    for action_id, expected in zip(ids, expected_after):
        grammar.step(state, action_id)
        assert grammar.allowed_next_kinds(state) == expected
        legal_closing = [vocab.tokens[i] for i in np.flatnonzero(grammar.legal_actions(state)) if vocab.tokens[i].endswith(")")]
        assert legal_closing == ([("NP)" if state.num_actions == 4 else "S)")] if A.CLOSE_NT in expected else [])


def test_terminals_legal_next_kinds():
    vocab, grammar, ids, _ = run("terminals", "a b")
    state = grammar.start()
    grammar.step(state, ids[0])
    assert grammar.allowed_next_kinds(state) == {ActionKind.TERMINAL}
    grammar.step(state, ids[1])
    assert grammar.allowed_next_kinds(state) == {ActionKind.TERMINAL, ActionKind.EOS}
    grammar.step(state, ids[-1])
    assert grammar.allowed_next_kinds(state) == set()


@pytest.mark.parametrize(
    "actions, message",
    [
        ("(S (NP a VP) S)", "closes the wrong label"),
        ("(S a S) S)", "not allowed"),
        ("a (S b S)", "not allowed"),
        ("(S a S) (S b S)", "not allowed"),
        ("(S (NP NP) a S)", "not allowed"),
        ("(S (NP a NP)", "ends before"),
    ],
)
def test_illegal_sequences_raise(actions, message):
    vocab = ActionVocabulary.from_action_sequences([actions.split(), ["(VP", "VP)"]])
    for name in ("tg", "choe_charniak"):
        grammar = get_grammar(name, vocab.layout)
        with pytest.raises(ValueError, match=message):
            grammar.sequence(vocab.encode(actions.split()))


def test_errors_name_sequence_and_action():
    vocab = ActionVocabulary.from_action_sequences([["(S", "(NP", "a", "NP)", "S)", "(VP", "VP)"]])
    grammar = get_grammar("tg", vocab.layout)
    good = vocab.encode("(S a S)".split())
    bad = vocab.encode("(S (NP a VP) S)".split())
    with pytest.raises(ValueError, match=r"sequence 1: tg grammar: action 4 \(id \d+, CLOSE_NT\)"):
        grammar.batch([good, bad])
    with pytest.raises(ValueError, match="expected a non-empty"):
        grammar.batch([[]])
    with pytest.raises(ValueError, match="not allowed"):
        grammar.sequence(vocab.encode("(S a S)".split(), add_bos=False))
    with pytest.raises(ValueError, match="expands to 5 positions .* maximum is 4"):
        grammar.batch([good], max_length=4)
    with pytest.raises(ValueError, match="unknown grammar 'tgg'"):
        get_grammar("tgg", vocab.layout)


def test_incomplete_prefix_allowed_on_request():
    vocab, grammar, ids, full = run("tg", FIGURE_2)
    prefix = grammar.sequence(ids[:7], require_complete=False)  # up to `bird NP)`
    n = len(prefix.input_ids)
    assert (prefix.attention_mask == full.attention_mask[:n, :n]).all()
    assert (prefix.relative_positions == full.relative_positions[:n, :n]).all()


def test_batch_padding():
    vocab = ActionVocabulary.from_action_sequences([FIGURE_2.split()])
    grammar = get_grammar("tg", vocab.layout)
    long, short = vocab.encode(FIGURE_2.split()), vocab.encode("(S (NP the bird NP) S)".split())
    batch = grammar.batch([long, short], pad_to_multiple_of=8)
    assert batch["input_ids"].shape == (2, 16)
    assert batch["lengths"].tolist() == [14, 9]
    alone = grammar.sequence(short)
    assert (batch["attention_mask"][1, :9, :9] == alone.attention_mask).all()
    assert (batch["relative_positions"][1, :9, :9] == alone.relative_positions).all()
    assert not batch["attention_mask"][1, :9, 9:].any()  # real rows never see padding
    assert (batch["attention_mask"][1, 9:, :] == np.eye(16, dtype=bool)[9:]).all()  # padding rows: self only
    assert (batch["labels"][1, 8:] == NONE).all() and (batch["labels"][0, 14:] == NONE).all()
    assert (batch["input_ids"][1, 9:] == vocab.layout.pad_token_id).all()


# ---- properties over random trees ------------------------------------------------------------------

LABELS = ["S", "NP", "VP", "PP", "SBAR", "NP-SBJ", "PRP$", "-LRB-", "S|<NP-VP>", ":"]
WORDS = ["the", "a", "bird", "sings", "of", "-LRB-", ",", "x"]


def random_trees():
    leaf = st.sampled_from(WORDS)
    node = st.recursive(
        leaf,
        lambda children: st.builds(
            lambda label, kids: Tree(label, kids), st.sampled_from(LABELS), st.lists(children, min_size=1, max_size=6)
        ),
        max_leaves=40,
    )
    return st.builds(lambda label, kids: Tree(label, kids), st.sampled_from(LABELS), st.lists(node, min_size=1, max_size=5))


ALL_ACTIONS = ["(" + x for x in LABELS] + [x + ")" for x in LABELS] + WORDS
VOCAB = ActionVocabulary.from_action_sequences([ALL_ACTIONS])


def incremental(grammar, ids):
    state = grammar.start()
    positions = []
    for action_id in ids:
        assert grammar.layout.kind(action_id) in grammar.allowed_next_kinds(state)
        positions += grammar.step(state, action_id)
    assert grammar.allowed_next_kinds(state) == set()
    return positions


def expected_compose_rows(tree):
    """From the tree itself: for each COMPOSE position, its opening NT, its children's positions, itself."""
    rows = {}
    position = 1  # after <s>

    def visit(node):
        nonlocal position
        if isinstance(node, str):
            here = position
            position += 1
            return here
        opening = position
        position += 1
        children = [visit(child) for child in node]
        compose = position
        position += 2
        rows[compose] = {opening, compose, *children}
        return compose  # a closed constituent is represented by its COMPOSE copy

    visit(tree)
    return rows


# 400 random trees of up to 40 words for each of the three grammars (1,500 took a minute of the suite's time).
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_trees())
def test_incremental_equals_whole_sequence_and_compose_rule(tree):
    ids = VOCAB.encode(top_down_actions(tree))
    for name in ("tg", "tg_txl_positions", "choe_charniak"):
        grammar = get_grammar(name, VOCAB.layout)
        seq = grammar.sequence(ids)
        positions = incremental(grammar, ids)
        assert_positions_equal_sequence(positions, seq, NONE)
        assert not np.triu(seq.attention_mask, 1).any()  # causal
        assert seq.attention_mask.diagonal().all()
        if name == "tg":
            compose = {i: set(np.flatnonzero(seq.attention_mask[i])) for i in np.flatnonzero(seq.position_kinds == PositionKind.CLOSE_COMPOSE)}
            assert compose == expected_compose_rows(tree)
            # Relative positions are depth differences: >= 0 for STACK rows, 0/-1 for COMPOSE rows.
            stack_rows = seq.position_kinds != PositionKind.CLOSE_COMPOSE
            assert (seq.relative_positions[stack_rows] >= 0).all()
            assert set(np.unique(seq.relative_positions[~stack_rows])) <= {0, -1}


@settings(max_examples=100, deadline=None)
@given(st.lists(random_trees(), min_size=1, max_size=8))
def test_batch_equals_one_at_a_time(trees):
    grammar = get_grammar("tg", VOCAB.layout)
    sequences = [VOCAB.encode(top_down_actions(t)) for t in trees]
    batch = grammar.batch(sequences)
    for row, ids in enumerate(sequences):
        alone = grammar.sequence(ids)
        n = len(alone.input_ids)
        assert (batch["attention_mask"][row, :n, :n] == alone.attention_mask).all()
        assert (batch["relative_positions"][row, :n, :n] == alone.relative_positions).all()
        assert (batch["labels"][row, :n] == alone.labels).all()


@settings(max_examples=400, deadline=None)
@given(random_trees(), st.integers(min_value=0, max_value=10**6), st.sampled_from(["delete", "swap", "replace"]))
def test_vectorized_validation_agrees_with_incremental_rules(tree, seed, edit):
    """Corrupt a valid sequence; the vectorized check must accept exactly what the step rules accept."""
    ids = VOCAB.encode(top_down_actions(tree))
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, len(ids)))
    if edit == "delete":
        ids = ids[:k] + ids[k + 1 :]
    elif edit == "swap" and k + 1 < len(ids):
        ids[k], ids[k + 1] = ids[k + 1], ids[k]
    else:
        ids[k] = int(rng.integers(1, len(VOCAB.tokens)))
    prefix = ids[: int(rng.integers(1, len(ids) + 1))]
    for name in ("tg", "choe_charniak"):
        grammar = get_grammar(name, VOCAB.layout)
        for sequence, complete in ((ids, True), (prefix, False)):
            # legal_actions alone decides, action by action: the vectorized check must agree with it.
            state, step_ok = grammar.start(), True
            for action_id in sequence:
                if not grammar.legal_actions(state)[action_id]:
                    step_ok = False
                    break
                grammar.step(state, action_id)
            step_ok = step_ok and (grammar.is_complete(state) or not complete)
            if step_ok:
                grammar.validate(sequence, require_complete=complete)
            else:
                with pytest.raises(ValueError):
                    grammar.validate(sequence, require_complete=complete)
