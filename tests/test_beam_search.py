"""Word-synchronous beam search: exact on exhaustive beams, consistent across batching and caching, legal."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import hf_slm
from hf_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.families.action_vocab import ActionVocabulary
from hf_slm.families import get_grammar
from hf_slm.modeling.grammars import ActionKind
from hf_slm.search.scoring import action_log_probs, joint_log_probs

from conftest import ISOLATION_PREAMBLE, save_tiny_checkpoint
from helpers.cli import run_cli_in_process
from helpers.beam_search_models import SENTENCE, VOCAB, all_trees, tiny_model
from helpers.ptb_trees import TREES


@pytest.mark.parametrize("grammar_name", ["tg", "choe_charniak", "rnng"])  # rnng: a recurrent family's decoder
@pytest.mark.parametrize("use_cache", [True, False])
def test_exhaustive_beam_equals_brute_force(grammar_name, use_cache):
    model = tiny_model(grammar_name)
    grammar = get_grammar(grammar_name, VOCAB.layout)
    trees = all_trees(grammar, SENTENCE, max_nonterminals=3)
    assert len(trees) > 100
    joint = joint_log_probs(model, trees)
    exact = float(torch.logsumexp(torch.tensor(joint), 0))
    options = BeamSearchOptions(beam_size=5000, word_beam_size=5000, fast_track=5, max_nonterminals=3,
                                num_trees=5, use_cache=use_cache)
    result = WordSynchronousBeamSearch(model, options).search([SENTENCE])[0]
    assert result.log_prob == pytest.approx(exact, abs=1e-5)
    # Surprisals telescope: with the end-of-sentence term they add up to -log p(x).
    assert sum(result.surprisals) + result.end_surprisal == pytest.approx(-result.log_prob, abs=1e-6)
    assert len(result.surprisals) == 3
    # The best trees are the brute force's best trees, with their joint log-probabilities.
    order = np.argsort(joint)[::-1]
    assert [ids for ids, _ in result.trees] == [trees[i] for i in order[:5]]
    assert [lp for _, lp in result.trees] == pytest.approx([joint[i] for i in order[:5]], abs=1e-5)


def test_marginals_are_prefix_probabilities_on_an_exhaustive_beam():
    """After word 1, the beam holds every way to reach it: its mass is the sum over trees of the prefix."""
    model = tiny_model("tg")
    options = BeamSearchOptions(beam_size=5000, word_beam_size=5000, fast_track=5, max_nonterminals=3)
    result = WordSynchronousBeamSearch(model, options).search([SENTENCE])[0]
    grammar = get_grammar("tg", VOCAB.layout)
    trees = all_trees(grammar, SENTENCE, max_nonterminals=3)
    # Prefixes of every tree up to (and including) its first word, without duplicates.
    prefixes = sorted({tuple(t[: t.index(SENTENCE[0][0]) + 1]) for t in trees})
    total = []  # log p of each prefix: the HF contract scores prefixes (logits[:, t] predicts action t + 1)
    for prefix in prefixes:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prefix])).logits[0]
        log_probs = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(prefix[1:])[:, None])
        total.append(float(log_probs.sum()))
    assert -result.surprisals[0] == pytest.approx(float(torch.logsumexp(torch.tensor(total), 0)), abs=1e-5)


def test_results_are_well_formed_trees_over_the_input_words():
    model = tiny_model("tg", seed=1)
    sentences = [SENTENCE, SENTENCE[:1], [SENTENCE[2], SENTENCE[0], SENTENCE[1], SENTENCE[0]]]
    starts = [token in ("a", "b1", "c") for token in VOCAB.tokens]  # b2 continues a word
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=20, word_beam_size=5, num_trees=5),
                                       word_start_mask=starts)
    results = search.search(sentences)
    grammar = get_grammar("tg", VOCAB.layout)
    for words, result in zip(sentences, results):
        assert 1 <= len(result.trees) <= 5
        for ids, log_prob in result.trees:
            grammar.validate(ids)
            terminals = [i for i in ids if grammar.layout.kind(i) == ActionKind.TERMINAL]
            assert terminals == [p for word in words for p in word]
            assert log_prob == pytest.approx(joint_log_probs(model, [ids])[0], abs=1e-4)


@pytest.mark.parametrize("grammar_name, options", [
    ("tg", {"num_unrestricted_heads": 1}),
    ("tg", {"distinct_compose_attention": True}),  # the cached path once crashed here (it lost the kinds)
    ("choe_charniak", {"num_unrestricted_heads": 1}),
])
def test_batch_equals_one_at_a_time_and_cache_equals_reencoding(grammar_name, options):
    """A Transformer's numbers move in the last bits with the rows of its batch: the trees are the same, the numbers
    close (exactly the same with a decoder whose rows are independent: the test after this one)."""
    model = tiny_model(grammar_name, seed=2, **options)
    sentences = [SENTENCE, SENTENCE[:2], [SENTENCE[2], SENTENCE[1]], SENTENCE + SENTENCE]
    options = dict(beam_size=12, word_beam_size=4, fast_track=2, num_trees=3)
    together = WordSynchronousBeamSearch(model, BeamSearchOptions(**options)).search(sentences)
    reencoded = WordSynchronousBeamSearch(model, BeamSearchOptions(use_cache=False, **options)).search(sentences)
    for index, sentence in enumerate(sentences):
        alone = WordSynchronousBeamSearch(model, BeamSearchOptions(**options)).search([sentence])[0]
        for other in (together[index], reencoded[index]):
            assert other.log_prob == pytest.approx(alone.log_prob, abs=1e-5)
            assert other.surprisals == pytest.approx(alone.surprisals, abs=1e-5)
            assert other.end_surprisal == pytest.approx(alone.end_surprisal, abs=1e-5)
            assert [ids for ids, _ in other.trees] == [ids for ids, _ in alone.trees]
            assert [score for _, score in other.trees] == pytest.approx([score for _, score in alone.trees], abs=1e-5)


# Sentences of 1 to 7 words ("b" is two pieces), so that they end at different word steps.
MANY = [[SENTENCE[i] for i in words] for words in
        [(0,), (1, 2, 0, 1, 2, 0, 1), (2, 1, 0), (0, 0), (1, 0, 2, 2, 1), (2, 2, 1, 0), (0, 1, 2, 0, 1, 2), (1,),
         (2, 0, 1), (1, 1), (0, 2, 1, 1, 0, 2, 0), (2, 1, 0, 1, 2)]]


@pytest.mark.parametrize("options", [
    dict(beam_size=10, word_beam_size=3, fast_track=2, num_trees=3),
    dict(beam_size=20, word_beam_size=6, fast_track=5, num_trees=6, marginal="before_pruning"),
    dict(beam_size=6, word_beam_size=6, fast_track=1, num_trees=6, max_consecutive_open=2),
], ids=["fast-track", "marginal-before-pruning", "word-beam-as-wide"])
def test_many_sentences_in_one_search_find_exactly_what_each_finds_alone(options, monkeypatch):
    """Sentences of different lengths, ending at different steps, searched in one batch: each one's trees, their scores,
    its surprisals, log p(x) and the marginal after each word are, bit for bit, those of a search of it alone. The
    decoder's numbers depend on each row alone (BigramDecoder: a Transformer's move in the last bits with the batch)
    and tie often (quarters), so ties in the action beam, the fast track and the word beam are broken alike."""
    from helpers.beam_search_models import BigramDecoder

    model = tiny_model("tg")  # the grammar and vocabulary; the decoder scores
    starts = [token in ("a", "b1", "c") for token in VOCAB.tokens]
    marginals, fast_tracked = [], []
    by_sentence = WordSynchronousBeamSearch._marginals_by_sentence
    monkeypatch.setattr(WordSynchronousBeamSearch, "_marginals_by_sentence",
                        staticmethod(lambda steps, count: marginals.append(by_sentence(steps, count)) or marginals[-1]))
    select = WordSynchronousBeamSearch._select

    def selecting(self, *arguments):
        picked = select(self, *arguments)
        fast_tracked.append(int(picked[2].sum()))
        return picked

    monkeypatch.setattr(WordSynchronousBeamSearch, "_select", selecting)

    def search(sentences):
        decoder = BigramDecoder(len(VOCAB.tokens), seed=3)
        found = WordSynchronousBeamSearch(model, BeamSearchOptions(**options), word_start_mask=starts,
                                          decoder=decoder).search(sentences)
        return [(r.trees, r.surprisals, r.end_surprisal, r.log_prob, m) for r, m in zip(found, marginals[-1])]

    together = search(MANY)
    assert sum(fast_tracked) > 0  # the fast track admitted successors
    assert len({len(m) for *_, m in together}) > 3  # the sentences' word steps: they ended at different steps
    assert any(len({score for _, score in trees}) < len(trees) for trees, *_ in together)  # tied trees
    for sentence, found in zip(MANY, together):
        assert search([sentence])[0] == found


def test_many_prompts_in_one_generation_find_exactly_what_each_finds_alone():
    """Free generation (beam) after prompts of different lengths: the same exactness, generated words included."""
    from helpers.beam_search_models import BigramDecoder

    model = tiny_model("tg")
    starts = [token in ("a", "b1", "c") for token in VOCAB.tokens]
    prompts = [[], MANY[2], MANY[3], MANY[0]]

    def generate(chosen):
        decoder = BigramDecoder(len(VOCAB.tokens), seed=4)
        search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=10, word_beam_size=4, num_trees=4),
                                           word_start_mask=starts, decoder=decoder)
        return search.generate(chosen, max_new_words=3)

    together = generate(prompts)
    assert [generate([prompt])[0] for prompt in prompts] == together


def test_the_best_of_each_row_are_a_stable_sorts_first_whatever_the_padding():
    """The action beam's top-k (generation_slm._best) keeps, of equal scores, the earlier columns, best first, as a
    stable descending sort: the same hypotheses for a sentence whether its row is padded by the others' (-inf) or not."""
    from hf_slm.modeling.generation_slm import _best

    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        width = int(torch.randint(1, 40, (1,), generator=generator))
        row = (torch.randint(-6, 1, (width,), generator=generator) / 2).float()  # many ties
        row[torch.rand(width, generator=generator) < 0.2] = float("-inf")
        k = int(torch.randint(1, width + 1, (1,), generator=generator))
        expected = torch.sort(row, descending=True, stable=True)
        finite = torch.isfinite(expected.values[:k])
        for padding in (0, 1, 7, 50):
            values = torch.cat([row, torch.full((padding,), float("-inf"))])[None].repeat(3, 1)
            best, columns = _best(values, k)
            assert torch.equal(best[0][finite], expected.values[:k][finite])
            assert torch.equal(columns[0][finite], expected.indices[:k][finite])
    plain = torch.tensor([[3.0, 1.0, 2.0, 0.5]])  # no ties: torch.topk's own answer
    assert [t.tolist() for t in _best(plain, 2)] == [t.tolist() for t in torch.topk(plain, 2)]


