"""One source of legality: validation, the search constraints and the sampler agree with `legal_actions`."""

from pathlib import Path

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hf_slm
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.families import config_for_grammar
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import ActionKind, ActionLayout
from hf_slm.families import causal_lm_for_config
from hf_slm.modeling.hypothesis_rows import hypothesis_rows
from hf_slm.modeling.search_constraints import DecodingStatus, SearchConstraints, SentenceWords
from hf_slm.search.sampling import sample_trees
from hf_slm.tokenization.linearizers import top_down_actions

from tree_strategies import action_vocabulary_trees

LABELS = ["S", "NP", "VP", "PP"]
WORDS = ["the", "bird", "sings", "x"]
ALL_ACTIONS = [f"({label}" for label in LABELS] + [f"{label})" for label in LABELS] + WORDS
VOCAB = ActionVocabulary.from_action_sequences([ALL_ACTIONS])
UNK = VOCAB.layout.unk_token_id


def replay(grammar, prefix):
    state = grammar.start()
    for action in prefix:
        grammar.step(state, action)
    return state


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action_vocabulary_trees(labels=LABELS, words=WORDS, max_nodes=30), st.integers(0, 10**6),
       st.sampled_from(["tg", "choe_charniak"]), st.booleans())
def test_validation_and_search_constraints_agree_with_legal_actions(tree, seed, name, document_level):
    """For a random prefix of a random tree and EVERY possible next action: the vectorized validation accepts
    prefix + [action] exactly when legal_actions allows it, and the unconstrained search allows exactly the
    legal actions (less `<unk>`, which is never generated, and the root's closing before a first word)."""
    actions = top_down_actions(tree)
    vocab = ActionVocabulary.from_action_sequences([ALL_ACTIONS, actions])  # the strategy may add words
    grammar = get_grammar(name, vocab.layout, document_level=document_level)
    ids = vocab.encode(actions)
    prefix = ids[: 1 + np.random.default_rng(seed).integers(0, len(ids))]
    state = replay(grammar, prefix)
    legal = grammar.legal_actions(state)
    candidates = [prefix + [action] for action in range(len(vocab.tokens))]
    assert np.array_equal(grammar.valid_sequences(candidates, require_complete=False), legal)

    constraints = SearchConstraints(grammar)
    status = DecodingStatus.start(hypothesis_rows(grammar, [state]), [prefix[-1]], word=[state.num_terminals])
    allowed, _ = constraints.allowed(status, SentenceWords([[]], [100]))
    expected = legal.copy()
    expected[vocab.layout.unk_token_id] = False
    if state.num_terminals == 0:  # free generation: a tree has at least one word
        expected &= vocab.layout.kinds(np.arange(len(vocab.tokens))) != ActionKind.CLOSE_NT
    assert np.array_equal(allowed[0].numpy(), expected)


def test_forced_words_allow_only_the_next_piece_among_legal_terminals():
    grammar = get_grammar("tg", VOCAB.layout)
    state = replay(grammar, VOCAB.encode("(S (NP the".split()))
    bird = VOCAB.ids["bird"]
    status = DecodingStatus.start(hypothesis_rows(grammar, [state]), [VOCAB.ids["the"]], word=[1])
    words = SentenceWords([[[VOCAB.ids["the"]], [bird]]], [0])
    allowed, completing = SearchConstraints(grammar, max_nonterminals=5, max_consecutive_open=3).allowed(status, words)
    kinds = VOCAB.layout.kinds(np.arange(len(VOCAB.tokens)))
    allowed_terminals = np.flatnonzero(allowed[0].numpy() & (kinds == ActionKind.TERMINAL)).tolist()
    assert allowed_terminals == [bird]
    assert np.flatnonzero(completing[0].numpy()).tolist() == [bird]
    assert allowed[0, VOCAB.ids["NP)"]] and not allowed[0, VOCAB.ids["S)"]]  # only the innermost closes
    assert allowed[0].numpy()[kinds == ActionKind.OPEN_NT].all()


def test_sampled_trees_are_valid_for_every_grammar():
    for name in ("tg", "choe_charniak", "terminals"):
        config = config_for_grammar(name, vocab_size=len(VOCAB.tokens), hidden_size=16, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=32, **VOCAB.layout.to_dict())
        torch.manual_seed(0)
        model = causal_lm_for_config(config).eval()
        samples = sample_trees(model, num_samples=20, max_words=6, seed=0)
        grammar = get_grammar(name, VOCAB.layout)
        assert len(samples) == 20
        assert grammar.valid_sequences(samples).all(), [VOCAB.decode(s) for s in samples]
        for sample in samples:
            words = [i for i in sample if VOCAB.layout.kind(i) == ActionKind.TERMINAL]
            assert 1 <= len(words) <= 6 and UNK not in words


# ---- search defaults keep gold trees reachable ------------------------------------------------------------

def test_default_constraints_keep_gold_trees_reachable_and_paper003_settings_exclude_what_they_should():
    """On the shipped GUM sample: the default n_c / p_c let >= 99.9% of the gold trees through (all of them,
    measured), and each of paper 003's settings excludes exactly the trees a plain count says it must: a
    run of more than p_c opening NTs, or more NTs than words."""
    from hf_slm import SyntacticTokenizer, read_trees
    from hf_slm.search.beam import gold_tree_coverage
    from hf_slm.cli.commands import CONSTRAINT_SETTING_NAMES
    from hf_slm.modeling.generation_slm import CONSTRAINT_SETTINGS

    assert CONSTRAINT_SETTING_NAMES == tuple(CONSTRAINT_SETTINGS)
    sample = Path(hf_slm.__file__).parent / "sample_data" / "gum"
    trees = read_trees(sample / "dev.txt") + read_trees(sample / "test.txt")
    tokenizer = SyntacticTokenizer.train(read_trees(sample / "train.txt") + trees, vocab_size=2000)  # every label
    coverage, unreachable = gold_tree_coverage(tokenizer, trees)
    assert coverage >= 0.999, [str(trees[i]) for i in unreachable[:3]]

    layout = ActionLayout(**tokenizer.action_layout)
    counts = []  # (longest run of opening NTs, number of NTs, number of words) of each encoded gold tree
    for tree in trees:
        encoded = tokenizer(tree, return_word_starts=True)
        kinds = layout.kinds(encoded["input_ids"])
        run = longest = 0
        for kind in kinds:
            run = run + 1 if kind == ActionKind.OPEN_NT else 0
            longest = max(longest, run)
        counts.append((longest, int((kinds == ActionKind.OPEN_NT).sum()), sum(encoded["word_starts"])))
    for name, p_c in (("paper003-sg", 3), ("paper003-summaries", 5)):
        _, unreachable = gold_tree_coverage(tokenizer, trees, **CONSTRAINT_SETTINGS[name])
        expected = [i for i, (longest, nts, words) in enumerate(counts) if longest > p_c or nts > words]
        assert unreachable == expected and expected, name
