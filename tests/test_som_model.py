"""Syntactic Ordered Memory (paper 001) as a transformers model: batching, state, losses, generate, hub code."""

import os
import random

import pytest
import torch
import torch.nn.functional as F

from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
from hf_slm.modeling.modeling_som import (
    OrderedMemoryState, SyntacticOrderedMemoryForCausalLM, batched_gold_grid, batched_grid_labels,
)
from hf_slm.modeling.som_structure import adaptive_grid_labels
from hf_slm.families.ordered_memory.data import SyntacticOrderedMemoryCollator, gold_tree, som_example
from hf_slm.tokenization.tokenization_slm import SyntacticWordTokenizer

from conftest import ISOLATION_PREAMBLE, run_without_hf_slm
from helpers.som_models import SENTENCES, manual_greedy, tiny_model


@pytest.fixture(scope="module")
def tokenizer():
    trees = [gold_tree(words, heads) for words, heads in SENTENCES]
    return SyntacticWordTokenizer.train(trees, linearization="terminals", min_count=1)


@pytest.fixture(scope="module")
def batch(tokenizer):
    collator = SyntacticOrderedMemoryCollator(tokenizer)
    return collator([{"words": words, "heads": heads} for words, heads in SENTENCES])


@pytest.mark.parametrize("disentangle", [False, True])
def test_batch_equals_one_sentence_at_a_time(tokenizer, batch, disentangle):
    model = tiny_model(tokenizer, disentangle=disentangle, semantic_size=5).eval()
    with torch.no_grad():
        together = model(**batch)
        for row in range(len(SENTENCES)):
            length = int(batch["attention_mask"][row].sum())
            alone = model(**{name: value[row:row + 1, :length] for name, value in batch.items()})
            assert torch.allclose(together.logits[row, :length], alone.logits[0], atol=1e-5)
            assert torch.allclose(together.split_log_probs[row, :length], alone.split_log_probs[0], atol=1e-5)
            assert torch.equal(together.structure_labels[row, :length], alone.structure_labels[0])


def test_left_padding_leaves_the_state_untouched(tokenizer, batch):
    model = tiny_model(tokenizer).eval()
    ids, mask = batch["input_ids"], batch["attention_mask"]
    lengths = mask.sum(1)
    width = ids.shape[1]
    left_ids = torch.stack([torch.cat([row[length:], row[:length]]) for row, length in zip(ids, lengths)])
    left_mask = torch.stack([torch.cat([m[length:], m[:length]]) for m, length in zip(mask, lengths)])
    with torch.no_grad():
        right = model(input_ids=ids, attention_mask=mask).logits
        left = model(input_ids=left_ids, attention_mask=left_mask).logits
    for row, length in enumerate(lengths.tolist()):
        assert torch.allclose(right[row, :length], left[row, width - length:], atol=1e-5)


def test_padding_is_not_computed_and_leaves_each_rows_final_state(tokenizer, batch):
    """A step computes its real rows only: under padding log p_t and log p'_t are 0, and each row's final state
    (what generate continues from) is the state after its own sentence, also through columns of padding only."""
    model = tiny_model(tokenizer).eval()
    extra = torch.zeros(len(SENTENCES), 2, dtype=torch.long)
    ids = torch.cat([batch["input_ids"], extra + tokenizer.pad_token_id], 1)
    mask = torch.cat([batch["attention_mask"], extra], 1)
    with torch.no_grad():
        together = model(input_ids=ids, attention_mask=mask)
        padding = mask == 0
        assert padding[:, -1].all() and padding[:-1].any()
        assert (together.split_log_probs[padding] == 0).all() and (together.next_split_log_probs[padding] == 0).all()
        for row in range(len(SENTENCES)):
            length = int(mask[row].sum())
            alone = model(input_ids=ids[row:row + 1, :length]).past_key_values
            for name in ("memory", "candidates", "open_slots"):
                assert torch.allclose(getattr(together.past_key_values, name)[row], getattr(alone, name)[0], atol=1e-5)
            assert int(together.past_key_values.seen[row]) == length