def test_each_sentences_marginal_is_the_logsumexp_of_its_own_scores():
    """The word beams' marginals, all sentences at once (_segment_logsumexp), are bit for bit torch.logsumexp of each
    sentence's taken scores alone, for any mix of sizes: what a search of the sentence alone records."""
    generator = torch.Generator().manual_seed(1)
    for _ in range(50):
        count = int(torch.randint(1, 70, (1,), generator=generator))
        sizes = torch.randint(0, 40, (count,), generator=generator)
        taken = torch.minimum(sizes, torch.randint(1, 40, (count,), generator=generator))
        values = torch.randn(int(sizes.sum()), generator=generator, dtype=torch.float64) * 5 - 30
        sentences, marginals = WordSynchronousBeamSearch._segment_logsumexp(values, sizes, taken)
        assert sentences.tolist() == [s for s in range(count) if sizes[s] > 0]
        first = (torch.cumsum(sizes, 0) - sizes).tolist()
        expected = [float(torch.logsumexp(values[first[s] : first[s] + int(taken[s])], 0)) for s in sentences.tolist()]
        assert marginals.tolist() == expected


def test_terminals_model_surprisals_are_exact():
    vocab = ActionVocabulary(["a", "b1", "b2", "c"], [])
    model = tiny_model("terminals", vocab=vocab)
    words = [[vocab.ids["a"]], [vocab.ids["b1"], vocab.ids["b2"]], [vocab.ids["c"]]]
    result = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=5, word_beam_size=5)).search([words])[0]
    ids = [1] + [p for w in words for p in w] + [2]
    per_action = action_log_probs(model, [ids])[0]
    assert result.log_prob == pytest.approx(per_action.sum(), abs=1e-5)
    assert result.surprisals == pytest.approx([-per_action[0], -(per_action[1] + per_action[2]), -per_action[3]], abs=1e-5)
    assert result.end_surprisal == pytest.approx(-per_action[4], abs=1e-5)


