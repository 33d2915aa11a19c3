"""Syntactic Ordered Memory (SOM, paper 001) as a transformers causal LM.

SOM is a recurrent LM with an incremental parser inside (sections 3.1-3.4). Per token x_t:
1. the one-step look-ahead parser p_t attends from x_t over the previous candidates M^_{t-1} (masked by pi_{t-1})
   and picks the split: candidates up to the split are written into memory, the memory above it is copied
   (eq. 1, done softly: slot k takes the candidate with probability sum_{j>=k} p_t^j);
2. x_t goes into the slot below the split and the new candidates are composed bottom-up,
   M^_t^j = cell(M_t^j, M^_t^{j-1}) (eqs. 2-3), again mixed by p_t; pi_t marks the non-empty candidates (eq. 4);
3. the prediction network: the zero-step look-ahead parser p'_t (eqs. 5-6) chooses a slot i, and an RNN over
   [M_t^N, ..., M_t^{i+1}, M^_t^i] (eqs. 7-9) gives h_t, hence p(x_{t+1} | x_<=t) through the output layer tied
   to the embeddings (eq. 10). config.prediction_network says how i is chosen: "sampled" (section 3.2: drawn
   from p'_t in training, its argmax in evaluation) or "mixture" (h_t = sum_i p'_t(i) RNN_i, the expectation).
The memory's decisions are soft, and in evaluation the slot choice of step t depends on x_<=t only, so the model
is an ordinary conditional LM over tokens: log p(x) is the sum of the shifted log-probs and the perplexity is
exact (the structure is marginalized by the soft parser, not bounded by a beam).

Slots are indexed 0..N-1 in tensors (paper slot k + 1); a split is the index of the slot that the new node takes
(paper xi_t - 1), never 0. See som_structure.py for the grid conventions and Algorithm 1.

HF contract: `model(input_ids, attention_mask)` gives logits [B, T, V], `logits[:, t]` predicting token t + 1;
`labels=input_ids` gives the usual shifted LM loss; with the collator's `som_first_siblings` the structural
loss of section 3.3 is added. `past_key_values` (`cache` from transformers 5.24) is an `OrderedMemoryState`
(the recurrent state), so transformers' own `generate` works, beam search included (the state reorders).
Positions under a 0 of the attention mask leave the state untouched and are skipped (a step computes its real rows
only), so left and right padding both work.

Vectorization: over the batch, and over the slots for everything but the two chains that the equations make
sequential in the slots (the bottom-up composition of eq. 3 and the top-down RNN of eq. 7). The prediction
network runs once over all time steps after the time loop, so its slot loop is not inside the time loop. The
composition chain of a step is one autograd node with its backward written out (som_chain.py), and it skips the
slots below the lowest open one, whose compositions have weight exactly 0 (the first N - 2 words of a sentence).

Hub code: imports only torch, transformers and its sibling files.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_som import SyntacticOrderedMemoryConfig
from .generation_mixin import SyntacticGenerationMixin
from .padding import check_padding_at_the_ends, check_starts
from .safe_loading import SafetensorsOnlyLoading
from .som_chain import CellWeights, composition_chain, gated_cell

IGNORE_INDEX = -100
# transformers 5.24 renamed `past_key_values` to `cache`; forward takes either, outputs fill the defined field
CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
IGNORED_GENERATION_INPUTS = ("position_ids", "cache_position", "output_attentions", "logits_to_keep", "use_cache",
                             "output_hidden_states", "return_dict")


# ---- dSOM building blocks: block-triangular linear layers and per-segment layer norms -------------------------
def syntactic_features(size, config):
    """Which features of a layer of `size` features are syntactic (dSOM; None for eSOM), as a tuple of bools.
    Every layer splits in the proportion D_syn / D, the syntactic features last. Plain Python values, not
    tensors: transformers builds models on the meta device when loading."""
    if not config.disentangle:
        return None
    semantic = round(size * config.semantic_size / config.hidden_size)
    semantic = min(max(semantic, 1), size - 1)
    return tuple(index >= semantic for index in range(size))


class SegmentedLinear(nn.Module):
    """y = W x + b; for dSOM W is block triangular: [y_sem; y_syn] = [[W_sem2sem, W_syn2sem], [0, W_syn2syn]] x.

    in_syntactic [in], out_syntactic [out]: feature layouts from `syntactic_features` (None: a dense layer)."""

    def __init__(self, in_features, out_features, in_syntactic=None, out_syntactic=None, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.layout = None if in_syntactic is None else (tuple(in_syntactic), tuple(out_syntactic))
        self._allowed = {}  # (device, dtype) -> the 0/1 weight mask, built on first use

    def allowed(self, device, dtype):
        key = (device, dtype)
        if key not in self._allowed:
            in_syntactic = torch.tensor(self.layout[0], device=device)
            out_syntactic = torch.tensor(self.layout[1], device=device)
            # a syntactic output must not read a semantic input
            self._allowed[key] = (~(out_syntactic[:, None] & ~in_syntactic[None, :])).to(dtype)
        return self._allowed[key]

    def effective_weight(self):
        """W as applied: dSOM's block mask multiplied in."""
        weight = self.linear.weight
        if self.layout is not None:
            weight = weight * self.allowed(weight.device, weight.dtype)
        return weight

    def forward(self, x):
        return F.linear(x, self.effective_weight(), self.linear.bias)