def test_padding_inside_a_row_is_refused(tokenizer, batch):
    """As every family's model (modeling/padding.py): a pad id between real tokens without a mask, or a 0 of the
    mask between them, is an error naming the row and position, not a token silently read or skipped."""
    model = tiny_model(tokenizer).eval()
    ids = batch["input_ids"][:1, :5].clone()
    ids[0, 2] = tokenizer.pad_token_id
    with pytest.raises(ValueError, match=r"input_ids row 0 holds the pad id .* at position 2, between real tokens"):
        model(input_ids=ids)
    holed = torch.ones_like(ids)
    holed[0, 3] = 0
    with pytest.raises(ValueError, match=r"attention_mask row 0 is 0 at position 3, between real tokens"):
        model(input_ids=batch["input_ids"][:1, :5], attention_mask=holed)
    with torch.no_grad():  # a mask of ones reads the pad id as a token, as the error says
        assert torch.isfinite(model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits).all()


def test_incremental_state_gives_the_full_forward_logits(tokenizer, batch):
    model = tiny_model(tokenizer).eval()
    with torch.no_grad():
        full = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        state, pieces = None, []
        for step in range(batch["input_ids"].shape[1]):
            out = model(input_ids=batch["input_ids"][:, step:step + 1],
                        attention_mask=batch["attention_mask"][:, :step + 1], past_key_values=state)
            state = out.past_key_values if out.past_key_values is not None else out.cache
            pieces.append(out.logits)
        incremental = torch.cat(pieces, 1)
        # three tokens, then the rest in one call: the state carries over
        first = model(input_ids=batch["input_ids"][:, :3], attention_mask=batch["attention_mask"][:, :3])
        rest = model(input_ids=batch["input_ids"][:, 3:], attention_mask=batch["attention_mask"],
                     past_key_values=first.cache if hasattr(first, "cache") else first.past_key_values)
    real = batch["attention_mask"].bool()
    assert torch.allclose(incremental[real], full.logits[real], atol=1e-5)
    assert torch.allclose(torch.cat([first.logits, rest.logits], 1)[real], full.logits[real], atol=1e-5)