def test_sampled_generation_never_takes_an_illegal_action():
    model = tiny_model("tg", seed=3)
    grammar = get_grammar("tg", VOCAB.layout)
    start_mask = [False] * len(VOCAB.tokens)
    for word in ("a", "b1", "c"):
        start_mask[VOCAB.ids[word]] = True  # b2 only continues b1
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=10, word_beam_size=5, max_consecutive_open=2),
                                       word_start_mask=start_mask)
    steps = 0
    prompts = [[], SENTENCE[:1]]
    for prompt, per_prompt in zip(prompts, search.generate(prompts, max_new_words=6, top_k=5, num_samples=150, seed=0)):
        for ids, _ in per_prompt:
            grammar.validate(ids)  # raises at the first illegal action
            steps += len(ids) - 1
            for previous, current in zip(ids, ids[1:]):
                if current == VOCAB.ids["b2"]:
                    assert grammar.layout.kind(previous) == ActionKind.TERMINAL
            opens = np.array([grammar.layout.kind(i) == ActionKind.OPEN_NT for i in ids])
            runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], opens, [0]]))))[::2]
            assert runs.max(initial=0) <= 2  # p_c
            words = sum(1 for i in ids if start_mask[i])
            assert len(prompt) + 1 <= words <= len(prompt) + 6  # the prompt, then 1 to max_new_words new words
            terminals = [i for i in ids if grammar.layout.kind(i) == ActionKind.TERMINAL]
            assert terminals[: len(prompt)] == [piece for word in prompt for piece in word]
    assert steps > 2000


