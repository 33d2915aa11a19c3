"""The DTG model (DependencyTransformerGrammarConfig / ...ForCausalLM): the HF causal-LM contract for the three
transition systems, the grammar's mask and explicit relative positions in the model, the arc representation of
paper 002 section 3.3 (Table 4). Loading through the Auto classes without hf-slm: tests/test_families.py."""

import json
import warnings

import pytest
import torch

from hf_slm.modeling.backbone import PositionStructure
from hf_slm.families import config_for_grammar
from hf_slm.modeling.grammars import PositionKind
from hf_slm.families import causal_lm_for_config
from helpers.dependency_models import SYSTEMS, TREES, every_projective_tree, joint_log_prob, tiny


@pytest.mark.parametrize("grammar", sorted(SYSTEMS))
def test_logits_at_t_are_those_of_the_prefix_and_the_loss_is_the_shifted_nll(grammar):
    model, tokenizer = tiny(grammar)
    ids = torch.tensor([tokenizer(TREES[0])["input_ids"]])
    with torch.no_grad():
        full = model(input_ids=ids, labels=ids)
        for t in (1, 3, 6, ids.shape[1] - 2):
            prefix = model(input_ids=ids[:, : t + 1]).logits[0, -1]
            assert torch.allclose(prefix, full.logits[0, t], atol=1e-5), t
    log_probs = full.logits[0, :-1].log_softmax(-1).gather(1, ids[0, 1:, None])
    assert torch.allclose(full.loss, -log_probs.mean(), atol=1e-6)


def test_padding_and_batching_change_nothing():
    model, tokenizer = tiny("dtg")
    batch = tokenizer(TREES, padding=True, return_tensors="pt")
    with torch.no_grad():
        together = model(**batch).logits
        for row, tree in enumerate(TREES):
            alone = model(input_ids=torch.tensor([tokenizer(tree)["input_ids"]])).logits[0]
            assert torch.allclose(together[row, : len(alone)], alone, atol=1e-5)


def _hidden(model, tokenizer, tree):
    ids = torch.tensor([tokenizer(tree)["input_ids"]])
    with torch.no_grad():
        output = model.model(input_ids=ids, output_hidden_states=True)
    return output.hidden_states, model.model.grammar.sequence(ids[0].tolist())


def test_a_compose_position_sees_only_what_its_mask_allows():
    # One layer: the COMPOSE of LA(difference -> a) (position 7 of Figure 2) attends "a" and "difference" only,
    # so the first word cannot change it; the COMPOSE of LA(is -> There) (position 3) sees "There".
    model, tokenizer = tiny("dtg", layers=1)
    (_, first), first_sequence = _hidden(model, tokenizer, "There/2 is/0 a/4 difference/2")
    (_, other), other_sequence = _hidden(model, tokenizer, "Dogs/2 is/0 a/4 difference/2")

    def composes(sequence):  # the first word may have another number of pieces: find the arcs in each
        return [i for i, kind in enumerate(sequence.position_kinds.tolist()) if kind == PositionKind.LEFT_ARC_COMPOSE]

    (first_early, first_late), (other_early, other_late) = composes(first_sequence), composes(other_sequence)
    assert torch.allclose(first[0, first_late], other[0, other_late], atol=1e-6)
    assert not torch.allclose(first[0, first_early], other[0, other_early], atol=1e-3)


@pytest.mark.parametrize("representation", ["w+arc", "arc", "w"])
def test_arc_inputs_follow_the_arc_representation(representation):
    model, tokenizer = tiny("dtg", arc_representation=representation)
    tree = "There/2 is/0 a/4 difference/2"
    (embedded, *_), sequence = _hidden(model, tokenizer, tree)
    head_slots = model.model.grammar.batch([tokenizer(tree)["input_ids"]])["head_token_index"][0]
    table = model.model.decoder.embed_tokens.weight
    ids = sequence.input_ids.tolist()
    checked = 0
    for position, kind in enumerate(sequence.position_kinds.tolist()):
        if kind not in (PositionKind.LEFT_ARC_COMPOSE, PositionKind.LEFT_ARC_STACK, PositionKind.RIGHT_ARC_COMPOSE,
                        PositionKind.RIGHT_ARC_STACK):
            assert torch.allclose(embedded[0, position], table[ids[position]])
            continue
        head = ids[head_slots[position]]  # the head word's last piece
        expected = {"w+arc": table[ids[position]] + table[head], "arc": table[ids[position]], "w": table[head]}
        assert torch.allclose(embedded[0, position], expected[representation], atol=1e-6), position
        checked += 1
    assert checked == 8  # four arcs, two copies each


