"""SOM's gated cell (eqs. 8-9) and the composition chain of eq. 3 with its written-out backward (som_chain.py)."""

import pytest
import torch
import torch.nn.functional as F

from hf_slm.modeling.configuration_som import SyntacticOrderedMemoryConfig
from hf_slm.modeling.modeling_som import GatedCell
from hf_slm.modeling.som_chain import composition_chain

ROWS, SLOTS, SIZE, HIDDEN = 3, 6, 8, 12


def cell_for(disentangle=False, dropout=0.0):
    config = SyntacticOrderedMemoryConfig(vocab_size=10, hidden_size=SIZE, num_slots=SLOTS, intermediate_size=HIDDEN,
                                          parser_size=6, dropout=dropout, disentangle=disentangle,
                                          semantic_size=5 if disentangle else None)
    torch.manual_seed(0)
    cell = GatedCell(config).double().train()
    for parameter in cell.parameters():  # away from the initialization's zeros and ones, so that every term counts
        torch.nn.init.normal_(parameter, std=0.5)
    return cell


def chain_inputs():
    """x, memory and the split scores (the leaves the gradients are taken of)."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, SIZE, generator=generator, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(ROWS, SLOTS, SIZE, generator=generator, dtype=torch.float64, requires_grad=True)
    scores = torch.randn(ROWS, SLOTS, generator=generator, dtype=torch.float64, requires_grad=True)
    return x, memory, scores


def soft_weights(scores, first):
    """a_k (x goes into slot k: the split is at k + 1) and c_k (slot k is composed: the split is at k or below) from
    p = softmax(scores), which is 0 below `first`, as where no slot below is open."""
    closed = torch.arange(SLOTS) < first
    split_probs = torch.softmax(scores.masked_fill(closed, float("-inf")), -1)
    input_weight = torch.cat([split_probs[:, 1:], torch.zeros_like(split_probs[:, :1])], -1)
    return input_weight, split_probs.cumsum(-1)


def chain_by_autograd(cell, x, memory, scores, first=1):
    """Eq. 3 cell by cell under autograd, through the same cell function."""
    input_weight, composed_weight = soft_weights(scores, first)
    projected, weights = cell.project_input(memory), cell.weights()
    slots = [input_weight[:, :1] * x]
    for slot in range(1, SLOTS):
        composed = cell(slots[-1], memory[:, slot], projected[:, slot], weights=weights)
        slots.append(input_weight[:, slot, None] * x + composed_weight[:, slot, None] * composed)
    return torch.stack(slots, 1)


def chain_by_hand(cell, x, memory, scores, first=1, skip_below=1):
    input_weight, composed_weight = soft_weights(scores, first)
    return composition_chain(cell.weights(), skip_below, x, memory, cell.project_input(memory), input_weight,
                             composed_weight)


def values_and_gradients(cell, chain, **options):
    cell.zero_grad()
    inputs = chain_inputs()
    torch.manual_seed(5)  # the same dropout masks for both chains
    candidates = chain(cell, *inputs, **options)
    weights = torch.randn(candidates.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (candidates * weights).sum().backward()
    return {"candidates": candidates.detach(), "x": inputs[0].grad, "memory": inputs[1].grad,
            "split scores": inputs[2].grad,
            **{name: parameter.grad.clone() for name, parameter in cell.named_parameters()}}


@pytest.mark.parametrize("disentangle", [False, True])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_the_written_out_backward_equals_autograd(disentangle, dropout):
    cell = cell_for(disentangle, dropout)
    expected = values_and_gradients(cell, chain_by_autograd)
    found = values_and_gradients(cell, chain_by_hand)
    assert expected.keys() == found.keys()
    for name in expected:
        assert expected[name].abs().max() > 0, name  # every input and parameter takes part
        torch.testing.assert_close(found[name], expected[name], rtol=1e-10, atol=1e-12, msg=name)


def test_dsom_gradients_keep_the_block_triangular_layout():
    cell = cell_for(disentangle=True)
    gradients = values_and_gradients(cell, chain_by_hand)
    # a syntactic output (index >= its layer's semantic size) never reads a semantic input
    gates = gradients["to_gates.linear.weight"].view(4, SIZE, HIDDEN)
    semantic_hidden = round(HIDDEN * 5 / SIZE)
    assert gates[:, 5:, :semantic_hidden].abs().max() == 0
    assert gates[:, :5, semantic_hidden:].abs().max() > 0


def test_cells_with_weight_zero_are_skipped_without_changing_a_value_or_a_gradient():
    cell = cell_for()
    whole = values_and_gradients(cell, chain_by_hand, first=3)  # p is 0 below slot 3, so c_1 and c_2 are exactly 0
    skipping = values_and_gradients(cell, chain_by_hand, first=3, skip_below=3)
    for name in whole:
        torch.testing.assert_close(skipping[name], whole[name], rtol=1e-12, atol=1e-14, msg=name)
    # where c_2 is not 0, its cell counts
    open_below = values_and_gradients(cell, chain_by_hand, first=2)
    assert not torch.allclose(values_and_gradients(cell, chain_by_hand, first=2, skip_below=3)["candidates"],
                              open_below["candidates"])


def test_the_cell_computes_equations_8_and_9():
    cell = cell_for().eval()
    h, m = torch.randn(ROWS, SIZE, dtype=torch.float64), torch.randn(ROWS, SIZE, dtype=torch.float64)
    hidden = F.relu(h @ cell.from_state.linear.weight.T + m @ cell.from_input.linear.weight.T
                    + cell.from_state.linear.bias)
    forget, keep, update, value = (hidden @ cell.to_gates.linear.weight.T + cell.to_gates.linear.bias).chunk(4, -1)
    norm = cell.norm.norms[0]
    expected = F.layer_norm(torch.sigmoid(forget) * h + torch.sigmoid(keep) * m + torch.sigmoid(update) * value,
                            (SIZE,), norm.weight, norm.bias, norm.eps)
    with torch.no_grad():
        torch.testing.assert_close(cell(h, m), expected, rtol=1e-12, atol=1e-12)