class SegmentedLayerNorm(nn.Module):
    """The layer norm of eq. 9: over the whole vector (eSOM) or separately over the semantic and syntactic segments
    (dSOM). Holds the parameters; som_chain.layer_norm_segments applies them (see segments())."""

    def __init__(self, size, config):
        super().__init__()
        syntactic = syntactic_features(size, config)
        self.split = None if syntactic is None else syntactic.index(True)
        sizes = [size] if self.split is None else [self.split, size - self.split]
        self.norms = nn.ModuleList(nn.LayerNorm(part, eps=config.layer_norm_eps) for part in sizes)

    def segments(self):
        """(start, end, weight, bias) of each separately normalized segment."""
        starts = [0] if self.split is None else [0, self.split]
        return tuple((start, start + norm.normalized_shape[0], norm.weight, norm.bias)
                     for start, norm in zip(starts, self.norms))


def parser_view(x, config):
    """What p_t and p'_t read: x itself, or for dSOM x with its semantic segment behind a gradient stop (eqs. 15,
    17: the structure depends on both segments but trains only the syntactic one)."""
    if not config.disentangle:
        return x
    return torch.cat([x[..., :config.semantic_size].detach(), x[..., config.semantic_size:]], -1)


class GatedCell(nn.Module):
    """The cell of eqs. 8-9, used for the compositions of eq. 3 and the RNN of eq. 7:

    [f; i; c; u] = W2 ReLU(W1 [h; m] + b1) + b2,   out = LN(sigmoid(f) * h + sigmoid(i) * m + sigmoid(c) * u)

    h [R, D] is the running state (for compositions: the right child, the candidate from the slot below),
    m [R, D] the new input (for compositions: the left child, the memory of the slot). The computation is
    som_chain.gated_cell; this module holds its parameters (dropout before each linear layer, Appendix A)."""

    def __init__(self, config):
        super().__init__()
        size, hidden = config.hidden_size, config.intermediate_size
        syntactic, syntactic_hidden = syntactic_features(size, config), syntactic_features(hidden, config)
        gates = None if syntactic is None else syntactic * 4
        self.from_state = SegmentedLinear(size, hidden, syntactic, syntactic_hidden)
        self.from_input = SegmentedLinear(size, hidden, syntactic, syntactic_hidden, bias=False)
        self.to_gates = SegmentedLinear(hidden, 4 * size, syntactic_hidden, gates)
        self.norm = SegmentedLayerNorm(size, config)
        self.dropout = nn.Dropout(config.dropout)

    def project_input(self, m):
        """W1's input half applied to m [..., D], plus b1: done for all slots at once before a slot loop."""
        return self.from_input(self.dropout(m)) + self.from_state.linear.bias

    def weights(self):
        """The weights as som_chain.gated_cell takes them (CellWeights): made once per forward call."""
        state, gates = self.from_state.effective_weight(), self.to_gates.effective_weight()
        return CellWeights(state, state.t().contiguous(), gates, gates.t().contiguous(), self.to_gates.linear.bias,
                           self.norm.segments(), self.norm.norms[0].eps, self.dropout.p if self.training else 0.0)

    def forward(self, h, m, projected_m=None, weights=None):
        if projected_m is None:
            projected_m = self.project_input(m)
        return gated_cell(h, m, projected_m, self.weights() if weights is None else weights)


class SplitScorer(nn.Module):
    """alpha^k = w2 . ReLU(W1 [q; M^k] + b1) + b2 for every slot k at once (eq. 5; p_t adds the query q = x_t)."""

    def __init__(self, config, with_query):
        super().__init__()
        self.from_slots = nn.Linear(config.hidden_size, config.parser_size)
        self.from_query = nn.Linear(config.hidden_size, config.parser_size, bias=False) if with_query else None
        self.score = nn.Linear(config.parser_size, 1)
        self.dropout = nn.Dropout(config.dropout)
        self.config = config

    def forward(self, slots, query=None):
        """slots [..., N, D], query [..., D] or None -> scores [..., N]."""
        hidden = self.from_slots(self.dropout(parser_view(slots, self.config)))
        if self.from_query is not None:
            hidden = hidden + self.from_query(self.dropout(parser_view(query, self.config)))[..., None, :]
        return self.score(self.dropout(F.relu(hidden)))[..., 0]