def test_explicit_relative_positions_equal_the_coordinate_path():
    # The machinery DTG needs, checked where both exist: a TG batch given R = c_i - c_j explicitly.
    from hf_slm.families.action_vocab import ActionVocabulary

    trees = [["(S", "(NP", "the", "bird", "NP)", "(VP", "sings", "VP)", "S)"], ["(S", "(NP", "a", "dog", "NP)", "S)"]]
    vocab = ActionVocabulary.from_action_sequences(trees)
    config = config_for_grammar("tg", vocab_size=len(vocab.tokens), hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32, **vocab.layout.to_dict())
    torch.manual_seed(0)
    model = causal_lm_for_config(config).eval()
    batch = model.model.grammar.batch([vocab.encode(t) for t in trees])
    kinds = torch.from_numpy(batch["position_kinds"].astype("int64"))
    positions = torch.where(kinds != 0, torch.arange(kinds.shape[1]), torch.full_like(kinds, -1))
    ids = torch.from_numpy(batch["input_ids"])
    mask, coordinates = torch.from_numpy(batch["attention_mask"]), torch.from_numpy(batch["position_coordinates"])
    with torch.no_grad():
        implicit = PositionStructure(mask, coordinates, positions, kinds, config.min_relative_position)
        explicit = PositionStructure(mask, coordinates, positions, kinds, config.min_relative_position,
                                     relative_positions=torch.from_numpy(batch["relative_positions"]))
        a, _ = model.model.decoder(ids, implicit)
        b, _ = model.model.decoder(ids, explicit)
    assert torch.allclose(a, b, atol=1e-5)


def test_config_refuses_what_dtg_does_not_take():
    with pytest.raises(ValueError, match="arc_representation must be one of"):
        config_for_grammar("dtg", arc_representation="arc+w")
    assert config_for_grammar("dtg", document_level=True).document_level  # arc-standard reads documents
    with pytest.raises(ValueError, match=r"arc_eager \(paper\) reads one sentence per sequence"):
        config_for_grammar("dtg_eager", document_level=True)
    with pytest.raises(ValueError, match=r"arc_standard \(reference\) reads one sentence per sequence"):
        config_for_grammar("dtg", document_level=True, dependency_variant="reference")
    with pytest.raises(ValueError, match=r"unknown config field 'arc_representaton'; did you mean arc_representation"):
        config_for_grammar("dtg", arc_representaton="w")


@pytest.mark.parametrize("grammar", sorted(SYSTEMS))
def test_the_collators_fast_path_gives_the_contracts_loss_and_gradients(grammar):
    from hf_slm.data.collator import SyntacticDataCollator

    model, tokenizer = tiny(grammar)
    collator = SyntacticDataCollator(grammar, tokenizer.action_layout)
    features = [{"input_ids": ids} for ids in tokenizer(TREES)["input_ids"]]
    collated = collator(features)
    # Explicit R only where the model cannot derive it from coordinates and kinds (not arc-standard DTG)
    expected = {"txl_trans": set(), "dtg": {"head_token_index"}}.get(grammar, {"position_relative_positions",
                                                                            "head_token_index"})
    assert {"position_relative_positions", "head_token_index"} & set(collated) == expected
    contract = tokenizer(TREES, padding=True, return_tensors="pt")
    losses, gradients = [], []
    for inputs in (collated, {**contract, "labels": contract["input_ids"]}):
        model.zero_grad()
        loss = model(**inputs).loss
        loss.backward()
        losses.append(float(loss.detach()))
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    assert gradients[0].keys() == gradients[1].keys()
    for name in gradients[0]:
        assert torch.allclose(gradients[0][name], gradients[1][name], atol=1e-6), name


@pytest.mark.parametrize("grammar", ["dtg", "txl_trans"])
def test_trainer_trains_on_the_collators_batches(tmp_path, grammar):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from hf_slm.data.collator import SyntacticDataCollator

    model, tokenizer = tiny(grammar)
    collator = SyntacticDataCollator(grammar, tokenizer.action_layout)
    features = [{"input_ids": ids} for ids in tokenizer(TREES)["input_ids"]]
    dataset = Dataset.from_dict({"input_ids": [f["input_ids"] for f in features] * 8})
    with torch.no_grad():
        before = float(model(**collator(features)).loss)
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(set(kwargs)), with_kwargs=True)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=10,
                             learning_rate=1e-2, logging_steps=100, save_strategy="no", report_to=[], disable_tqdm=True,
                             use_cpu=True)
    Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator).train()
    expected = {"position_mask"} if grammar == "txl_trans" else {"position_mask", "head_token_index"}
    assert len(seen) == 80 and all(expected <= keys for keys in seen)
    model.eval()
    with torch.no_grad():
        after = float(model(**collator(features)).loss)
    assert after < before * 0.7


# ---- word-synchronous beam search ----------------------------------------------------------------------