def test_perplexity_is_a_normalized_distribution_over_the_vocabulary(tokenizer, batch):
    """Exactness of p(x): every position's logits define a proper distribution, and the LM loss is the mean
    shifted NLL of the real tokens (no structure is summed over outside the model)."""
    model = tiny_model(tokenizer).eval()
    with torch.no_grad():
        out = model(**batch)
    log_probs = torch.log_softmax(out.logits[:, :-1], -1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
    real = batch["attention_mask"][:, 1:].bool()
    assert out.lm_loss.item() == pytest.approx(-log_probs[real].mean().item(), rel=1e-5)


def test_tied_embeddings_and_gradients_reach_every_parameter(tokenizer, batch):
    model = tiny_model(tokenizer).train()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    out = model(**batch)
    assert out.loss.item() == pytest.approx(out.lm_loss.item() + out.structure_loss.item(), rel=1e-5)
    out.loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_dsom_structural_loss_does_not_train_the_semantic_segment(tokenizer, batch):
    model = tiny_model(tokenizer, disentangle=True, semantic_size=5).train()
    torch.manual_seed(1)
    model(**batch).structure_loss.backward()
    embeddings = model.model.embed_tokens.weight.grad
    assert embeddings[:, :5].abs().sum() == 0
    assert embeddings[:, 5:].abs().sum() > 0
    cell = model.model.composition.to_gates.linear.weight.grad
    assert cell is not None and cell.abs().sum() > 0
    model.zero_grad()
    torch.manual_seed(1)
    model(**batch).lm_loss.backward()
    assert model.model.embed_tokens.weight.grad[:, :5].abs().sum() > 0  # the LM trains both segments


def test_dsom_layers_are_block_triangular(tokenizer):
    model = tiny_model(tokenizer, disentangle=True, semantic_size=5).eval()
    cell = model.model.composition
    h, m = torch.randn(3, 8), torch.randn(3, 8)
    changed_h = h.clone()
    changed_h[:, :5] += torch.randn(3, 5)  # only the semantic segment changes
    with torch.no_grad():
        before, after = cell(h, m), cell(changed_h, m)
    # the syntactic outputs' pre-norm values do not depend on semantic inputs: compare the syntactic gates
    gates_before = cell.to_gates(torch.relu(cell.from_state(h) + cell.from_input(m)))
    gates_after = cell.to_gates(torch.relu(cell.from_state(changed_h) + cell.from_input(m)))
    syntactic = torch.arange(32) % 8 >= 5
    assert torch.allclose(gates_before[:, syntactic], gates_after[:, syntactic])
    assert not torch.allclose(before[:, :5], after[:, :5])


def test_batched_algorithm_1_equals_the_reference():
    rng = random.Random(0)
    num_slots = 6
    rows_siblings, rows_decisions = [], []
    for _ in range(40):
        siblings = [None] + [rng.randrange(index) for index in range(1, 9)]
        decisions = [num_slots]
        for _ in range(8):
            decisions.append(rng.randint(max(2, decisions[-1] - 1), num_slots))
        rows_siblings.append(siblings)
        rows_decisions.append(decisions)
    first_siblings = torch.tensor([[-1 if s is None else s for s in row] for row in rows_siblings])
    decisions = torch.tensor(rows_decisions) - 1  # slot indices
    labels = batched_grid_labels(first_siblings, decisions, num_slots) + 1
    gold = batched_gold_grid(first_siblings, num_slots) + 1
    for row in range(len(rows_siblings)):
        assert labels[row].tolist() == adaptive_grid_labels(rows_siblings[row], num_slots, rows_decisions[row])
        assert gold[row].tolist() == adaptive_grid_labels(rows_siblings[row], num_slots)


def test_training_lowers_both_losses(tokenizer, batch):
    model = tiny_model(tokenizer, hidden_size=16, intermediate_size=32, parser_size=16).eval()
    real = batch["som_first_siblings"] >= 0
    gold = model.gold_grid(batch["som_first_siblings"])
    with torch.no_grad():
        first = model(**batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    # Training samples the parser's decisions: the same draws whatever ran before, and steps enough for any seed
    # tried (0-5; 200 steps left some below the bar).
    torch.manual_seed(0)
    for _ in range(400):
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        last = model(**batch)
    assert last.lm_loss < 0.5 * first.lm_loss
    assert last.structure_loss < 0.5 * first.structure_loss
    # the greedy parser moved towards the gold grid of the training trees
    accuracy = lambda out: (out.decisions[real] == gold[real]).float().mean().item()  # noqa: E731
    assert accuracy(last) > 0.7 and accuracy(last) > accuracy(first) + 0.3


def test_teacher_forcing_follows_the_gold_grid(tokenizer, batch):
    model = tiny_model(tokenizer, structure_loss="teacher_forcing").train()
    out = model(**batch)
    gold = model.gold_grid(batch["som_first_siblings"])
    real = batch["attention_mask"].bool()
    assert torch.equal(out.decisions[real], gold[real])
    assert torch.equal(out.structure_labels[real], gold[real])


@pytest.mark.parametrize("structure_loss", ["adaptive", "teacher_forcing"])
def test_compositions_below_the_lowest_open_slot_are_skipped_without_changing_a_number(tokenizer, batch,
                                                                                       structure_loss, monkeypatch):
    def run():
        model = tiny_model(tokenizer, structure_loss=structure_loss).train()
        torch.manual_seed(3)
        out = model(**batch)
        out.loss.backward()
        return [out.logits, out.split_log_probs, out.loss] + [p.grad for p in model.parameters()]

    skipping = run()
    computed = OrderedMemoryState.initial

    def every_cell_computed(cls, *args):
        state = computed(*args)
        state.lowest_open = 1
        return state

    monkeypatch.setattr(OrderedMemoryState, "initial", classmethod(every_cell_computed))
    for found, expected in zip(skipping, run(), strict=True):
        torch.testing.assert_close(found, expected, rtol=1e-5, atol=1e-7)


def test_a_training_step_under_autocast_follows_float32(tokenizer, batch):
    def loss_and_gradients(autocast):
        model = tiny_model(tokenizer).train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(**batch).lm_loss  # (bfloat16 flips some hard decisions, and so the structural loss's labels)
        loss.backward()  # the chain's backward runs outside autocast
        return loss.float(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    loss, gradients = loss_and_gradients(autocast=False)
    autocast_loss, autocast_gradients = loss_and_gradients(autocast=True)
    assert autocast_gradients.dtype == torch.float32 and torch.isfinite(autocast_gradients).all()
    torch.testing.assert_close(autocast_loss, loss, rtol=2e-2, atol=0)
    assert F.cosine_similarity(autocast_gradients, gradients, dim=0) > 0.99


def test_no_slot_below_the_lowest_open_one_is_open(tokenizer, batch):
    model = tiny_model(tokenizer).eval()
    num_slots, state = model.config.num_slots, None
    with torch.no_grad():
        for step in range(batch["input_ids"].shape[1]):
            state = model(input_ids=batch["input_ids"][:, step:step + 1], past_key_values=state).past_key_values
            assert state.lowest_open == max(1, num_slots - 2 - step)  # a sentence opens one slot a token
            assert state.open_slots[:, :state.lowest_open].abs().max() == 0
            assert state.open_slots[:, state.lowest_open].abs().max() > 0
        gold = torch.full_like(batch["input_ids"][:, :1], 1)  # a split forced below every open slot
        state = model(input_ids=batch["input_ids"][:, :1], gold_decisions=gold).past_key_values
        assert state.lowest_open == 1


def test_without_prediction_network(tokenizer, batch):
    model = tiny_model(tokenizer, use_prediction_network=False).train()
    out = model(**batch)
    assert out.next_split_log_probs is None
    out.loss.backward()
    assert not hasattr(model.model, "prediction_cell")


def test_bad_inputs_are_named(tokenizer, batch):
    model = tiny_model(tokenizer)
    with pytest.raises(ValueError, match="som_first_siblings has shape"):
        model(input_ids=batch["input_ids"], som_first_siblings=batch["som_first_siblings"][:, :2])
    with pytest.raises(TypeError, match="unexpected inputs"):
        model(input_ids=batch["input_ids"], not_an_input=1)
    with pytest.raises(ValueError, match="semantic_size"):
        SyntacticOrderedMemoryConfig(hidden_size=8, disentangle=True)
    with pytest.raises(ValueError, match="structure_loss"):
        SyntacticOrderedMemoryConfig(structure_loss="gold")


def test_generate_greedy_sampling_and_beam(tokenizer):
    model = tiny_model(tokenizer, seed=3).eval()
    prompt = torch.tensor([tokenizer(["Sam", "likes"], is_split_into_words=True)["input_ids"]])
    options = dict(max_new_tokens=6, min_new_tokens=6, pad_token_id=0, eos_token_id=None)
    greedy = model.generate(prompt, do_sample=False, **options)
    assert torch.equal(greedy, manual_greedy(model, prompt, 6))
    sampled = model.generate(prompt, do_sample=True, top_k=0, **options)
    assert sampled.shape == (1, prompt.shape[1] + 6)
    # beam search reorders the recurrent state; without a cache every step recomputes from the tokens
    beam = model.generate(prompt, num_beams=3, num_return_sequences=3, **options)
    no_cache = model.generate(prompt, num_beams=3, num_return_sequences=3, use_cache=False, **options)
    assert torch.equal(beam, no_cache)


def test_generate_a_left_padded_batch(tokenizer):
    model = tiny_model(tokenizer, seed=3).eval()
    prompts = [["Sam", "likes"], ["The", "cat", "sleeps", "on"]]
    tokenizer.padding_side = "left"
    try:
        inputs = tokenizer(prompts, is_split_into_words=True, padding=True, return_tensors="pt")
    finally:
        tokenizer.padding_side = "right"
    out = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0,
                         eos_token_id=None)
    for row, words in enumerate(prompts):
        alone = torch.tensor([tokenizer(words, is_split_into_words=True)["input_ids"]])
        assert out[row, -4:].tolist() == manual_greedy(model, alone, 4)[0, -4:].tolist()


def test_trainer_trains_with_the_collator(tokenizer, tmp_path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    model = tiny_model(tokenizer).train()
    features = [som_example(tokenizer, words, heads) for words, heads in SENTENCES]
    dataset = Dataset.from_list(features)
    arguments = TrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=2, max_steps=4,
                                  learning_rate=1e-2, report_to=[], remove_unused_columns=False, use_cpu=True,
                                  logging_steps=1, save_strategy="no")
    before = model.model.embed_tokens.weight.detach().clone()
    trainer = Trainer(model=model, args=arguments, train_dataset=dataset,
                      data_collator=SyntacticOrderedMemoryCollator(tokenizer))
    result = trainer.train()
    assert result.global_step == 4
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(before, model.model.embed_tokens.weight)


CHILD = ISOLATION_PREAMBLE + r'''
import sys, torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

checkpoint, output_path = sys.argv[1:3]
model = AutoModelForCausalLM.from_pretrained(checkpoint, trust_remote_code=True).eval()
base = AutoModel.from_pretrained(checkpoint, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=True)
sentences = [["Sam", "likes", "tea"], ["The", "cat", "sleeps", "on", "the", "mat"]]
inputs = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
with torch.no_grad():
    output = model(**inputs, labels=inputs["input_ids"])
    hidden = base(**inputs).last_hidden_state
prompt = tokenizer([["Sam", "likes"]], is_split_into_words=True, return_tensors="pt")["input_ids"]
generated = model.generate(prompt, max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0,
                           eos_token_id=None)
torch.save({"logits": output.logits, "loss": output.loss, "hidden": hidden, "input_ids": inputs["input_ids"],
            "attention_mask": inputs["attention_mask"], "generated": generated,
            "modules": [type(model).__module__, type(base).__module__, type(tokenizer).__module__]}, output_path)
'''


def test_checkpoint_loads_without_hf_slm_with_the_same_logits(tokenizer, tmp_path):
    model = tiny_model(tokenizer, disentangle=True, semantic_size=5).eval()
    model.save_pretrained(tmp_path / "checkpoint")
    tokenizer.save_pretrained(tmp_path / "checkpoint")
    files = set(os.listdir(tmp_path / "checkpoint"))
    assert {"model.safetensors", "modeling_som.py", "configuration_som.py", "safe_loading.py"} <= files
    out = run_without_hf_slm(CHILD, [tmp_path / "checkpoint"], tmp_path)
    assert all(module.startswith("transformers_modules") for module in out["modules"]), out["modules"]
    with torch.no_grad():
        expected = model(input_ids=out["input_ids"], attention_mask=out["attention_mask"], labels=out["input_ids"])
    real = out["attention_mask"].bool()
    assert torch.allclose(out["logits"][real], expected.logits[real], atol=1e-6)
    assert out["loss"].item() == pytest.approx(expected.loss.item(), rel=1e-6)
    prompt = torch.tensor([tokenizer(["Sam", "likes"], is_split_into_words=True)["input_ids"]])
    assert torch.equal(out["generated"], manual_greedy(model, prompt, 5))


def test_auto_classes_with_hf_slm_installed(tokenizer, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    import hf_slm  # noqa: F401  (registers the Auto classes)

    model = tiny_model(tokenizer).eval()
    model.save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)).__name__ == "SyntacticOrderedMemoryConfig"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is SyntacticOrderedMemoryForCausalLM
    ids = torch.tensor([tokenizer(["Sam", "likes", "tea"], is_split_into_words=True)["input_ids"]])
    with torch.no_grad():
        # equal up to float rounding (the loaded tensors' memory layout differs)
        assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)