def masked_log_softmax(scores, mask):
    """log of masked_softmax(scores, mask) of eq. 6 with a soft mask in [0, 1]: p^k ~ mask^k exp(score^k).
    Entries with mask 0 get -inf. The mask is clamped before its log so that its gradient stays bounded."""
    logits = scores + torch.log(mask.clamp_min(1e-6))
    return torch.log_softmax(logits.masked_fill(mask <= 0, float("-inf")), dim=-1)


# ---- the recurrent state --------------------------------------------------------------------------------------
class OrderedMemoryState:
    """SOM's recurrent state, carried as `past_key_values` / `cache` between forward calls.

    memory [B, N, D] (M_t), candidates [B, N, D] (M^_t), open_slots [B, N] (pi_t with slot 0 closed: where the
    next split may go), seen [B] (tokens read). lowest_open (a Python int): no row has an open slot below it, so
    p_t is exactly 0 there and the compositions below it have weight exactly 0 (a new sentence opens one slot a
    token, from the top). `reorder_cache(beam_idx)` keeps the rows of the chosen hypotheses (transformers' beam
    search calls it)."""

    is_compileable = False
    is_croppable = False

    def __init__(self, memory, candidates, open_slots, seen, lowest_open=1):
        self.memory, self.candidates, self.open_slots, self.seen = memory, candidates, open_slots, seen
        self.lowest_open = lowest_open

    @classmethod
    def initial(cls, context, batch_size, num_slots, device, dtype):
        """Before any token: the learned context vector as the only candidate, in the top slot."""
        size = context.shape[-1]
        candidates = torch.zeros(batch_size, num_slots, size, device=device, dtype=dtype)
        candidates[:, -1] = context
        open_slots = torch.zeros(batch_size, num_slots, device=device, dtype=dtype)
        open_slots[:, -1] = 1
        return cls(torch.zeros_like(candidates), candidates, open_slots,
                   torch.zeros(batch_size, dtype=torch.long, device=device), lowest_open=num_slots - 1)

    def __len__(self):
        return len(self.memory)

    def get_seq_length(self, layer_idx=0):
        return int(self.seen.max()) if len(self.seen) else 0

    def reorder_cache(self, beam_idx):
        beam_idx = beam_idx.to(self.memory.device)
        for name in ("memory", "candidates", "open_slots", "seen"):
            setattr(self, name, getattr(self, name).index_select(0, beam_idx))
        return self

    def select(self, rows):
        return OrderedMemoryState(self.memory[rows], self.candidates[rows], self.open_slots[rows], self.seen[rows],
                                  self.lowest_open)


# ---- outputs --------------------------------------------------------------------------------------------------
@dataclass
class SyntacticOrderedMemoryModelOutput(BaseModelOutputWithPast):
    """last_hidden_state [B, T, D]: h_t, what predicts token t + 1. split_log_probs [B, T, N]: log p_t;
    next_split_log_probs [B, T, N]: log p'_t (both 0 under padding, and h_t too); decisions [B, T]: theta_t (sampled
    in training, argmax otherwise, among the slots the earlier decisions left open, so that they always form a tree:
    hard_decisions; -1 under padding)."""

    split_log_probs: torch.FloatTensor | None = None
    next_split_log_probs: torch.FloatTensor | None = None
    decisions: torch.LongTensor | None = None


@dataclass
class SyntacticOrderedMemoryOutput(CausalLMOutputWithPast):
    """CausalLMOutputWithPast plus lm_loss, structure_loss (section 3.3), structure_labels [B, T] (Algorithm 1's
    xi_t as slot indices, -100 where none) and the parser outputs of SyntacticOrderedMemoryModelOutput."""

    lm_loss: torch.FloatTensor | None = None
    structure_loss: torch.FloatTensor | None = None
    structure_labels: torch.LongTensor | None = None
    split_log_probs: torch.FloatTensor | None = None
    next_split_log_probs: torch.FloatTensor | None = None
    decisions: torch.LongTensor | None = None


