"""SOM's gated cell (paper 001, eqs. 8-9) on plain tensors, and the bottom-up composition chain of eq. 3 for one time
step as one autograd node whose backward is written out.

Why a written-out backward: the chain is N - 1 cells run one after another on [B, D] rows, so autograd records
about fifteen small operations a cell and replays them one by one, and each cell's weight gradient is a product of
B rows plus an addition of a whole weight matrix. Here the backward goes down the chain with only the products and
the element-wise derivatives each cell needs, and the weight gradients of all cells of the step are two products
of (N - 1) B rows. The products run against contiguous copies of the transposed weights, which this CPU's
kernels take about twice as fast for few rows (the CellWeights note says where they come from).

The forward of a cell is `gated_cell`, the one source of eqs. 8-9: GatedCell (the prediction network's RNN, under
autograd) and CompositionChain (eq. 3) both call it. tests/test_som_chain.py checks CompositionChain's gradients
against autograd through `gated_cell`, dropout and dSOM's segments included.

Hub code: imports only torch.
"""

from typing import NamedTuple

import torch

aten = torch.ops.aten


class CellWeights(NamedTuple):
    """One gated cell's weights as the products use them. state_weight [H, D] and gate_weight [4D, H] are W1's
    state half and W2 as the model applies them (dSOM's block masks already applied); state_weight_t and
    gate_weight_t are the same values transposed, contiguous (made once per forward call: a transposed copy costs
    about as much as five to eight of the cell's products, and a step runs 2 (N - 1) of them). norms: (start, end,
    weight, bias) for each segment the layer norm of eq. 9 normalizes separately (one for eSOM, two for dSOM)."""

    state_weight: torch.Tensor
    state_weight_t: torch.Tensor
    gate_weight: torch.Tensor
    gate_weight_t: torch.Tensor
    gate_bias: torch.Tensor
    norms: tuple
    eps: float
    dropout: float  # the probability in training, 0 otherwise


def dropout_with_mask(x, p):
    """(dropped x, the kept mask or None): torch's native dropout, which draws what F.dropout draws."""
    return torch.native_dropout(x, p, True) if p > 0 else (x, None)


def layer_norm_segments(z, weights):
    """The layer norm of eq. 9 over each segment of z [R, D]: (output, [(mean, rstd) per segment])."""
    if len(weights.norms) == 1:
        _, _, weight, bias = weights.norms[0]
        out, mean, rstd = aten.native_layer_norm(z, [z.shape[-1]], weight, bias, weights.eps)
        return out, [(mean, rstd)]
    parts, stats = [], []
    for start, end, weight, bias in weights.norms:
        out, mean, rstd = aten.native_layer_norm(z[:, start:end].contiguous(), [end - start], weight, bias, weights.eps)
        parts.append(out)
        stats.append((mean, rstd))
    return torch.cat(parts, -1), stats


class CellRecord(NamedTuple):
    """What the backward of one cell reads: its dropped inputs and their masks, the hidden layer after the ReLU, the
    sigmoids [R, 3, D] of f, i, c and their operands [R, 3, D] (h, m, u), the layer norm's input and statistics,
    and its output."""

    h_dropped: torch.Tensor
    h_mask: torch.Tensor | None
    hidden: torch.Tensor
    hidden_dropped: torch.Tensor
    hidden_mask: torch.Tensor | None
    sigmoids: torch.Tensor
    operands: torch.Tensor
    z: torch.Tensor
    stats: list
    out: torch.Tensor


def gated_cell(h, m, projected, weights, keep_record=False):
    """Eqs. 8-9 for rows h, m [R, D] (h the running state, m the new input) and projected = W1's input half applied
    to drop(m), plus W1's bias [R, H]:

        [f; i; c; u] = W2 drop(ReLU(W1_h drop(h) + projected)) + b2,   out = LN(s(f) h + s(i) m + s(c) u)

    Returns out [R, D], and with keep_record the CellRecord that CompositionChain's backward reads."""
    size = h.shape[-1]
    h_dropped, h_mask = dropout_with_mask(h, weights.dropout)
    hidden = torch.relu(torch.addmm(projected, h_dropped, weights.state_weight_t))
    hidden_dropped, hidden_mask = dropout_with_mask(hidden, weights.dropout)
    gates = torch.addmm(weights.gate_bias, hidden_dropped, weights.gate_weight_t)
    sigmoids = torch.sigmoid(gates[:, :3 * size]).view(-1, 3, size)
    operands = torch.stack([h, m, gates[:, 3 * size:]], 1)
    z = (sigmoids * operands).sum(1)
    out, stats = layer_norm_segments(z, weights)
    if not keep_record:
        return out
    return out, CellRecord(h_dropped, h_mask, hidden, hidden_dropped, hidden_mask, sigmoids, operands, z, stats, out)


