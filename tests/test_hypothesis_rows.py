"""Grammar states as rows of hypotheses: every fast path equals the incremental grammar, row by row.

Random walks branch, prune, reorder and join hypotheses as beam search does (select with repeated rows,
concat of two beams), and take random legal actions; at every round the fast rows and StateListRows (which
steps each hypothesis with grammar.step) must give the same legal actions, counters, completeness and new
positions (ids, kinds, what each predicts, coordinates, attended positions).
"""

import numpy as np
import pytest

from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import NEED_KINDS, UNREACHABLE, ActionKind
from hf_slm.families import grammar_class, grammar_names
from hf_slm.modeling.hypothesis_rows import HypothesisRows, StateListRows, hypothesis_rows

pytestmark = pytest.mark.slow  # conftest.py: scheduled first

LABELED = ActionVocabulary(["a", "b", "c"], ["S", "NP", "VP"])


def assert_rows_equal(fast, slow):
    assert np.array_equal(fast.legal_actions().numpy(), slow.legal_actions().numpy())
    for name in ("open_total", "closes_root", "complete", "positions"):
        assert np.array_equal(getattr(fast, name).numpy(), getattr(slow, name).numpy()), name
    # the fewest positions and pieces to complete, per next action kind (the search's length and word limits)
    assert np.array_equal(fast.completion_needs_after().numpy(), slow.completion_needs_after().numpy())


def assert_positions_equal(fast, slow):
    assert np.array_equal(fast.count, slow.count)
    valid = slow.valid
    for name in ("input_id", "kind", "predicts", "coordinate"):
        assert np.array_equal(getattr(fast, name)[valid], getattr(slow, name)[valid]), name
    width = max(fast.attended.shape[2], slow.attended.shape[2])
    pad = lambda a: np.pad(a, ((0, 0), (0, 0), (0, width - a.shape[2])), constant_values=-1)  # noqa: E731
    assert np.array_equal(pad(fast.attended)[valid], pad(slow.attended)[valid])


UNLABELLED = ActionVocabulary(["a", "b", "c"], ["X"])  # one `(` and one `)`: paper 003's trees


def _vocabulary_for(name):
    """The labelled vocabulary, or the unlabelled one for a grammar that refuses labels (paper 003's)."""
    try:
        get_grammar(name, LABELED.layout)
        return LABELED
    except ValueError:
        return UNLABELLED


def _has_fast_rows(name):
    if not issubclass(grammar_class(name).layout_class, type(LABELED.layout)):
        return False  # a grammar of another layout (the dependency grammars): tested in their own modules
    return get_grammar(name, _vocabulary_for(name).layout).rows_class is not None


# Every registered grammar with a fast form of its states (grammar.rows_class, asked of an instance: a property
# imports its module, which imports torch, and a subclass of the causal rules that changes them has none).
FAST_GRAMMARS = sorted(name for name in grammar_names() if _has_fast_rows(name))


def test_the_grammars_with_fast_rows_are_the_ones_of_bracketed_trees_with_grammars_rules():
    assert {"tg", "tg_txl_positions", "choe_charniak", "rnng", "gpt2-tree"} <= set(FAST_GRAMMARS)
    assert not {"terminals", "gpt2-token"} & set(FAST_GRAMMARS)  # words-only: their own legality