def test_table_6_presets():
    from hf_slm.modeling.configuration_som import preset_som_config

    dsom = preset_som_config("dsom-ptb", vocab_size=100)
    assert (dsom.semantic_size, dsom.syntactic_size, dsom.hidden_size, dsom.num_slots) == (300, 100, 400, 15)
    assert (dsom.embedding_dropout, dsom.dropout, dsom.output_dropout) == (0.1, 0.3, 0.5)
    esom = preset_som_config("esom-bllip-sm", vocab_size=100)
    assert not esom.disentangle and esom.hidden_size == 500 and esom.output_dropout == 0.2
    with pytest.raises(ValueError, match="unknown SOM preset"):
        preset_som_config("som-ptb")


def test_subword_pieces_train_with_the_structural_loss():
    from hf_slm.tokenization.tokenization_slm import SyntacticTokenizer

    trees = [gold_tree(words, heads) for words, heads in SENTENCES]
    pieces = SyntacticTokenizer.train([str(tree) for tree in trees] * 20, vocab_size=40, linearization="terminals")
    features = [som_example(pieces, words, heads) for words, heads in SENTENCES]
    assert any(len(f["input_ids"]) > len(words) + 2 for f, (words, _) in zip(features, SENTENCES))
    batch = SyntacticOrderedMemoryCollator(pieces)(features)
    model = tiny_model(pieces).train()
    out = model(**batch)
    assert torch.isfinite(out.structure_loss) and torch.isfinite(out.lm_loss)
    out.loss.backward()
    # a word's second piece goes one slot below its first piece (the word is a left-branching constituent)
    gold = model.gold_grid(batch["som_first_siblings"])
    siblings = batch["som_first_siblings"]
    checked = 0
    for row, feature in enumerate(features):
        starts = pieces(SENTENCES[row][0], is_split_into_words=True, return_word_starts=True)["word_starts"]
        for step in range(2, len(starts)):
            if not starts[step] and starts[step - 1]:
                assert siblings[row, step] == step - 1
                assert gold[row, step] == max(gold[row, step - 1] - 1, 1)
                checked += 1
    assert checked > 0