class CompositionChain(torch.autograd.Function):
    """Eq. 3 for one time step, softly mixed as in eqs. 2-3:

        slot 0 = a_0 x,   slot k = a_k x + c_k cell(slot k-1, memory k)   for k = first, ..., N - 1

    x [R, D], memory [R, N, D], projected [R, N, H] (W1's input half of drop(memory) plus W1's bias), input_weight
    a and composed_weight c [R, N]. Slots 1 .. first - 1 hold a_k x alone: the caller passes `first` only where
    c_k is exactly 0 for every row there (no split can have gone below `first`), so skipping their cells changes
    no value and no gradient. Returns the candidates [R, N, D].

    Called through composition_chain, which passes the weights that get gradients one by one (autograd sees only
    the arguments of apply); `weights` (CellWeights) holds the same tensors for the forward. W1's bias reaches its
    gradient through `projected`."""

    @staticmethod
    def forward(ctx, weights, first, x, memory, projected, input_weight, composed_weight, *parameters):
        inputs_x = (input_weight[..., None] * x[:, None]).unbind(1)
        memories, projections = memory.unbind(1), projected.unbind(1)
        composes = composed_weight[..., None].unbind(1)
        slots, records = list(inputs_x[:first]), []
        for slot in range(first, memory.shape[1]):
            out, record = gated_cell(slots[-1], memories[slot], projections[slot], weights, keep_record=True)
            slots.append(torch.addcmul(inputs_x[slot], composes[slot], out))
            records.append(record)
        ctx.weights, ctx.first, ctx.records = weights, first, records
        ctx.save_for_backward(x, input_weight, composed_weight)
        return torch.stack(slots, 1)

    @staticmethod
    def backward(ctx, grad_candidates):
        x, input_weight, composed_weight = ctx.saved_tensors
        weights, first, records = ctx.weights, ctx.first, ctx.records
        ctx.records = None
        rows, num_slots, size = grad_candidates.shape
        scale = 1 / (1 - weights.dropout) if weights.dropout > 0 else 1.0
        composes = composed_weight[..., None].unbind(1)
        grad_slots = list(grad_candidates.unbind(1))  # each slot's gradient, completed from the top down
        grad_gates = grad_candidates.new_empty(len(records), rows, 4 * size)  # every cell's, for the weights
        grad_memory, grad_pre, grad_outs = [], [], []
        for cell in range(len(records) - 1, -1, -1):  # down the chain
            slot, record = first + cell, records[cell]
            grad_out = grad_slots[slot] * composes[slot]
            grad_z = _layer_norm_backward(grad_out, record, weights)
            # z = s(f) h + s(i) m + s(c) u: each sigmoid's gradient is grad_z times its operand; u's is grad_z s(c)
            gates = grad_gates[cell]
            aten.sigmoid_backward.grad_input(grad_z[:, None] * record.operands, record.sigmoids,
                                             grad_input=gates[:, :3 * size].view(rows, 3, size))
            torch.mul(grad_z, record.sigmoids[:, 2], out=gates[:, 3 * size:])
            grad_hidden = _dropout_backward(gates @ weights.gate_weight, record.hidden_mask, scale)
            grad_pre.append(aten.threshold_backward(grad_hidden, record.hidden, 0))
            grad_h = _dropout_backward(grad_pre[-1] @ weights.state_weight, record.h_mask, scale)
            # h is the slot below, a candidate of its own: its gradient gathers both uses
            grad_slots[slot - 1] = torch.addcmul(grad_slots[slot - 1] + grad_h, grad_z, record.sigmoids[:, 0])
            grad_memory.append(grad_z * record.sigmoids[:, 1])
            grad_outs.append(grad_out)
        grad_memory, grad_pre, grad_outs = grad_memory[::-1], grad_pre[::-1], grad_outs[::-1]  # in slot order
        grad_slots = torch.stack(grad_slots, 1)  # the gradients of the a_k x terms, and of the c_k cell(...) terms
        outs = torch.stack([record.out for record in records], 1)
        below = [grad_candidates.new_zeros(rows, first)]
        grad_composed = torch.cat(below + [(grad_slots[:, first:] * outs).sum(-1)], 1)
        grad_memory = torch.cat([grad_candidates.new_zeros(rows, first, size), torch.stack(grad_memory, 1)], 1)
        grad_projected = torch.stack(grad_pre, 1)
        grad_projected = torch.cat([grad_projected.new_zeros(rows, first, grad_projected.shape[-1]), grad_projected], 1)
        # every cell's weight gradients in one product each, over all cells' rows
        grad_gates, grad_pre = grad_gates.flatten(0, 1), torch.cat(grad_pre)
        grad_state_weight = grad_pre.t() @ torch.cat([record.h_dropped for record in records])
        grad_gate_weight = grad_gates.t() @ torch.cat([record.hidden_dropped for record in records])
        norm_grads = _layer_norm_parameter_grads(torch.cat(grad_outs), records, weights)
        return (None, None, (grad_slots * input_weight[..., None]).sum(1), grad_memory, grad_projected,
                (grad_slots * x[:, None]).sum(-1), grad_composed, grad_state_weight, grad_gate_weight,
                grad_gates.sum(0), *norm_grads)


