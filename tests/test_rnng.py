"""The generative RNNG (hf_slm/families/recurrent_grammars): its computation against a plain, one-sentence stack machine written
here, the distribution its logits give, batch and padding against each sentence alone, its beam search against the
forward, and its errors. (Every path a user has, from `hf-slm train` to loading without hf-slm, is
tests/test_families.py's; the exhaustive beam is test_beam_search.py's.)"""

import numpy as np
import pytest
import torch

from hf_slm.families.recurrent_grammars.modeling_rnng import RNNGConfig, RNNGForCausalLM
from hf_slm.modeling.generation_slm import BeamSearchOptions, WordSynchronousBeamSearch
from hf_slm.search.scoring import joint_log_probs

from helpers.beam_search_models import SENTENCE, VOCAB

TREES = [
    "(S (NP a) (NP b1 b2 c))",
    "(S (NP (NP a) (S b1 b2)) c (NP a a))",
    "(NP a)",
]


def rnng(seed=0, layers=2, **fields):
    config = RNNGConfig(vocab_size=len(VOCAB.tokens), embedding_size=8, hidden_size=6, num_hidden_layers=layers,
                        dropout=0.0, **VOCAB.layout.to_dict(),
                        word_start_ranges=[[VOCAB.layout.unk_token_id + 1, VOCAB.layout.open_nt_start]], **fields)
    torch.manual_seed(seed)
    model = RNNGForCausalLM(config).eval()
    with torch.no_grad():
        model.word_bias.normal_()
    return model


def ids_of(tree):
    """The action ids of a bracketed tree over VOCAB's words (closing brackets labelled as the tokenizer writes)."""
    ids, open_labels = [VOCAB.layout.bos_token_id], []
    for token in tree.replace("(", " (").replace(")", " ) ").split():
        if token.startswith("("):
            open_labels.append(token[1:])
            ids.append(VOCAB.ids["(" + token[1:]])
        elif token == ")":
            ids.append(VOCAB.ids[open_labels.pop() + ")"])
        else:
            ids.append(VOCAB.ids[token])
    return ids


def plain_log_probs(model, ids):
    """log p of each action after the first, by a stack machine of lists over one sentence: a stack of (vector, LSTM
    state after it), the composition by torch's bidirectional LSTM over the whole (nonterminal, children, nonterminal)
    sequence, the distribution written out from the softmaxes (module docstring of modeling_rnng.py)."""
    inner, layout = model.model, model.grammar.layout
    embed = inner.embed_tokens.weight
    bidirectional = torch.nn.LSTM(8, 8, batch_first=True, bidirectional=True)
    for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        getattr(bidirectional, name).data = getattr(inner.composition.forward_lstm, name).data
        getattr(bidirectional, name + "_reverse").data = getattr(inner.composition.backward_lstm, name).data

    def lstm(x, state):
        new = []
        for layer, cell in enumerate(inner.stack_lstm.cells):
            h, c = cell(x[None], (state[layer][0][None], state[layer][1][None]) if state else None)
            new.append((h[0], c[0]))
            x = h[0]
        return new

    def distribution(state, stack):
        u = inner.context(state[-1][0])
        actions = torch.log_softmax(model.action_head(u), -1)
        word_ids = [i for i in range(len(VOCAB.tokens)) if layout.kind(i).name == "TERMINAL"]
        words = torch.log_softmax(embed[word_ids] @ u + model.word_bias[word_ids], -1)
        table = {i: actions[0] + words[k] for k, i in enumerate(word_ids)}
        for label in range(layout.open_nt_stop - layout.open_nt_start):
            table[layout.open_nt_start + label] = actions[2 + label]
        open_ones = [entry for entry in stack if entry[2] is not None]
        if open_ones:
            table[layout.close_nt_start + open_ones[-1][2]] = actions[1]
        values = torch.stack(list(table.values()))
        return {i: v - torch.logsumexp(values, 0) for i, v in zip(table, values)}  # REDUCE's mass left out if none

    with torch.no_grad():
        bottom = lstm(embed[ids[0]], None)
        stack = []  # (vector, state after it, open label or None)
        state, result = bottom, []
        for action in ids[1:]:
            result.append(float(distribution(state, stack)[action]))
            kind = layout.kind(action).name
            if kind == "CLOSE_NT":
                opened = max(k for k, entry in enumerate(stack) if entry[2] is not None)
                nt = stack[opened][0]
                children = [entry[0] for entry in stack[opened + 1:]]
                outputs, _ = bidirectional(torch.stack([nt, *children, nt])[None])
                read = torch.cat([outputs[0, len(children), :8], outputs[0, 1, 8:]])
                vector = torch.relu(inner.composition.output(read))
                below = stack[opened - 1][1] if opened else bottom
                stack = stack[:opened] + [(vector, lstm(vector, below), None)]
            else:
                vector = embed[action]
                label = action - layout.open_nt_start if kind == "OPEN_NT" else None
                stack.append((vector, lstm(vector, state), label))
            state = stack[-1][1]
    return result


def shifted_log_probs(logits, ids):
    log_probs = torch.log_softmax(logits, -1)
    return [float(log_probs[t, ids[t + 1]]) for t in range(len(ids) - 1)]