@pytest.mark.parametrize("grammar_name", FAST_GRAMMARS)
@pytest.mark.parametrize("document_level", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_fast_rows_equal_the_incremental_grammar(grammar_name, document_level, seed):
    vocabulary = _vocabulary_for(grammar_name)
    grammar = get_grammar(grammar_name, vocabulary.layout, document_level=document_level)
    random = np.random.default_rng(seed)
    start = [grammar.start() for _ in range(6)]
    slow, fast = StateListRows(grammar, start), hypothesis_rows(grammar, start)
    assert type(fast) is not StateListRows  # the fast path is what is tested here
    steps = 0
    for round_ in range(80):
        assert_rows_equal(fast, slow)
        legal = slow.legal_actions().numpy()
        alive = np.flatnonzero(legal.any(1))
        if not len(alive):
            break
        # branch and prune as a beam: some rows twice, some dropped, in a shuffled order
        rows = random.choice(alive, size=min(len(alive) * 2, 40), replace=True)
        if round_ % 7 == 3:  # join two beams, as the search does with pending word beams
            half = len(rows) // 2
            slow = HypothesisRows.concat([slow.select(rows[:half]), slow.select(rows[half:])])
            fast = HypothesisRows.concat([fast.select(rows[:half]), fast.select(rows[half:])])
        else:
            slow, fast = slow.select(rows), fast.select(rows)
        legal = legal[rows]
        # prefer closing brackets now and then, so that trees complete and documents go on
        weights = legal * np.where(np.arange(legal.shape[1]) >= vocabulary.layout.close_nt_start, 4.0, 1.0)
        actions = np.array([random.choice(len(w), p=w / w.sum()) for w in weights])
        slow, slow_positions = slow.step(actions)
        fast, fast_positions = fast.step(actions)
        assert_positions_equal(fast_positions, slow_positions)
        steps += len(actions)
    assert steps > 500  # the walk went deep enough to mean something


def test_a_grammar_without_a_fast_path_uses_its_states():
    """A words-only grammar has a legality of its own, and a subclass of the causal rules with positions of its own
    (the tests' toy family) is not what the causal fast form computes: both step their states."""
    import toy_family

    for grammar in (get_grammar("terminals", LABELED.layout), toy_family.DepthCausalRules(LABELED.layout)):
        assert type(hypothesis_rows(grammar, [grammar.start()])) is StateListRows


def _dependency_grammar():
    from helpers.dependency_toy_layout import grammar

    return grammar("arc_standard")








# The longest completion enumerated: the enumeration grows exponentially with it (at 8, the DTG and TG cases
# took 36 s and 23 s; at 6, 4 s each, and 25 to 49 of the 60 prefixes are still checked per grammar).
LONGEST = 6


def _completions(grammar, state, horizon):
    """(fewest positions, fewest pieces) over every way to complete `state` within `horizon` positions, by
    enumerating action sequences (one id per kind for `(` and word starts: labels and spellings do not change
    the structure; every arc, every continuation piece and every start of a bottom-up `)`); None if none fits."""
    if grammar.is_complete(state):
        return 0, 0
    if horizon <= 0:
        return None
    kinds = grammar.action_kinds
    legal = np.flatnonzero(grammar.legal_actions(state))
    continues = grammar.continues_word if grammar.continues_word is not None else np.zeros(len(kinds), bool)
    candidates = []
    for kind in np.unique(kinds[legal]):
        ids = legal[kinds[legal] == kind]
        if kind in (ActionKind.OPEN_NT, ActionKind.TERMINAL):
            ids = [group[0] for group in (ids[~continues[ids]], ids[continues[ids]]) if len(group)]
        candidates += [int(i) for i in ids]
    best = None
    for action in candidates:
        starts = [None]
        if grammar.takes_start and kinds[action] == ActionKind.CLOSE_NT:
            starts = [int(s) for s in grammar.legal_starts(state)]
        for start in starts:
            after = state.clone()
            added = len(grammar.step(after, action, check=False) if start is None else
                        grammar.step(after, action, check=False, start=start))
            rest = _completions(grammar, after, horizon - added) if added <= horizon else None
            if rest is None:
                continue
            found = (added + rest[0], int(kinds[action] == ActionKind.TERMINAL) + rest[1])
            best = found if best is None else (min(best[0], found[0]), min(best[1], found[1]))
    return best


def _random_prefix(grammar, random, most):
    """The state after `<s>` and up to `most - 1` random legal actions (fewer where the sequence completes),
    structure that reduces favoured so that prefixes stay completable within a small horizon."""
    kinds = grammar.action_kinds
    state = grammar.start()
    grammar.step(state, grammar.start_action_id)
    for _ in range(random.integers(0, most)):
        legal = np.flatnonzero(grammar.legal_actions(state))
        if not len(legal) or grammar.is_complete(state):
            break
        weights = np.where(np.isin(kinds[legal], [ActionKind.CLOSE_NT, ActionKind.RIGHT_ARC, ActionKind.LEFT_ARC]),
                           3.0, 1.0)
        action = int(random.choice(legal, p=weights / weights.sum()))
        start = None
        if grammar.takes_start and kinds[action] == ActionKind.CLOSE_NT:
            start = int(random.choice(grammar.legal_starts(state)))
        grammar.step(state, action, check=False) if start is None else grammar.step(state, action, False, start)
    return state


@pytest.mark.parametrize("grammar_name", ["tg", "dtg", "bi-dn-in-m", "nb-up-in-m"])
def test_completion_needs_equal_a_brute_force_search_on_random_prefixes(grammar_name):
    """grammar.completion_need (and completion_needs_after, per action kind) is the fewest positions and pieces
    that complete a random prefix, found by enumerating every continuation (within a horizon a little past the
    answer: fewer would have been found, more cannot be fewest)."""
    if grammar_name == "dtg":
        grammar = _dependency_grammar()
    else:
        vocab = LABELED if grammar_name == "tg" else ActionVocabulary(["a", "b", "c"], [""])
        grammar = get_grammar(grammar_name, vocab.layout)
    random = np.random.default_rng(0)
    kinds = grammar.action_kinds
    checked = 0
    for _ in range(60):
        state = _random_prefix(grammar, random, 12)
        if grammar.is_complete(state):
            continue
        positions, pieces = grammar.completion_need(state)
        if positions > LONGEST:
            continue  # the enumeration grows exponentially with the horizon
        assert _completions(grammar, state, positions + 1) == (positions, pieces), (grammar_name, state.num_actions)
        assert _completions(grammar, state, positions - 1) is None  # nothing shorter completes it
        # per action kind: the kind's own positions and piece, then the fewest to complete after it
        needs = grammar.completion_needs_after(state)
        legal = grammar.legal_actions(state)
        for row, kind in enumerate(NEED_KINDS):
            ids = np.flatnonzero(legal & (kinds == kind))
            if not len(ids):
                assert needs[row, 0] == UNREACHABLE
                continue
            best = None
            for action in ids:
                after = state.clone()
                starts = grammar.legal_starts(state)[:1].tolist() if getattr(grammar, "takes_start", False) and \
                    kind == ActionKind.CLOSE_NT else [None]
                added = len(grammar.step(after, int(action), False) if starts[0] is None else
                            grammar.step(after, int(action), False, starts[0]))
                rest = _completions(grammar, after, min(needs[row, 0], positions + 4) + 1 - added)
                if rest is not None:
                    found = (added + rest[0], int(kind == ActionKind.TERMINAL) + rest[1])
                    best = found if best is None else (min(best[0], found[0]), min(best[1], found[1]))
            assert best == (needs[row, 0], needs[row, 1]), (grammar_name, kind.name)
        checked += 1
    assert checked >= 15, checked  # enough prefixes were short enough to enumerate


@pytest.mark.parametrize("name, system, variant", [("dtg", "arc_standard", "paper"), ("dtg", "arc_eager", "paper"),
                                                   ("dtg", "arc_swift", "paper"), ("dtg", "arc_standard", "reference"),
                                                   ("txl_trans", "arc_standard", None)])
def test_dependency_needs_step_without_rows_to_the_same_states(name, system, variant):
    """A dependency grammar's completion needs step without building attention rows (_step_for_need): on random
    prefixes of every transition system and variant, and TXL (trans), the needs equal those of full steps, action
    kind by kind."""
    from helpers.dependency_toy_layout import grammar as dependency_grammar
    from helpers.dependency_toy_layout import layout

    def build():
        return get_grammar(name, layout(system)) if variant is None else dependency_grammar(system, variant)

    grammar, full = build(), build()
    full._step_for_need = lambda state, action: full.step(state, action, check=False)  # the protocol's own
    random = np.random.default_rng(1)
    compared = 0
    for _ in range(40):
        state = _random_prefix(grammar, random, 14)
        if not grammar.is_complete(state):
            assert np.array_equal(grammar.completion_needs_after(state), full.completion_needs_after(state))
            compared += 1
    assert compared >= 20