# ---- Algorithm 1 over a batch ---------------------------------------------------------------------------------
def batched_grid_labels(first_siblings, decisions, num_slots):
    """Algorithm 1 for a batch, in slot indices (som_structure.adaptive_grid_labels in paper numbers).

    first_siblings [B, T]: the token index of first_sibling(t), -1 for the first token of a row and padding.
    decisions [B, T]: theta_t as slot indices. Returns labels [B, T] (slot indices; top slot where no sibling)."""
    batch, length = first_siblings.shape
    top = num_slots - 1
    steps = torch.arange(length, device=first_siblings.device)
    # mu_i = max theta_k over j < k < i (-1 when empty): one masked max over [B, T, T]
    between = (steps[None, None, :] > first_siblings[:, :, None]) & (steps[None, None, :] < steps[None, :, None])
    mu = torch.where(between, decisions[:, None, :], torch.full_like(decisions[:, None, :], -1)).amax(-1)
    previous = torch.cat([torch.full_like(decisions[:, :1], top), decisions[:, :-1]], 1)
    floor = torch.maximum(mu, (previous - 1).clamp_min(1))
    labels = torch.full_like(decisions, top)
    for step in range(1, length):  # xi_j of an earlier token: sequential in t, vectorized over the batch
        sibling = first_siblings[:, step]
        has_sibling = sibling >= 0
        sibling_label = labels.gather(1, sibling.clamp_min(0)[:, None])[:, 0]
        label = torch.maximum(sibling_label - 1, floor[:, step]).clamp_max(top)
        labels[:, step] = torch.where(has_sibling, label, labels[:, step])
    return labels


def batched_gold_grid(first_siblings, num_slots):
    """Algorithm 1 when the model follows its own labels (theta = xi): the gold grid [B, T] in slot indices."""
    batch, length = first_siblings.shape
    top = num_slots - 1
    steps = torch.arange(length, device=first_siblings.device)
    labels = torch.full_like(first_siblings, top)
    for step in range(1, length):
        sibling = first_siblings[:, step]
        between = (steps[None, :step] > sibling[:, None])
        mu = torch.where(between, labels[:, :step], torch.full_like(labels[:, :step], -1)).amax(-1)
        floor = torch.maximum(mu, (labels[:, step - 1] - 1).clamp_min(1))
        label = torch.maximum(labels.gather(1, sibling.clamp_min(0)[:, None])[:, 0] - 1, floor).clamp_max(top)
        labels[:, step] = torch.where(sibling >= 0, label, labels[:, step])
    return labels


def gumbel_perturbed(log_probs):
    """log_probs plus independent Gumbel(0, 1) noise: the argmax of the result is a sample of the distribution
    (the Gumbel-max trick); -inf entries stay -inf, so they are never drawn."""
    return log_probs - torch.log(-torch.log(torch.rand_like(log_probs).clamp(1e-20, 1.0)))


def prediction_weights(next_log_probs, prediction_network, sample):
    """The weight of each slot's RNN output in h_t [R, N] (section 3.2), from log p'_t [R, N].

    "mixture": p'_t itself (h_t = sum_i p'_t(i) RNN_i). "sampled": one-hot at a slot drawn from p'_t when `sample`
    (training), at the argmax of p'_t otherwise (evaluation), as eqs. 12-13 treat p_t; a one-hot p'_t gives both
    forms the same weights."""
    if prediction_network == "mixture":
        return next_log_probs.exp()
    scores = next_log_probs.float()
    if sample:
        scores = gumbel_perturbed(scores)
    return F.one_hot(scores.argmax(-1), next_log_probs.shape[-1]).to(next_log_probs.dtype)


def hard_decisions(split_log_probs, active, sample, forced=None):
    """theta_t [B, T] (slot indices, -1 under padding) from log p_t [B, T, N]: sampled (eq. 12) or argmax (eq. 13)
    among the slots that the earlier hard decisions left open, i.e. theta_t >= theta_{t-1} - 1. The soft memory
    keeps lower slots open with small probability, so an unconstrained argmax could pick a split that no tree
    has; Algorithm 1 and the parses read theta as a tree. forced [B, T]: decisions to take as they are (>= 0)."""
    batch, length, num_slots = split_log_probs.shape
    slots = torch.arange(num_slots, device=split_log_probs.device)
    previous = torch.full((batch,), num_slots, dtype=torch.long, device=split_log_probs.device)  # first: top only
    decisions = torch.full((batch, length), -1, dtype=torch.long, device=split_log_probs.device)
    for step in range(length):
        scores = split_log_probs[:, step].float()
        if sample:  # a sample of p_t restricted to the open slots
            scores = gumbel_perturbed(scores)
        scores = scores.masked_fill(slots[None, :] < (previous[:, None] - 1), float("-inf"))
        choice = scores.argmax(-1)
        if forced is not None:
            choice = torch.where(forced[:, step] >= 0, forced[:, step], choice)
        real = active[:, step]
        decisions[:, step] = torch.where(real, choice, decisions[:, step])
        previous = torch.where(real, choice, previous)
    return decisions


# ---- the models -----------------------------------------------------------------------------------------------
class SyntacticOrderedMemoryPreTrainedModel(SafetensorsOnlyLoading, PreTrainedModel):
    config_class = SyntacticOrderedMemoryConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["GatedCell"]

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, SyntacticOrderedMemoryModel):
            nn.init.normal_(module.context, std=self.config.initializer_range)
        elif isinstance(module, SyntacticOrderedMemoryForCausalLM):
            nn.init.zeros_(module.output_bias)


