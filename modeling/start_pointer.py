"""The start-position pointer of paper 003's Nb-Up variants (section 2.2).

In a bottom-up, non-binary tree a `)` does not say where its constituent starts, so with a_k = `)` the model also
predicts the start s_k among the feasible starts C_k (the items on the stack: compositional_grammars.py's
`legal_starts`, read at `legal_start_positions`):

    h_i = [o_i^(1); o_i^(2)]       the outputs of the first two attention heads of the final layer at position i
                                    (per-head attention outputs, before the output projection)
    p(s_k = i | a_<k) = exp(h_{k-1}^T Θ h_i) / sum_{j in C_k} exp(h_{k-1}^T Θ h_j)   for i in C_k, 0 otherwise
    p(a_k = (")", s_k) | a_<k) = p(")" | a_<k) p(s_k | a_<k)

where k - 1 is the position whose output predicts a_k and Θ is a learned [2 d_head, 2 d_head] matrix.

`FinalLayerHeads` records h at every position a forward call computes (forward hooks on the final layer's
attention modules, so the backbone stays unchanged and every path through it, training and the beam search's
cached decoder alike, yields the same h); `StartPointer` holds Θ and scores. Both the batch forward
(modeling_slm.py) and the search decoder (search_decoders.py) score through `StartPointer.log_probs`.

Hub code: imports only torch and its sibling files.
"""

import torch
from torch import nn

POINTER_HEADS = 2  # "the outputs of the first two attention heads in the final layer"


class FinalLayerHeads:
    """Records the per-head attention outputs of a decoder's final layer at each forward call, and gives h [B, T, D]
    (D = 2 d_head): the first two heads in the layer's own head order (restricted heads, then unrestricted ones,
    as its output projection concatenates them; with distinct COMPOSE attention a COMPOSE position's restricted
    heads are the COMPOSE module's, as in the layer)."""

    def __init__(self, decoder):
        self._is_compose = decoder.is_compose
        layer = decoder.layers[-1]
        self._restricted = list(layer.attentions)
        self._unrestricted = layer.unrestricted_attention
        self._outputs = {}
        for module in self._restricted + ([self._unrestricted] if self._unrestricted is not None else []):
            module.register_forward_hook(self._record)

    def _record(self, module, inputs, output):
        self._outputs[id(module)] = output  # [B, T, h, d_head]

    def take(self, kinds=None):
        """h [B, T, 2 d_head] of the positions of the last forward call (kinds [B, T]: PositionKind, needed only
        with distinct COMPOSE attention); forgets them, so a stale h is never read twice."""
        parts = []
        if self._restricted:
            heads = self._outputs.pop(id(self._restricted[0]))
            if len(self._restricted) == 2:
                compose = self._outputs.pop(id(self._restricted[1]))
                is_compose = self._is_compose(kinds)[:, :, None, None]
                heads = torch.where(is_compose, compose, heads)
            parts.append(heads)
        if self._unrestricted is not None:
            parts.append(self._outputs.pop(id(self._unrestricted)))
        heads = torch.cat(parts, dim=2)[:, :, :POINTER_HEADS]
        return heads.flatten(2)


class StartPointer(nn.Module):
    """Θ and the pointer's distribution: log p(s = i) over candidate positions i (section 2.2)."""

    def __init__(self, head_dim):
        super().__init__()
        size = POINTER_HEADS * head_dim
        self.theta = nn.Parameter(torch.empty(size, size))
        self.reset_parameters()

    def reset_parameters(self):
        # The bilinear score's scale at initialization: h^T Θ h' of unit-variance h is O(1).
        nn.init.normal_(self.theta, std=self.theta.shape[0] ** -1)

    def log_probs(self, query, keys, candidates):
        """query [..., T, D] (h_{k-1} of T predicting positions), keys [..., C, D] (h_i of C positions),
        candidates [..., T, C] bool (i in C_k of each query) -> [..., T, C] float32 log p(s = i), -inf outside C_k
        (everywhere in a row without candidates)."""
        scores = torch.matmul(torch.matmul(query, self.theta), keys.transpose(-1, -2)).float()
        scores = scores.masked_fill(~candidates, float("-inf"))
        log_probs = torch.log_softmax(scores, dim=-1)
        return log_probs.masked_fill(~candidates, float("-inf"))  # an empty row: -inf, not NaN