def test_beam_generation_returns_complete_trees_continuing_the_prompt():
    model = tiny_model("choe_charniak", seed=4)
    grammar = get_grammar("choe_charniak", VOCAB.layout)
    prompt = torch.tensor([[1, VOCAB.ids["c"], VOCAB.ids["a"]]])
    output = model.generate(prompt, num_beams=3, num_return_sequences=2, max_new_tokens=4)
    assert output.shape[0] == 2
    for row in output.tolist():
        ids = [i for i in row if i != VOCAB.layout.pad_token_id]
        grammar.validate(ids)
        terminals = [i for i in ids if grammar.layout.kind(i) == ActionKind.TERMINAL]
        assert terminals[:2] == [VOCAB.ids["c"], VOCAB.ids["a"]]


def test_terminals_model_keeps_standard_generate():
    vocab = ActionVocabulary(["a", "b", "c"], [])
    model = tiny_model("terminals", vocab=vocab)
    output = model.generate(torch.tensor([[1, vocab.ids["a"]]]), max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert output.shape == (1, 7) or output[0, -1] == vocab.layout.eos_token_id
    # Greedy decoding: each new token is the argmax of a full forward over the prefix.
    ids = output[0].tolist()
    for k in range(2, len(ids)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids[:k]])).logits
        assert int(logits[0, -1].argmax()) == ids[k]