class SyntacticOrderedMemoryModel(SyntacticOrderedMemoryPreTrainedModel):
    """Embeddings, the ordered memory and the prediction network: h_t [B, T, D] per token (AutoModel).

    forward(input_ids [B, T], attention_mask [B, T] (1 = real; 0 positions leave the state as it is),
            past_key_values / cache: an OrderedMemoryState from an earlier call (None: a new sentence),
            gold_decisions [B, T] slot indices: follow these splits instead of p_t (teacher forcing, or the
            oracle "predicted tree + gold tree" of Table 2); -100 entries follow p_t)
    """

    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=None)
        self.context = nn.Parameter(torch.zeros(config.hidden_size))  # M^_0 in the top slot (Figure 1's context)
        self.composition = GatedCell(config)
        self.split_scorer = SplitScorer(config, with_query=True)
        if config.use_prediction_network:
            self.next_split_scorer = SplitScorer(config, with_query=False)
            self.prediction_cell = GatedCell(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def _embed(self, input_ids):
        embeddings = self.embed_tokens(input_ids)
        if self.training and self.config.embedding_dropout > 0:
            # whole word vectors are dropped, scaled like dropout
            keep = torch.rand(embeddings.shape[:-1], device=embeddings.device) >= self.config.embedding_dropout
            embeddings = embeddings * keep[..., None] / (1 - self.config.embedding_dropout)
        return embeddings

    def _step(self, x, state, forced_split, cell_weights):
        """One token for every row: x [B, D], forced_split [B] (-1: follow p_t), cell_weights: the composition
        cell's (GatedCell.weights). Returns the new state and log p_t [B, N]."""
        num_slots = self.config.num_slots
        split_log_probs = masked_log_softmax(self.split_scorer(state.candidates, x), state.open_slots)
        split_probs = split_log_probs.exp()
        forced = forced_split >= 0
        lowest_split = state.lowest_open  # p_t is exactly 0 below it
        if forced.any():
            gold = F.one_hot(forced_split.clamp_min(0), num_slots).to(split_probs.dtype)
            split_probs = torch.where(forced[:, None], gold, split_probs)
            lowest_split = min(lowest_split, max(1, int(forced_split[forced].min())))
        # eq. 1 (soft): slot k takes its candidate if the split is at k or above, else keeps its memory
        written = split_probs.flip(-1).cumsum(-1).flip(-1)[..., None]
        memory = written * state.candidates + (1 - written) * state.memory
        # eqs. 2-3 (soft): slot k holds x_t if the split is k + 1, the composition if the split is at k or below
        composed_weight = split_probs.cumsum(-1)
        input_weight = torch.cat([split_probs[:, 1:], torch.zeros_like(split_probs[:, :1])], -1)
        projected = self.composition.project_input(memory)  # W1's memory half for every slot in one product
        # the bottom-up chain of eq. 3 (one autograd node: see som_chain.py); composed_weight is exactly 0 below
        # lowest_split, so the cells there are not run
        candidates = composition_chain(cell_weights, lowest_split, x, memory, projected, input_weight, composed_weight)
        # eq. 4: pi_t^k = sum_{j <= k+1} p_t^j; slot 0 can never be split (x would go below the grid)
        open_slots = torch.cat([torch.zeros_like(composed_weight[:, :1]), composed_weight[:, 2:],
                                torch.ones_like(composed_weight[:, :1])], -1)
        return OrderedMemoryState(memory, candidates, open_slots, state.seen + 1, max(1, lowest_split - 1)), \
            split_log_probs

    def _step_rows(self, x, state, forced_split, rows, cell_weights):
        """_step for the real rows only (rows: their indices, None for all): a padding position leaves its row's
        state as it is, and its log p_t is 0. Computing only the real rows saves padding's share of the chain."""
        if rows is None:
            return self._step(x, state, forced_split, cell_weights)
        log_probs = x.new_zeros(len(x), self.config.num_slots)
        if not len(rows):
            return state, log_probs
        new_state, real_log_probs = self._step(x[rows], state.select(rows), forced_split[rows], cell_weights)
        state = OrderedMemoryState(*(old.index_copy(0, rows, new) for old, new in (
            (state.memory, new_state.memory), (state.candidates, new_state.candidates),
            (state.open_slots, new_state.open_slots), (state.seen, new_state.seen))),
            lowest_open=min(state.lowest_open, new_state.lowest_open))
        return state, log_probs.index_copy(0, rows, real_log_probs)

    def _predict(self, memory, candidates, open_slots):
        """The prediction network over all steps at once: memory, candidates [R, N, D], open_slots [R, N].
        Returns h [R, D] and log p'_t [R, N] (None without the prediction network)."""
        if not self.config.use_prediction_network:
            return candidates[:, -1], None
        next_log_probs = masked_log_softmax(self.next_split_scorer(candidates), open_slots)
        weights = prediction_weights(next_log_probs, self.config.prediction_network, sample=self.training)
        if self.config.prediction_network == "sampled":
            return self._chosen_slot_outputs(memory, candidates, weights.argmax(-1)), next_log_probs
        rows, num_slots = memory.shape[0], self.config.num_slots
        cell_weights = self.prediction_cell.weights()
        state = torch.zeros_like(memory[:, 0])
        outputs = [torch.zeros_like(state)]  # slot 0 is never chosen (its weight is 0)
        ordered = []
        # each slot's slices taken once: indexing [:, slot] in the loop gives each a backward writing [R, N, D]
        candidate_slots, memory_slots = candidates.unbind(1), memory.unbind(1)
        for slot in range(num_slots - 1, 0, -1):  # eq. 7: the RNN reads the memory from the top down
            inputs = torch.cat([candidate_slots[slot], memory_slots[slot]])
            both = self.prediction_cell(torch.cat([state, state]), inputs, weights=cell_weights)
            ordered.append(both[:rows])  # RNN(M^N, ..., M^{slot+1}, M^^slot)
            state = both[rows:]
        outputs.extend(reversed(ordered))
        hidden = (weights[..., None] * torch.stack(outputs, 1)).sum(1)
        return hidden, next_log_probs

    def _chosen_slot_outputs(self, memory, candidates, chosen):
        """h_t = RNN_i for the one slot i each row chose (chosen [R], the "sampled" prediction network): what the
        mixture's sum gives under one-hot weights, computed for that slot alone. The RNN reads a row's memory from
        the top down only as far as its slot, and the candidate only there, so a row costs N - i cells, not 2 (N - 1).
        The choices are read to the host once, to index the rows still going down at each slot."""
        chosen = chosen.cpu()
        hidden = memory.new_zeros(memory.shape[0], memory.shape[-1])  # slot 0 is never chosen (its weight is 0)
        going = torch.arange(len(chosen))  # the rows whose slot lies below, in the order of `state`'s rows
        state = hidden[:0].new_zeros(len(going), memory.shape[-1])
        candidate_slots, memory_slots = candidates.unbind(1), memory.unbind(1)  # once per slot, not per row set
        cell_weights = self.prediction_cell.weights()
        for slot in range(self.config.num_slots - 1, 0, -1):  # eq. 7: the RNN reads the memory from the top down
            here = (chosen[going] == slot).nonzero().flatten()
            if len(here):  # RNN(M^N, ..., M^{slot+1}, M^^slot)
                rows = going[here].to(memory.device)
                output = self.prediction_cell(state[here.to(memory.device)], candidate_slots[slot][rows],
                                              weights=cell_weights)
                hidden = hidden.index_copy(0, rows, output)
            below = (chosen[going] < slot).nonzero().flatten()
            if not len(below):
                break
            going, kept = going[below], below.to(memory.device)
            rows = going.to(memory.device)
            state = self.prediction_cell(state[kept], memory_slots[slot][rows], weights=cell_weights)
        return hidden

    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, cache=None, gold_decisions=None,
                inputs_embeds=None, **unused):
        unknown = sorted(k for k, v in unused.items() if k not in IGNORED_GENERATION_INPUTS and v is not None)
        if unknown:
            raise TypeError(f"{type(self).__name__}.forward() got unexpected inputs {unknown}")
        state = _one_cache(cache, past_key_values)
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("forward() needs input_ids [batch, length] (or inputs_embeds)")
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; expected [batch, length]")
            inputs_embeds = self._embed(input_ids)
        batch, length, _ = inputs_embeds.shape
        active = torch.ones(batch, length, dtype=torch.bool, device=inputs_embeds.device)
        if attention_mask is not None:
            if attention_mask.dim() != 2 or attention_mask.shape[0] != batch or attention_mask.shape[1] < length:
                raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}; expected [{batch}, >= {length}]")
            active = attention_mask[:, -length:].bool()  # generate passes the mask of the whole sequence so far
        if state is None and input_ids is not None:  # a first call: its rows are padded at either end only
            keep = active if attention_mask is not None else input_ids != self.config.pad_token_id
            check_padding_at_the_ends(keep.cpu(), self.config.pad_token_id, attention_mask is not None)
            check_starts(input_ids.cpu(), keep.cpu(), self.config.bos_token_id)  # no grammar checks them here
        if state is None:
            state = OrderedMemoryState.initial(self.context, batch, self.config.num_slots, inputs_embeds.device,
                                               inputs_embeds.dtype)
        elif not isinstance(state, OrderedMemoryState) or len(state) != batch:
            raise ValueError(f"past_key_values must be the OrderedMemoryState of an earlier call with {batch} rows; "
                             f"got {type(state).__name__}")
        if gold_decisions is not None and gold_decisions.shape != (batch, length):
            raise ValueError(f"gold_decisions has shape {tuple(gold_decisions.shape)}; expected {(batch, length)}")
        memories, candidates, open_slots, split_log_probs = [], [], [], []
        follow_p = torch.full((batch,), -1, dtype=torch.long, device=inputs_embeds.device)
        cell_weights = self.composition.weights()  # once for all steps
        # each step's slice taken once: indexing [:, step] gives each step a backward writing a whole [B, T, D] gradient
        words = inputs_embeds.unbind(1)
        for step, rows in enumerate(real_rows(active)):  # the only Python loop over time
            forced = gold_decisions[:, step] if gold_decisions is not None else follow_p
            state, log_probs = self._step_rows(words[step], state, forced, rows, cell_weights)
            memories.append(state.memory)
            candidates.append(state.candidates)
            open_slots.append(state.open_slots)
            split_log_probs.append(log_probs)
        stacked = [torch.stack(values, 1) for values in (memories, candidates, open_slots, split_log_probs)]
        # The prediction network reads the real positions only: padding predicts nothing (its h_t is 0, its log p'_t
        # 0), and skipping it saves its share of the network's work
        real = active.flatten().nonzero().flatten()
        predicted, next_log_probs = self._predict(*(value.flatten(0, 1).index_select(0, real) for value in stacked[:3]))
        hidden = predicted.new_zeros(batch * length, predicted.shape[-1]).index_copy(0, real, predicted)
        hidden = hidden.view(batch, length, -1)
        split_log_probs = stacked[3]
        if next_log_probs is not None:
            next_log_probs = next_log_probs.new_zeros(batch * length, next_log_probs.shape[-1]).index_copy(
                0, real, next_log_probs).view(batch, length, -1)
        with torch.no_grad():
            # eq. 12 (sampled in training) / eq. 13 (argmax otherwise), kept a valid hard parse
            decisions = hard_decisions(split_log_probs, active, sample=self.training, forced=gold_decisions)
        return SyntacticOrderedMemoryModelOutput(
            last_hidden_state=hidden, split_log_probs=split_log_probs, next_split_log_probs=next_log_probs,
            decisions=decisions, **{CACHE_FIELD: state})


