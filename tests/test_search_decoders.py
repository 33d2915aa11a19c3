"""The beam search's decoder interface and pruning rules.

- A toy recurrent decoder (a GRU over action ids, nothing of the Transformer) plugs into the search
  unchanged: the search finds its exact log p(x) on an exhaustive beam, and every tree's score is the toy
  model's own joint log-probability (so rows were advanced, selected and concatenated consistently).
- On non-exhaustive beams, the search equals a plain reference written from the description of
  rnng-pytorch's rule (one hypothesis at a time, the model re-run on every prefix): action beam, fast track,
  a word ends when `beam_size` successors reached it within the action beam (fast-tracked ones not counted)
  or the word beam holds min(2b, b + 5 fast_track), marginals after or before pruning; for TG, hybrid heads,
  distinct COMPOSE attention and TXL (CC).
"""

import math

import pytest
import torch

from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.families import get_grammar
from hf_slm.modeling.hypothesis_rows import StateListRows
from hf_slm.modeling.search_constraints import DecodingStatus, SearchConstraints, SentenceWords
from hf_slm.modeling.search_decoders import SearchDecoder

from helpers.beam_search_models import SENTENCE, VOCAB, all_trees, tiny_model


class ToyRecurrentDecoder(SearchDecoder):
    """A GRU cell over action ids; a state is the hidden vectors of the rows [H, 8]."""

    def __init__(self, vocab_size, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab_size, 8)
        self.cell = torch.nn.GRUCell(8, 8)
        self.out = torch.nn.Linear(8, vocab_size)

    @torch.no_grad()
    def _step(self, hidden, actions):
        hidden = self.cell(self.embed(actions), hidden)
        return hidden, torch.log_softmax(self.out(hidden), dim=-1)

    def _start(self, sequences, steps):
        hidden = torch.zeros(len(sequences), 8)
        for column in range(len(sequences[0])):  # one `<s>` (or equally long prefixes) per row here
            hidden, log_probs = self._step(hidden, torch.tensor([s[column] for s in sequences]))
        return hidden, log_probs

    def _advance(self, state, rows, actions, steps):
        return self._step(state[rows], actions)

    def select(self, state, rows):
        return state[rows]

    def concat(self, states):
        return torch.cat(states)

    def joint_log_prob(self, ids):
        hidden, log_probs = self._start([ids[:1]], None)
        total = 0.0
        for action in ids[1:]:
            total += float(log_probs[0, action])
            hidden, log_probs = self._step(hidden, torch.tensor([action]))
        return total


def test_a_recurrent_decoder_fits_the_search_unchanged():
    model = tiny_model("tg")  # gives the search its grammar and vocabulary only
    toy = ToyRecurrentDecoder(len(VOCAB.tokens))
    exhaustive = BeamSearchOptions(beam_size=5000, word_beam_size=5000, fast_track=5, max_nonterminals=3, num_trees=3)
    result = WordSynchronousBeamSearch(model, exhaustive, decoder=toy).search([SENTENCE])[0]
    trees = all_trees(get_grammar("tg", VOCAB.layout), SENTENCE, max_nonterminals=3)
    joint = torch.tensor([toy.joint_log_prob(ids) for ids in trees], dtype=torch.float64)
    assert result.log_prob == pytest.approx(float(torch.logsumexp(joint, 0)), abs=1e-5)
    assert result.trees[0][0] == trees[int(joint.argmax())]

    # A model that brings its own decoder (SOM will) gets it without being named.
    model.search_decoder = lambda use_cache=True: toy
    narrow = BeamSearchOptions(beam_size=6, word_beam_size=3, fast_track=1, num_trees=3)
    sentences = [SENTENCE, SENTENCE[:2], SENTENCE + SENTENCE[:1]]
    search = WordSynchronousBeamSearch(model, narrow)
    assert search.decoder is toy
    for words, found in zip(sentences, search.search(sentences)):
        for ids, score in found.trees:
            assert [i for i in ids if VOCAB.layout.kind(i).name == "TERMINAL"] == [p for w in words for p in w]
            assert score == pytest.approx(toy.joint_log_prob(ids), abs=1e-5)