def composition_chain(weights, first, x, memory, projected, input_weight, composed_weight):
    """CompositionChain.apply with the weights that get gradients as separate arguments.

    Under autocast the chain runs in autocast's dtype with autocast off: its backward, which autocast does not
    cover, then meets tensors of one dtype (autograd casts each gradient back to its input's dtype)."""
    device = x.device.type
    tensors = (x, memory, projected, input_weight, composed_weight)
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        tensors = tuple(tensor.to(dtype) for tensor in tensors)
        weights = weights._replace(
            **{name: getattr(weights, name).to(dtype) for name in ("state_weight", "state_weight_t", "gate_weight",
                                                                   "gate_weight_t", "gate_bias")},
            norms=tuple((start, end, weight.to(dtype), bias.to(dtype)) for start, end, weight, bias in weights.norms))
        with torch.autocast(device, enabled=False):
            return composition_chain(weights, first, *tensors)
    norms = [tensor for _, _, weight, bias in weights.norms for tensor in (weight, bias)]
    return CompositionChain.apply(weights, first, *tensors, weights.state_weight, weights.gate_weight,
                                  weights.gate_bias, *norms)


def _dropout_backward(grad, mask, scale):
    return grad if mask is None else aten.native_dropout_backward(grad, mask, scale)


def _layer_norm_backward(grad_out, record, weights):
    """The gradient of the layer norm's input (its weights' gradients are summed over all cells at the end)."""
    if len(weights.norms) == 1:
        (_, _, weight, bias), (mean, rstd) = weights.norms[0], record.stats[0]
        return aten.native_layer_norm_backward(grad_out, record.z, [record.z.shape[-1]], mean, rstd, weight, bias,
                                               [True, False, False])[0]
    return torch.cat([aten.native_layer_norm_backward(grad_out[:, start:end].contiguous(),
                                                      record.z[:, start:end].contiguous(), [end - start], mean, rstd,
                                                      weight, bias, [True, False, False])[0]
                      for (start, end, weight, bias), (mean, rstd) in zip(weights.norms, record.stats)], -1)


def _layer_norm_parameter_grads(grad_out, records, weights):
    """(weight, bias) gradients of each segment's layer norm, summed over all cells' rows."""
    z = torch.cat([record.z for record in records])
    grads = []
    for index, (start, end, _, _) in enumerate(weights.norms):
        mean = torch.cat([record.stats[index][0] for record in records])
        rstd = torch.cat([record.stats[index][1] for record in records])
        grad = grad_out[:, start:end]
        grads += [(grad * ((z[:, start:end] - mean) * rstd)).sum(0), grad.sum(0)]
    return grads