def test_decisions_are_always_a_tree():
    """The soft memory leaves low slots open with small probability; theta must still be a hard parse."""
    from hf_slm.modeling.modeling_som import hard_decisions
    from hf_slm.modeling.som_structure import grid_columns

    log_probs = torch.log(torch.tensor([[[0.0, 0.0, 0.0, 1.0],     # <s>: the top slot
                                         [0.0, 0.0, 0.4, 0.6],     # theta_1 = 3
                                         [0.0, 0.9, 0.05, 0.05]]]))  # argmax 1, but 2 is the lowest open slot
    active = torch.ones(1, 3, dtype=torch.bool)
    assert hard_decisions(log_probs, active, sample=False).tolist() == [[3, 3, 2]]
    for _ in range(20):
        sampled = hard_decisions(log_probs, active, sample=True)[0].tolist()
        assert sampled[2] >= sampled[1] - 1
    # padding keeps the previous decision as the bound, and forced decisions are taken as they are
    padded = hard_decisions(log_probs[:, [0, 1, 1, 2]], torch.tensor([[True, True, False, True]]), sample=False)
    assert padded.tolist() == [[3, 3, -1, 2]]
    forced = hard_decisions(log_probs, active, sample=False, forced=torch.tensor([[-100, 2, -100]]))
    assert forced.tolist() == [[3, 2, 1]]
    grid_columns([d + 1 for d in forced[0].tolist()], 4)