def real_rows(active):
    """For each step of active [B, T]: None when every row is real, else the indices of the real rows (on the
    mask's device; empty when none is). The mask is read to the host once, so that the time loop does not wait on
    the device at each step."""
    on_host = active.cpu()
    every = on_host.all(0).tolist()
    return [None if every[step] else on_host[:, step].nonzero().flatten().to(active.device)
            for step in range(active.shape[1])]


def _one_cache(cache, past_key_values):
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("got both `cache` and `past_key_values`; pass the state once")
    return cache if cache is not None else past_key_values


class SyntacticOrderedMemoryForCausalLM(SyntacticOrderedMemoryPreTrainedModel, SyntacticGenerationMixin):
    """SOM language model: SyntacticOrderedMemoryModel and the output layer tied to the embeddings (eq. 10).

    forward(input_ids, attention_mask, labels, past_key_values / cache, som_first_siblings, gold_decisions):
        labels [B, T]: token ids, shifted inside (labels=input_ids); pad ids, -100s and positions under a 0 of
            the attention mask are ignored. The LM loss is the mean NLL of the predicted tokens: exp of it is the
            exact perplexity (no bound: the soft parser marginalizes the structure).
        som_first_siblings [B, T] (SyntacticOrderedMemoryCollator): the gold tree as Algorithm 1 reads it (the
            token index of first_sibling(t), -1 for none); with it the structural loss of section 3.3 is added:
            the NLL of p_t against xi_t and of p'_t against xi_{t+1}, xi from Algorithm 1 and the model's own
            decisions (or the gold grid under structure_loss="teacher_forcing", whose memory then follows the gold
            decisions in training, and under config.oracle_trees, whose memory follows them in training and in
            evaluation: Table 2's "- Predicted tree + Gold tree").
        gold_decisions [B, T]: drive the memory with these splits (slot indices) at any time.
    loss = lm_loss_weight * lm_loss + structure_loss_weight * structure_loss (the parts are in the output too).
    """

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    accepts_loss_kwargs = False
    generates_words = True  # SyntacticGenerationMixin: a word LM, generated by transformers' own generate

    def __init__(self, config):
        super().__init__(config)
        self.model = SyntacticOrderedMemoryModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.output_dropout = nn.Dropout(config.output_dropout)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls):
        return False  # the cache is SOM's own recurrent state (OrderedMemoryState), made by forward

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids=None, attention_mask=None, labels=None, past_key_values=None, cache=None,
                som_first_siblings=None, gold_decisions=None, return_dict=True, **inputs):
        config = self.config
        state = _one_cache(cache, past_key_values)
        # the memory follows the gold tree: teacher forcing (in training only) and the oracle (always)
        follows_gold = (config.structure_loss == "teacher_forcing" and self.training) or config.oracle_trees
        gold_grid = None
        if som_first_siblings is not None:
            if input_ids is None or som_first_siblings.shape != input_ids.shape:
                raise ValueError(f"som_first_siblings has shape {tuple(som_first_siblings.shape)}; expected the shape of "
                                 f"input_ids {tuple(input_ids.shape) if input_ids is not None else None}")
            if state is not None:
                raise ValueError("som_first_siblings describe whole sentences; they cannot go with past_key_values")
            if follows_gold:
                gold_grid = self.gold_grid(som_first_siblings)
                if gold_decisions is None:
                    gold_decisions = gold_grid
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=state,
                             gold_decisions=gold_decisions, **inputs)
        logits = self.lm_head(self.output_dropout(outputs.last_hidden_state)) + self.output_bias
        length = logits.shape[1]
        active = torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device) if attention_mask is None \
            else attention_mask[:, -length:].bool().to(logits.device)
        lm_loss = structure_loss = structure_labels = None
        if labels is not None:
            targets = labels.masked_fill((labels == config.pad_token_id) | ~active, IGNORE_INDEX)
            # logits[:, t] predicts token t + 1: the targets move left, so that the logits are read in place
            shifted = F.pad(targets[:, 1:], (0, 1), value=IGNORE_INDEX)
            lm_loss = F.cross_entropy(logits.flatten(0, 1).float(), shifted.flatten(), ignore_index=IGNORE_INDEX)
        if som_first_siblings is not None:
            decisions = gold_grid if gold_grid is not None else outputs.decisions
            structure_labels = batched_grid_labels(som_first_siblings.to(decisions.device), decisions,
                                                   config.num_slots)
            structure_loss = self._structure_loss(outputs, structure_labels, som_first_siblings, active)
            structure_labels = structure_labels.masked_fill(~active, IGNORE_INDEX)
        loss = None
        if lm_loss is not None or structure_loss is not None:
            loss = 0
            if lm_loss is not None:
                loss = loss + config.lm_loss_weight * lm_loss
            if structure_loss is not None:
                loss = loss + config.structure_loss_weight * structure_loss
        return SyntacticOrderedMemoryOutput(
            loss=loss, logits=logits, lm_loss=lm_loss, structure_loss=structure_loss,
            structure_labels=structure_labels, split_log_probs=outputs.split_log_probs,
            next_split_log_probs=outputs.next_split_log_probs, decisions=outputs.decisions,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)})

    def gold_grid(self, first_siblings):
        """The gold decisions [B, T] (slot indices) of `som_first_siblings`: see batched_gold_grid."""
        return batched_gold_grid(first_siblings, self.config.num_slots)

    @staticmethod
    def _structure_loss(outputs, labels, first_siblings, active):
        """L_S of section 3.3: NLL of p_t(xi_t) over tokens with a first sibling (the first token's split is
        forced) plus NLL of p'_t(xi_{t+1}) where token t + 1 is real, each averaged over its decisions."""
        has_label = active & (first_siblings >= 0)
        split_nll = -outputs.split_log_probs.gather(-1, labels[..., None])[..., 0]
        # a batch of `<s>`-only rows has no decision to learn: a zero loss rather than the mean of nothing
        loss = split_nll[has_label].sum() / has_label.sum().clamp_min(1)
        if outputs.next_split_log_probs is not None:
            next_nll = -outputs.next_split_log_probs[:, :-1].gather(-1, labels[:, 1:, None])[..., 0]
            next_mask = has_label[:, 1:] & active[:, :-1]
            loss = loss + next_nll[next_mask].sum() / next_mask.sum().clamp_min(1)
        return loss

    def prepare_inputs_for_generation(self, input_ids, next_sequence_length=None, cache=None, past_key_values=None,
                                      attention_mask=None, **kwargs):
        """Feed only the tokens the state has not read yet (all of the prompt first, then one at a time)."""
        state = _one_cache(cache, past_key_values)
        if state is not None:
            input_ids = input_ids[:, -1:]
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if state is not None:
            inputs[CACHE_FIELD] = state
        return inputs


SyntacticOrderedMemoryModel._auto_class = "AutoModel"
SyntacticOrderedMemoryForCausalLM._auto_class = "AutoModelForCausalLM"