@pytest.mark.parametrize("layers", [1, 2])
def test_the_batched_stack_computes_what_a_plain_stack_machine_computes(layers):
    model = rnng(seed=layers, layers=layers)
    for tree in TREES:
        ids = ids_of(tree)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        assert shifted_log_probs(logits, ids) == pytest.approx(plain_log_probs(model, ids), abs=1e-5), tree


def test_logits_are_the_rnngs_distribution_over_the_tokenizers_ids():
    """Where a constituent is open the logits are normalized log-probabilities (REDUCE at the innermost one's closing
    bracket only); where none is, REDUCE's probability is missing from them; a word is p(SHIFT) p(w | u)."""
    model = rnng()
    layout = model.grammar.layout
    ids = ids_of(TREES[1])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    totals = torch.logsumexp(logits, -1)
    assert float(totals[0]) < -1e-4  # after `<s>`: no REDUCE
    assert totals[1:-1].abs().max() < 1e-5  # inside the tree
    opened = [i for i in ids if layout.open_nt_start <= i < layout.open_nt_stop]
    for t in range(1, len(ids) - 1):
        finite = torch.isfinite(logits[t, layout.close_nt_start:layout.close_nt_stop]).nonzero().flatten().tolist()
        assert len(finite) == 1  # one closing bracket: the innermost open constituent's
    assert finite == [layout.closing_id_for(opened[0]) - layout.close_nt_start]  # before the last action: the root's
    assert torch.isinf(logits[:, [layout.pad_token_id, layout.bos_token_id, layout.eos_token_id]]).all()


def test_a_padded_batch_gives_each_sentence_what_it_gets_alone():
    model = rnng()
    sequences = [ids_of(tree) for tree in TREES]
    width = max(map(len, sequences))
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([ids])).logits[0] for ids in sequences]
        for side in ("right", "left"):
            input_ids = torch.full((len(sequences), width), layout_pad := VOCAB.layout.pad_token_id)
            mask = torch.zeros_like(input_ids)
            for row, ids in enumerate(sequences):
                where = slice(0, len(ids)) if side == "right" else slice(width - len(ids), width)
                input_ids[row, where], mask[row, where] = torch.tensor(ids), 1
            logits = model(input_ids=input_ids, attention_mask=mask).logits
            for row, ids in enumerate(sequences):
                where = slice(0, len(ids)) if side == "right" else slice(width - len(ids), width)
                assert torch.allclose(logits[row, where].nan_to_num(neginf=-1e30), alone[row].nan_to_num(neginf=-1e30),
                                      atol=1e-5), (side, row)
    assert layout_pad == 0


def test_labels_give_the_mean_nll_of_the_actions_and_gradients_reach_every_parameter():
    model = rnng()
    model.train()
    sequences = [ids_of(tree) for tree in TREES]
    width = max(map(len, sequences))
    input_ids = torch.tensor([ids + [0] * (width - len(ids)) for ids in sequences])
    output = model(input_ids=input_ids, attention_mask=(input_ids != 0).long(), labels=input_ids)
    expected = -np.mean([value for ids in sequences for value in plain_log_probs(model, ids)])
    assert float(output.loss) == pytest.approx(expected, abs=1e-5)
    output.loss.backward()
    untouched = [name for name, parameter in model.named_parameters() if parameter.grad is None
                 or not parameter.grad.abs().sum()]
    assert untouched == []


def test_beam_search_scores_are_the_forwards_and_its_decoder_agrees_with_reencoding():
    model = rnng(seed=3)
    options = dict(beam_size=30, word_beam_size=10, fast_track=2, num_trees=4)
    sentences = [SENTENCE, SENTENCE[:2], [SENTENCE[2], SENTENCE[0]]]
    results = WordSynchronousBeamSearch(model, BeamSearchOptions(**options)).search(sentences)
    again = WordSynchronousBeamSearch(model, BeamSearchOptions(**options, use_cache=False)).search(sentences)
    for result, other in zip(results, again):
        assert [ids for ids, _ in result.trees] == [ids for ids, _ in other.trees]
        assert result.log_prob == pytest.approx(other.log_prob, abs=1e-5)
        joint = joint_log_probs(model, [ids for ids, _ in result.trees])
        assert [value for _, value in result.trees] == pytest.approx(joint, abs=1e-5)


def test_an_rnng_refuses_what_it_cannot_read():
    model = rnng()
    with pytest.raises(ValueError, match="is not allowed here"):  # the grammar's legality: a `)` with nothing open
        model(input_ids=torch.tensor([[VOCAB.layout.bos_token_id, VOCAB.ids["S)"]]]))
    with pytest.raises(ValueError, match="does not take"):
        model(input_ids=torch.tensor([ids_of(TREES[2])]), position_mask=torch.ones(1, 4, 4))
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        model(input_ids=torch.tensor([[VOCAB.layout.bos_token_id, len(VOCAB.tokens) + 5]]))
    with pytest.raises(ValueError, match="input of 11 actions is longer than the model.s maximum of 6"):
        rnng(max_sequence_length=6)(input_ids=torch.tensor([ids_of(TREES[0])]))
    with pytest.raises(ValueError, match="composition must be one of"):
        rnng(composition="attention")
    with pytest.raises(ValueError, match="closing nonterminal range has 2 ids; expected 3"):
        RNNGForCausalLM(RNNGConfig(vocab_size=20, open_nt_start=5, open_nt_stop=8, close_nt_start=8, close_nt_stop=10))