@pytest.mark.parametrize("training", [False, True])
def test_teacher_forced_model_still_parses_in_evaluation(tokenizer, batch, training):
    from hf_slm.modeling.som_structure import grid_columns

    model = tiny_model(tokenizer, structure_loss="teacher_forcing")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model.train()
    for _ in range(5):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()
    model.train(training)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    for row, length in enumerate(batch["attention_mask"].sum(1).tolist()):
        grid_columns([d + 1 for d in out.decisions[row, :length].tolist()], model.config.num_slots)


# ---- section 3.2's prediction network: a slot sampled from p'_t (prediction_network="sampled") -----------------
def test_a_one_hot_p_prime_gives_both_forms_the_same_weights():
    from hf_slm.modeling.modeling_som import prediction_weights

    one_hot = torch.log(torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]]))
    mixture = prediction_weights(one_hot, "mixture", sample=False)
    for sample in (False, True):
        assert torch.equal(prediction_weights(one_hot, "sampled", sample=sample), mixture)


def test_the_sampled_slot_follows_p_prime_and_evaluation_takes_its_argmax():
    from hf_slm.modeling.modeling_som import prediction_weights

    p_prime = torch.tensor([0.0, 0.1, 0.6, 0.3])  # slot 0 closed, as in the model
    log_p = torch.log(p_prime).expand(20000, 4)
    torch.manual_seed(0)
    drawn = prediction_weights(log_p, "sampled", sample=True)
    assert torch.equal(drawn.sum(-1), torch.ones(20000))  # one slot each
    assert drawn[:, 0].sum() == 0  # a closed slot is never drawn
    assert torch.allclose(drawn.mean(0), p_prime, atol=0.015)
    greedy = prediction_weights(log_p[:3], "sampled", sample=False)
    assert torch.equal(greedy, torch.tensor([[0.0, 0.0, 1.0, 0.0]]).expand(3, 4))