@pytest.mark.parametrize("grammar", sorted(SYSTEMS))
def test_an_exhaustive_beam_sums_every_projective_tree(grammar):
    """log p(x) from the beam equals the sum of p(x, y) over all projective trees y, each scored by a plain
    forward pass (the HF contract): the search, its decoder and its constraints lose no tree and add none."""
    import hf_slm

    model, tokenizer = tiny(grammar)
    words = ["a", "b", "c"]
    trees = every_projective_tree(words)
    assert len(trees) == 7  # single-rooted projective trees over n words: 1, 2, 7, 30, ... (OEIS A006013)
    joint = torch.tensor([joint_log_prob(model, tokenizer, tree) for tree in trees], dtype=torch.float64)
    options = dict(beam_size=2000, word_beam_size=2000, fast_track=0, max_consecutive_open=None, progress=False)
    cached = hf_slm.score(model, tokenizer, [words], num_trees=3, **options)[0]
    assert cached["log_prob"] == pytest.approx(float(torch.logsumexp(joint, 0)), abs=1e-4)
    order = torch.argsort(joint, descending=True)[:3].tolist()
    assert [found["tree"] for found in cached["trees"]] == [trees[i].to_inline() for i in order]
    assert [found["log_prob"] for found in cached["trees"]] == pytest.approx([float(joint[i]) for i in order], abs=1e-4)
    assert cached["tree"] == trees[order[0]].to_inline()
    reencoded = hf_slm.score(model, tokenizer, [words], use_cache=False, **options)[0]
    assert reencoded["log_prob"] == pytest.approx(cached["log_prob"], abs=1e-5)
    assert cached["surprisals"] == pytest.approx(reencoded["surprisals"], abs=1e-4)


def test_parse_keeps_the_given_words_and_generate_writes_trees():
    import hf_slm

    model, tokenizer = tiny("dtg")
    with pytest.warns(UserWarning, match="go through <unk>"):
        tree = hf_slm.parse(model, tokenizer, [["a", "zzq", "c"]], beam_size=20, word_beam_size=5, progress=False)[0]
    assert [item.rpartition("/")[0] for item in tree.split()] == ["a", "zzq", "c"]  # not the <unk> pieces
    generated = hf_slm.generate_trees(model, tokenizer, "a b", num_trees=2, max_new_words=2)
    for text in generated:
        assert text.split()[0].startswith("a/")  # the prompt's words come first


@pytest.mark.parametrize("grammar", ["dtg_eager", "txl_trans"])
def test_the_cli_scores_and_evaluates_a_saved_dependency_model(tmp_path, capsys, grammar):
    """hf-slm score / eval ppl / eval sg / eval blimp on a dependency checkpoint give what hf_slm.score gives."""
    from pathlib import Path

    import hf_slm
    from hf_slm.cli import main

    model, tokenizer = tiny(grammar)
    directory = tmp_path / "model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    sentences, beam = ["a b c", "Dogs bark loudly"], ["--beam-size", "5", "--word-beam-size", "2"]
    expected = hf_slm.score(model, tokenizer, sentences, beam_size=5, word_beam_size=2, progress=False)

    assert main(["score", "--model", str(directory), *beam, *sentences]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["log_prob"] for line in lines] == pytest.approx([e["log_prob"] for e in expected], abs=1e-6)
    assert [line["tree"] for line in lines] == [e["tree"] for e in expected]

    data, results = tmp_path / "sentences.txt", tmp_path / "results"
    data.write_text("\n".join(sentences) + "\n")
    assert main(["eval", "ppl", "--model", str(directory), "--data", str(data), "--output", str(results), *beam]) == 0
    record = json.loads((results / "ppl-sentences.json").read_text())["metrics"]
    assert record["estimate"] == "upper bound"
    assert record["log_prob_total"] == pytest.approx(sum(e["log_prob"] for e in expected), abs=1e-5)

    fixtures = Path(__file__).parent / "fixtures"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny tokenizer spells most characters as <unk>
        assert main(["eval", "sg", "--model", str(directory), "--suites", str(fixtures / "syntaxgym"), "--limit", "1",
                     "--output", str(results), *beam]) == 0
        assert main(["eval", "blimp", "--model", str(directory), "--data", str(fixtures / "blimp"), "--limit", "1",
                     "--output", str(results), *beam]) == 0
    capsys.readouterr()
    assert json.loads((results / "sg-syntaxgym-limit1.json").read_text())["metrics"]["counts"]["items"] > 0
    assert 0 <= json.loads((results / "blimp-blimp-limit1.json").read_text())["metrics"]["accuracy"] <= 1


@pytest.mark.parametrize("implementation", ["auto", "reference"])
def test_arc_standard_relative_positions_from_coordinates_equal_the_explicit_ones(implementation, monkeypatch):
    """DTG arc-standard derives R from coordinates and position kinds (the fast attention paths); the explicit
    values of the grammar give the same logits and gradients."""
    from hf_slm.modeling.dependency_grammars import ArcStandardGrammar

    model, tokenizer = tiny("dtg", relative_attention=implementation)
    batch = tokenizer(TREES, padding=True, return_tensors="pt")

    def loss_and_gradients():
        model.zero_grad()
        output = model(**batch, labels=batch["input_ids"])
        output.loss.backward()
        return output.logits.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    affine_logits, affine_gradients = loss_and_gradients()
    assert model.model.grammar.relative_affine_by_kind is not None
    monkeypatch.setattr(ArcStandardGrammar, "relative_affine_by_kind", None)
    explicit_logits, explicit_gradients = loss_and_gradients()
    assert torch.allclose(affine_logits, explicit_logits, atol=1e-5)
    for name, gradient in affine_gradients.items():
        assert torch.allclose(gradient, explicit_gradients[name], atol=1e-5), name