def reference_search(model, words, options):
    """Forced-word beam search for one sentence, one hypothesis at a time (see the module docstring).
    Returns (log p(x) bound, surprisals, best tree, whether any successor was fast-tracked)."""
    grammar = get_grammar(model.config.grammar, VOCAB.layout)
    constraints = SearchConstraints(grammar, max_nonterminals=options.max_nonterminals,
                                    max_consecutive_open=options.max_consecutive_open,
                                    max_nonterminals_per_word=options.max_nonterminals_per_word)
    table = SentenceWords([words], [0])
    b, cap = options.beam_size, min(2 * options.beam_size, options.beam_size + 5 * options.fast_track)

    def log_probs(ids):
        with torch.no_grad():
            return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)

    state = grammar.start()
    grammar.step(state, VOCAB.layout.bos_token_id)
    start = (0.0, [VOCAB.layout.bos_token_id], DecodingStatus.start(StateListRows(grammar, [state]), [VOCAB.layout.bos_token_id]))
    frontier, marginals, finished, fast_tracked = [start], [0.0], [], False
    while frontier:
        reached = []  # (score, ids, status, fast-tracked)
        active = frontier
        while active:
            candidates = []
            for score, ids, status in active:
                allowed, completing = constraints.allowed(status, table)
                scores = log_probs(ids)
                for action in torch.nonzero(allowed[0]).squeeze(1).tolist():
                    candidates.append((score + float(scores[action]), ids, status, action, bool(completing[0, action])))
            candidates.sort(key=lambda c: -c[0])
            top, rest = candidates[:b], candidates[b:]
            wanted = options.fast_track - sum(c[4] for c in top)
            fast = [c for c in rest if c[4]][: max(wanted, 0)]
            fast_tracked |= bool(fast)
            going_on = []
            for candidate in top + fast:
                score, ids, status, action, completes = candidate
                child = status.grammar_rows.states[0].clone()
                grammar.step(child, action)
                actions = torch.tensor([action])
                counters = constraints.counters_after(status, actions, table)
                child_status = DecodingStatus(StateListRows(grammar, [child]), status.sentence, actions, **counters, open_before=status.open_before)
                item = (score, ids + [action], child_status)
                if grammar.is_complete(child):
                    finished.append(item)
                if completes:
                    reached.append(item + (candidate in fast,))
                elif not grammar.is_complete(child):
                    going_on.append(item)
            in_beam = sum(1 for r in reached if not r[3])
            active = going_on if in_beam < b and len(reached) < cap else []
        if not reached:
            break
        reached = sorted(reached, key=lambda r: -r[0])[:cap]
        kept = reached[: options.word_beam_size]
        scored = kept if options.marginal == "after_pruning" else reached
        marginals.append(math.log(sum(math.exp(r[0]) for r in scored)))
        frontier = [r[:3] for r in kept if not grammar.is_complete(r[2].grammar_rows.states[0])]
    ranked = sorted(finished, key=lambda f: -f[0])[: options.word_beam_size]
    log_prob = math.log(sum(math.exp(f[0]) for f in ranked))
    surprisals = [marginals[t - 1] - marginals[t] for t in range(1, len(words) + 1)]
    return log_prob, surprisals, ranked[0][1], fast_tracked


@pytest.mark.parametrize("grammar_name, overrides", [
    ("tg", {}),
    ("tg", {"num_unrestricted_heads": 1}),
    ("tg", {"distinct_compose_attention": True}),
    ("choe_charniak", {}),
])
@pytest.mark.parametrize("settings", [
    dict(beam_size=4, word_beam_size=2, fast_track=1),
    dict(beam_size=4, word_beam_size=2, fast_track=1, marginal="before_pruning"),
    dict(beam_size=3, word_beam_size=1, fast_track=2, max_consecutive_open=2),
])
def test_pruning_follows_the_reference_on_narrow_beams(grammar_name, overrides, settings):
    model = tiny_model(grammar_name, seed=3, **overrides)
    options = BeamSearchOptions(**settings)
    sentences = [SENTENCE, SENTENCE + SENTENCE[:2]]
    results = WordSynchronousBeamSearch(model, options).search(sentences)
    any_fast = False
    for words, result in zip(sentences, results):
        log_prob, surprisals, best, fast_tracked = reference_search(model, words, options)
        any_fast |= fast_tracked
        assert result.log_prob == pytest.approx(log_prob, abs=1e-4)
        assert result.surprisals == pytest.approx(surprisals, abs=1e-4)
        assert result.trees[0][0] == best
    assert any_fast  # the case exercises the fast track


@pytest.mark.parametrize("overrides", [{}, {"num_unrestricted_heads": 1}])
def test_the_transformer_decoder_reads_only_what_new_positions_attend(overrides, monkeypatch):
    """TG: each new position reads its stack (what its mask row allows), not the whole prefix; with
    unrestricted heads it must read every earlier position."""
    from hf_slm.modeling import search_decoders

    read_widths, calls = [], []  # per model call: positions read per row; (widest mask row, longest prefix)

    class RecordingCache(search_decoders._GatheredCache):
        def __init__(self, pool, reads, new_slots):
            super().__init__(pool, reads, new_slots)
            read_widths.append(reads.shape[1])

    original = search_decoders.TransformerSearchDecoder._advance

    def recording_advance(self, state, rows, actions, steps):
        widest = int((steps.attended >= 0).sum(2).max())
        longest = int((state.lengths[rows.numpy()] + steps.count).max())
        calls.append((widest, longest))
        return original(self, state, rows, actions, steps)

    monkeypatch.setattr(search_decoders, "_GatheredCache", RecordingCache)
    monkeypatch.setattr(search_decoders.TransformerSearchDecoder, "_advance", recording_advance)
    model = tiny_model("tg", seed=4, **overrides)
    WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=8, word_beam_size=3)).search([SENTENCE + SENTENCE])
    assert len(read_widths) == len(calls) > 10
    if overrides:
        assert read_widths == [longest for _, longest in calls]
    else:
        assert read_widths == [widest for widest, _ in calls]
        assert any(width < longest for width, (_, longest) in zip(read_widths, calls))  # composed children are not read