def test_bad_options_and_inputs():
    model = tiny_model("tg")
    with pytest.raises(ValueError, match="word_beam_size \\(10\\) cannot be larger than beam_size \\(5\\)"):
        BeamSearchOptions(beam_size=5, word_beam_size=10).check()
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        BeamSearchOptions(beam_size=0).check()
    with pytest.raises(ValueError, match="marginal must be"):
        BeamSearchOptions(marginal="during").check()
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=5, word_beam_size=2))
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        search.search([SENTENCE, []])
    with pytest.raises(ValueError, match="max_new_words must be a positive integer"):
        search.generate([[]], max_new_words=0)
    with pytest.raises(ValueError, match="a prompt must be words"):
        model.generate(torch.tensor([[1, VOCAB.layout.open_nt_start]]))
    with pytest.raises(ValueError, match="cannot honour repetition_penalty=1.5"):
        model.generate(torch.tensor([[1, VOCAB.ids["a"]]]), repetition_penalty=1.5)


# ---- through a tokenizer, the CLI, and a checkpoint loaded without hf_slm ---------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("tg"), TREES)


def test_score_api_in_bits_and_unknown_words(checkpoint):
    _, model, tokenizer = checkpoint
    nats = hf_slm.score(model, tokenizer, ["the bird sings .", ["I", "like", "it"]], beam_size=20, word_beam_size=5, progress=False)
    bits = hf_slm.score(model, tokenizer, ["the bird sings ."], bits=True, beam_size=20, word_beam_size=5, progress=False)
    assert bits[0]["surprisals"] == pytest.approx([s / np.log(2) for s in nats[0]["surprisals"]])
    assert nats[0]["words"] == ["the", "bird", "sings", "."]
    assert sum(nats[0]["surprisals"]) + nats[0]["end_surprisal"] == pytest.approx(-nats[0]["log_prob"])
    assert hf_slm.parse_tree(nats[1]["tree"]).leaves() == ["I", "like", "it"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = hf_slm.score(model, tokenizer, ["the Ωbird"], beam_size=10, word_beam_size=5, progress=False)
    assert len(caught) == 1 and "Ωbird" in str(caught[0].message)
    assert hf_slm.parse_tree(result[0]["tree"]).leaves() == ["the", "Ωbird"]  # the user's word, not its <unk> pieces


def test_cli_parse_score_generate(checkpoint):
    directory, _, _ = checkpoint
    parsed = run_cli_in_process("parse", "--model", directory, "--beam-size", "20", "--word-beam-size", "5",
                                "the bird sings .")
    assert parsed.returncode == 0, parsed.stderr
    assert hf_slm.parse_tree(parsed.stdout.strip()).leaves() == ["the", "bird", "sings", "."]
    scored = run_cli_in_process("score", "--model", str(directory), "--bits", "I like it", "the dog barks")
    assert scored.returncode == 0, scored.stderr
    lines = [json.loads(line) for line in scored.stdout.splitlines()]
    assert [line["words"] for line in lines] == [["I", "like", "it"], ["the", "dog", "barks"]]
    assert all(len(line["surprisals"]) == len(line["words"]) and line["log_prob"] < 0 for line in lines)
    generated = run_cli_in_process("generate", "--model", directory, "--prompt", "the", "--num-beams", "2",
                                   "--num-trees", "2", "--max-new-words", "3")
    assert generated.returncode == 0, generated.stderr
    trees = generated.stdout.splitlines()
    assert len(trees) == 2 and all(hf_slm.parse_tree(t).leaves()[0] == "the" for t in trees)
    sampled = run_cli_in_process("generate", "--model", directory, "--top-k", "2", "--seed", "0",
                                 "--max-new-words", "4")
    assert sampled.returncode == 0 and hf_slm.parse_tree(sampled.stdout.strip()).leaves()
    empty = run_cli_in_process("parse", "--model", str(directory), "")  # left out, named; exit 1
    assert empty.returncode == 1 and empty.stdout == "\n" and "sentence 1 is empty" in empty.stderr
    stopped = run_cli_in_process("parse", "--model", str(directory), "--stop-on-error", "")
    assert stopped.returncode == 2 and "sentence 1 is empty" in stopped.stderr


CHILD = ISOLATION_PREAMBLE + r'''
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
prompt = tokenizer(["the"], is_split_into_words=True, return_tensors="pt")["input_ids"]
out = model.generate(prompt, num_beams=2, num_return_sequences=2, max_new_tokens=3, tokenizer=tokenizer,
                     beam_options={"fast_track": 2})
words = [tokenizer(w, is_split_into_words=True, add_special_tokens=False)["input_ids"] for w in ["I", "like", "it"]]
result = model.word_synchronous_beam_search([words], beam_size=20, word_beam_size=5,
                                            word_start_mask=tokenizer.word_start_mask)[0]
print(json.dumps({"generated": out.tolist(), "log_prob": result.log_prob, "tree": result.trees[0][0],
                  "module": type(model).__module__}))
'''


def test_beam_search_through_remote_code_without_hf_slm(checkpoint, tmp_path):
    directory, model, tokenizer = checkpoint
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), PYTHONPATH="")
    result = subprocess.run([sys.executable, str(script), str(directory)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    child = json.loads(result.stdout.strip().splitlines()[-1])
    assert child["module"].startswith("transformers_modules")
    prompt = tokenizer(["the"], is_split_into_words=True, return_tensors="pt")["input_ids"]
    expected = model.generate(prompt, num_beams=2, num_return_sequences=2, max_new_tokens=3, tokenizer=tokenizer,
                              beam_options={"fast_track": 2})
    assert child["generated"] == expected.tolist()
    words = [tokenizer(w, is_split_into_words=True, add_special_tokens=False)["input_ids"] for w in ["I", "like", "it"]]
    local = model.word_synchronous_beam_search([words], beam_size=20, word_beam_size=5,
                                               word_start_mask=tokenizer.word_start_mask)[0]
    assert child["log_prob"] == pytest.approx(local.log_prob, abs=1e-5)
    assert child["tree"] == local.trees[0][0]


@pytest.mark.parametrize("bare_start", [False, True])
def test_free_generation_after_a_long_prefix_stays_within_the_model_length(bare_start):
    """A document-level TG reads at most max_sequence_length positions: sampled after a prefix that leaves little
    room, every hypothesis keeps room to close its tree (the search allows only actions after which it still
    can), so sampling never asks the model to read more (backbone.SequenceTooLong) and every sample fits. With
    `bare_start`, "a" is a bare word start (SentencePiece's lone "\u2581") that a continuation piece ("b2") must
    follow: its need counts that piece too."""
    grammar = get_grammar("tg", VOCAB.layout, document_level=True)
    a, c = VOCAB.ids["a"], VOCAB.ids["c"]
    s, np_ = VOCAB.layout.open_nt_start, VOCAB.layout.open_nt_start + 1
    close = VOCAB.layout.closing_id_for
    sentence = [s, np_, a, c, close(np_), a, close(s)]
    prefix = [VOCAB.layout.bos_token_id] + sentence * 3
    prefix_positions = int(grammar.batch([prefix])["lengths"][0])
    limit = prefix_positions + 9  # room for a few words and brackets, not for what a free sampler would take
    model = tiny_model("tg", seed=3, document_level=True, max_sequence_length=limit)
    pieces = {}
    if bare_start:
        pieces = dict(word_start_mask=[token != "b2" for token in VOCAB.tokens], incomplete_word_ids=[a])
    search = WordSynchronousBeamSearch(model, BeamSearchOptions(beam_size=10, word_beam_size=5), **pieces)
    samples = search.generate([[], []], max_new_words=12, top_k=5, num_samples=40, seed=0, prefixes=[prefix, prefix])
    lengths = []
    for per_prompt in samples:
        assert len(per_prompt) == 40
        for ids, _ in per_prompt:
            assert ids[: len(prefix)] == prefix
            grammar.validate(ids)  # a complete document: the summary's tree closed
            lengths.append(int(grammar.batch([ids])["lengths"][0]))
            if bare_start:  # a bare start is followed by its continuation, within the same word
                summary = ids[len(prefix):]
                assert all(after == VOCAB.ids["b2"] for before, after in zip(summary, summary[1:]) if before == a)
    assert max(lengths) <= limit
    assert max(lengths) > prefix_positions + 4  # more than the shortest tree: the limit, not the words, bound them