def test_the_sampled_hidden_state_is_on_average_the_mixture(tokenizer, batch):
    """E_{i ~ p'_t}[RNN_i] = sum_i p'_t(i) RNN_i: many rows of one sentence, each drawing its own slots, average to
    the mixture's h_t (dropout 0, so the memory is the same in every row)."""
    mixture = tiny_model(tokenizer, seed=3)
    sampled = tiny_model(tokenizer, seed=3, prediction_network="sampled")
    assert torch.equal(mixture.lm_head.weight, sampled.lm_head.weight)
    length = int(batch["attention_mask"][0].sum())
    rows = batch["input_ids"][:1, :length].expand(2000, length)
    with torch.no_grad():
        expected = mixture.model.train()(input_ids=rows[:1]).last_hidden_state[0]
        torch.manual_seed(0)
        hidden = sampled.model.train()(input_ids=rows).last_hidden_state
        mean, error = hidden.mean(0), hidden.std(0) / hidden.shape[0] ** 0.5
        assert ((mean - expected).abs() <= 5 * error + 1e-6).all()
        assert (hidden.std(0) > 0).any()  # the rows did draw different slots
        # evaluation takes the argmax of p'_t: no randomness, and not the mixture
        first, second = (sampled.model.eval()(input_ids=rows[:2]).last_hidden_state for _ in range(2))
        assert torch.equal(first, second) and torch.equal(first[0], first[1])
        assert not torch.allclose(first[0], mixture.model.eval()(input_ids=rows[:1]).last_hidden_state[0])


@pytest.mark.parametrize("training", [False, True])
def test_the_sampled_form_computes_the_chosen_slots_rnn_output(tokenizer, batch, training):
    """The sampled network computes RNN_i for each row's own slot i only, reading the memory down to it: h_t equals
    the RNN of eq. 7 run over every slot (written here from the equation) at the slot the argmax of p'_t, or the draw
    from it, picks; and the gradients of the prediction cell are those of that form."""
    from hf_slm.modeling.modeling_som import prediction_weights

    model = tiny_model(tokenizer, seed=5, prediction_network="sampled").train(training)
    network = model.model
    rows = 40
    generator = torch.Generator().manual_seed(1)
    memory, candidates = (torch.randn(rows, 6, 8, generator=generator) for _ in range(2))
    open_slots = torch.rand(rows, 6, generator=generator).clamp_min(0.05)
    open_slots[:, 0] = 0
    torch.manual_seed(2)
    hidden, next_log_probs = network._predict(memory, candidates, open_slots)
    torch.manual_seed(2)  # the same draws of the slots
    chosen = prediction_weights(next_log_probs, "sampled", sample=training).argmax(-1)
    assert len(set(chosen.tolist())) >= 3  # rows chose different depths
    state, outputs = torch.zeros(rows, 8), {}
    for slot in range(5, 0, -1):  # RNN(M^N, ..., M^{slot+1}, M^^slot), the state reading M^slot after it
        outputs[slot] = network.prediction_cell(state, candidates[:, slot])
        state = network.prediction_cell(state, memory[:, slot])
    expected = torch.stack([outputs[int(slot)][row] for row, slot in enumerate(chosen)])
    torch.testing.assert_close(hidden, expected, rtol=1e-5, atol=1e-6)
    (gradient,) = torch.autograd.grad(hidden.square().sum(), [network.prediction_cell.to_gates.linear.weight])
    (expected_gradient,) = torch.autograd.grad(expected.square().sum(), [network.prediction_cell.to_gates.linear.weight])
    torch.testing.assert_close(gradient, expected_gradient, rtol=1e-4, atol=1e-6)


def test_the_sampled_form_trains_p_prime_by_the_structural_loss_alone(tokenizer, batch):
    """A sampled slot passes no gradient of the LM loss into p'_t; the mixture does."""
    two = {name: value[:2] for name, value in batch.items()}
    for form, reached in (("sampled", False), ("mixture", True)):
        model = tiny_model(tokenizer, prediction_network=form, structure_loss_weight=0.0).train()
        model(**two).loss.backward()
        gradients = [p.grad for p in model.model.next_split_scorer.parameters()]
        assert any(g is not None and g.any() for g in gradients) == reached, form


def test_the_papers_presets_sample_and_older_configs_read_as_the_mixture():
    from hf_slm.modeling.configuration_som import SOM_PRESETS, preset_som_config

    assert {preset_som_config(name, vocab_size=100).prediction_network for name in SOM_PRESETS} == {"sampled"}
    saved = SyntacticOrderedMemoryConfig(vocab_size=100).to_dict()
    for field in ("prediction_network", "oracle_trees"):  # a config saved before these fields existed
        del saved[field]
    old = SyntacticOrderedMemoryConfig.from_dict(saved)
    assert old.prediction_network == "mixture" and old.oracle_trees is False
    with pytest.raises(ValueError, match="prediction_network is 'soft'; expected one of"):
        SyntacticOrderedMemoryConfig(prediction_network="soft")


# ---- Table 2's oracle, "- Predicted tree + Gold tree" (oracle_trees=True) ------------------------------------
@pytest.mark.parametrize("training", [False, True])
def test_the_oracle_follows_the_gold_tree_in_training_and_evaluation(tokenizer, batch, training):
    oracle = tiny_model(tokenizer, oracle_trees=True).train(training)
    gold = oracle.gold_grid(batch["som_first_siblings"])
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        out = oracle(**batch)
        driven = oracle(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], gold_decisions=gold)
        own = oracle(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])  # no tree: its own parser
    assert torch.equal(out.decisions[real], gold[real])
    assert torch.equal(out.structure_labels[real], gold[real])
    assert torch.equal(out.logits, driven.logits)
    assert not torch.equal(own.decisions[real], gold[real])
    assert not torch.allclose(out.logits[real], own.logits[real])


def test_som_generates_words_through_the_families_generation_mixin(tokenizer):
    """SOM's LM class uses the generation mixin every family's does (issue 40): a word model, so transformers' own
    generate and text-generation pipeline, and a beam search over trees refused with what to use instead."""
    from transformers import TextGenerationPipeline

    from hf_slm.modeling.generation_mixin import SyntacticGenerationMixin

    model = tiny_model(tokenizer).eval()
    assert isinstance(model, SyntacticGenerationMixin) and model.generates_words
    assert model.text_generation_pipeline is TextGenerationPipeline
    assert "custom_pipelines" not in model.config.to_dict() or not model.config.custom_pipelines
    with pytest.raises(ValueError, match="has no grammar whose trees a beam search could build"):
        model.word_synchronous_beam_search([[[5]]])
    output = model.generate(torch.tensor([[tokenizer.bos_token_id, 5]]), max_new_tokens=3, do_sample=False,
                            min_new_tokens=3)
    assert output.shape == (1, 5) and output[0, :2].tolist() == [tokenizer.bos_token_id, 5]
