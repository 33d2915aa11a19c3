"""Recurrent Neural Network Grammars (Dyer et al. 2016), generative, batched as Noji and Oseki (2021) batch them.

The generative RNNG models p(x, y) over the same top-down actions as Transformer Grammars (`<s> (S (NP the bird NP)
...`), with the reference implementation's computation (rnng-pytorch, Noji and Oseki's fixed-stack RNNG):
- a stack LSTM (`num_hidden_layers` LSTM cells, dropout between them) reads each element pushed on the stack: the
  embedding of `<s>` (from a zero state), of an opened nonterminal, of a word piece, or of a closed constituent; a
  pop returns to the state below the popped elements, so the state is the stack's;
- closing a constituent composes it: a bidirectional LSTM over (its nonterminal, its children, its nonterminal),
  the forward direction read after the last child and the backward one after the first, through dropout, a linear
  layer and a ReLU; the result replaces the constituent's elements on the stack;
- the next action is predicted from the top state through dropout, a linear layer and a ReLU (the action context
  u): p(NT(X)), p(SHIFT) and p(REDUCE) from a softmax over the actions, and a piece w from
  p(SHIFT) p(w | u), a softmax over the word pieces whose weights are the input embeddings (tied), with a bias.
The model's `logits` over the tokenizer's ids are these log-probabilities: NT(X) at `(X`, SHIFT times each piece at
the piece, REDUCE at the closing bracket of the innermost open constituent (RNNG's REDUCE closes that one, so the
other closing brackets have -inf). Where no constituent is open (after `<s>`, after the root closes) REDUCE cannot
apply and its probability is left out: a softmax of the logits renormalizes without it. rnng-pytorch's softmax keeps
it there (its training never masks), so there log-probabilities differ by log(1 - p(REDUCE)); everywhere else they
are equal (hf_slm/families/recurrent_grammars/comparison.py measured it).

Batching: every row of a batch advances one action per step on a stack of fixed capacity (its tensors [B, S, ...]);
where each element lies (the stack's height, its open constituents) is bookkeeping on the host (`HostStacks`), worked
out before any device work, so a step reads nothing back from the device. Training runs the steps over the whole
sequences; the beam search (`RNNGSearchDecoder`) advances its hypotheses' rows one action at a time with the same
step (`RNNGModel.step`), so scores agree.

Hub code of a family outside hf-slm's hub folder: a checkpoint carries this file beside the hf-slm hub files it
imports (modeling/hub_code.py), where the relative imports below find them; with hf-slm installed the absolute ones
do. transformers' import check skips `try:` blocks, so a checkpoint loads without hf-slm.
"""

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

try:  # inside a checkpoint: hf-slm's hub files lie beside this one
    from .backbone import SequenceTooLong
    from .configuration_base import check_whole_numbers
    from .configuration_slm import SyntacticGrammarConfig
    from .generation_mixin import SyntacticGenerationMixin
    from .grammar_protocol import ActionKind
    from .grammars import CausalRules, grammar_for_config
    from .hub_code import SavesHubCode
    from .padding import check_padding_at_the_ends, shifted_action_loss
    from .safe_loading import SafetensorsOnlyLoading
    from .search_decoders import ReencodingSearchDecoder, SearchDecoder
except ImportError:  # imported with hf-slm installed
    from hf_slm.modeling.backbone import SequenceTooLong
    from hf_slm.modeling.configuration_base import check_whole_numbers
    from hf_slm.modeling.configuration_slm import SyntacticGrammarConfig
    from hf_slm.modeling.generation_mixin import SyntacticGenerationMixin
    from hf_slm.modeling.grammar_protocol import ActionKind
    from hf_slm.modeling.grammars import CausalRules, grammar_for_config
    from hf_slm.modeling.hub_code import SavesHubCode
    from hf_slm.modeling.padding import check_padding_at_the_ends, shifted_action_loss
    from hf_slm.modeling.safe_loading import SafetensorsOnlyLoading
    from hf_slm.modeling.search_decoders import ReencodingSearchDecoder, SearchDecoder

IGNORE_INDEX = -100
COMPOSITIONS = ("bilstm",)
# The action softmax's entries before the nonterminals (rnng-pytorch's order, without its padding action)
SHIFT, REDUCE, FIRST_NONTERMINAL = 0, 1, 2
SPARE_ELEMENTS = 8  # stack elements the search's stacks grow by beyond what a step needs


class RecurrentGrammarRules(CausalRules):
    """The RNNG's actions: top-down bracketed trees (the legality of `Grammar`, as TXL (CC)'s), read in order by a
    recurrent model. Its one position per action is what the generic code counts; the model reads no structure."""

    name = "rnng"
    relative_position_meaning = "none: a stack LSTM reads the actions in order"
    supports_segments = False  # a recurrent model has no Transformer-XL memory


RNNG_GRAMMARS = {"rnng": RecurrentGrammarRules}


class RNNGConfig(SyntacticGrammarConfig):
    """Configuration of a generative RNNG (module docstring); rnng-pytorch's names in brackets.

    Args (besides SyntacticGrammarConfig's):
        embedding_size: the size of embeddings, composed constituents and the action context [w_dim].
        hidden_size: the stack LSTM's hidden size [h_dim].
        num_hidden_layers: the stack LSTM's layers [num_layers].
        dropout: one rate for every dropout: embeddings, between the LSTM's layers, before the composition's and the
            action context's linear layers [dropout].
        composition: "bilstm", Dyer et al.'s bidirectional LSTM composition [--composition lstm].
    """

    model_type = "rnng"
    grammar_classes = RNNG_GRAMMARS
    auto_classes = {"AutoConfig": "modeling_rnng.RNNGConfig", "AutoModel": "modeling_rnng.RNNGModel",
                    "AutoModelForCausalLM": "modeling_rnng.RNNGForCausalLM"}

    def __init__(self, embedding_size=256, hidden_size=256, num_hidden_layers=2, dropout=0.3, composition="bilstm",
                 **kwargs):
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}")
        check_whole_numbers({"embedding_size": embedding_size, "hidden_size": hidden_size,
                             "num_hidden_layers": num_hidden_layers})
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.dropout = dropout
        self.composition = composition
        # The word softmax reads the input embeddings themselves: there is no output layer for transformers to tie.
        kwargs["tie_word_embeddings"] = False
        super().__init__(**kwargs)



class HostStacks:
    """Where each row's stack elements are, on the host: its height, and its open constituents' stack indices and
    labels (innermost last). `plan` advances the rows by one action each and says what the device does."""

    def __init__(self, rows, capacity):
        self.height = np.zeros(rows, dtype=np.int64)
        self.open_at = np.zeros((rows, capacity), dtype=np.int64)
        self.open_label = np.zeros((rows, capacity), dtype=np.int64)
        self.open_count = np.zeros(rows, dtype=np.int64)

    @property
    def capacity(self):
        return self.open_at.shape[1]

    def innermost_label(self):
        """[rows] the label of each row's innermost open constituent, -1 where none is open."""
        last = np.maximum(self.open_count - 1, 0)
        return np.where(self.open_count > 0, self.open_label[np.arange(len(self.height)), last], -1)

    def select(self, rows):
        chosen = HostStacks(0, self.capacity)
        chosen.height, chosen.open_at = self.height[rows], self.open_at[rows]
        chosen.open_label, chosen.open_count = self.open_label[rows], self.open_count[rows]
        return chosen

    def grown(self, capacity):
        """These stacks with room for `capacity` elements."""
        if capacity <= self.capacity:
            return self
        grown = HostStacks(len(self.height), capacity)
        grown.height, grown.open_count = self.height, self.open_count
        grown.open_at[:, : self.capacity], grown.open_label[:, : self.capacity] = self.open_at, self.open_label
        return grown

    @staticmethod
    def concat(stacks):
        joined = HostStacks(0, max(s.capacity for s in stacks))
        stacks = [s.grown(joined.capacity) for s in stacks]
        for name in ("height", "open_at", "open_label", "open_count"):
            setattr(joined, name, np.concatenate([getattr(s, name) for s in stacks]))
        return joined

    def plan(self, actions, kinds, layout):
        """Advance every row whose action is not padding by its action (ids [rows], their ActionKinds); the StepPlan
        of the device's work. ValueError naming the row for an action the stack cannot take (a closing bracket with
        nothing open)."""
        active = np.flatnonzero(kinds != ActionKind.PAD)
        kind = kinds[active]
        closing = kind == ActionKind.CLOSE_NT
        if (self.open_count[active[closing]] == 0).any():
            row = int(active[closing][self.open_count[active[closing]] == 0][0])
            raise ValueError(f"row {row}: a closing bracket (id {int(actions[row])}) with no open constituent")
        starts = kind == ActionKind.BOS
        pushes = ~closing & ~starts
        written = np.where(starts, -1, self.height[active])  # where the step's input lies on the stack
        close_rows = active[closing]
        opened_at = self.open_at[close_rows, self.open_count[close_rows] - 1]
        written[closing] = opened_at
        counts = self.height[close_rows] - opened_at - 1
        width = int(counts.max(initial=0))
        children = opened_at[:, None] + 1 + np.arange(width)[None, :]
        children = np.where(np.arange(width)[None, :] < counts[:, None], children, opened_at[:, None])
        # the bookkeeping itself
        self.height[active[starts]] = 0
        opening = active[kind == ActionKind.OPEN_NT]
        self.open_at[opening, self.open_count[opening]] = self.height[opening]
        self.open_label[opening, self.open_count[opening]] = actions[opening] - layout.open_nt_start
        self.open_count[opening] += 1
        self.height[active[pushes]] += 1
        self.open_count[close_rows] -= 1
        self.height[close_rows] = opened_at + 1
        self.open_count[active[starts]] = 0
        return StepPlan(active, actions[active], written, np.flatnonzero(written >= 0), np.flatnonzero(closing),
                        children, counts, self.innermost_label()[active])

    def needed_capacity(self, steps):
        """The capacity these stacks need to take `steps` more pushes."""
        return int(self.height.max(initial=0)) + steps + 1


@dataclass
class StepPlan:
    """What one step does on the device, worked out on the host (HostStacks.plan), for its R active rows."""

    rows: np.ndarray  # [R] the rows that take an action
    actions: np.ndarray  # [R] their action ids
    written: np.ndarray  # [R] the stack index the step's input is written at (-1: `<s>`, which writes nothing)
    pushing: np.ndarray  # [P] which of the R write their input on the stack (all but `<s>`)
    closing: np.ndarray  # [C] which of the R close a constituent
    children: np.ndarray  # [C, n] the stack indices of each closed constituent's children (padded with its own)
    child_counts: np.ndarray  # [C]
    innermost: np.ndarray  # [R] the label of the innermost open constituent after the step (-1: none)

    def on(self, device):
        """The plan's arrays as long tensors on `device`, all uploaded before any device work."""
        names = ("rows", "actions", "written", "pushing", "closing", "children", "child_counts", "innermost")
        return {name: torch.as_tensor(getattr(self, name), dtype=torch.long).to(device) for name in names}


class DeviceStacks:
    """The stack's vectors on the device for B rows of capacity S: `elements` [B, S, E] (embeddings and composed
    constituents), and the stack LSTM's `hidden` and `cell` [B, S + 2, layers, H] after each height (slot 0: the
    zero state before `<s>`; slot k + 1: after k elements)."""

    def __init__(self, elements, hidden, cell):
        self.elements, self.hidden, self.cell = elements, hidden, cell

    @classmethod
    def empty(cls, rows, capacity, config, like):
        layers, size = config.num_hidden_layers, config.hidden_size
        return cls(like.new_zeros(rows, capacity, config.embedding_size),
                   like.new_zeros(rows, capacity + 2, layers, size), like.new_zeros(rows, capacity + 2, layers, size))

    @property
    def capacity(self):
        return self.elements.shape[1]

    def grown(self, capacity):
        if capacity <= self.capacity:
            return self
        extra = capacity - self.capacity
        return DeviceStacks(F.pad(self.elements, (0, 0, 0, extra)), F.pad(self.hidden, (0, 0, 0, 0, 0, extra)),
                            F.pad(self.cell, (0, 0, 0, 0, 0, extra)))

    def select(self, rows):
        return DeviceStacks(self.elements[rows], self.hidden[rows], self.cell[rows])

    @staticmethod
    def concat(stacks):
        capacity = max(s.capacity for s in stacks)
        stacks = [s.grown(capacity) for s in stacks]
        return DeviceStacks(*(torch.cat([getattr(s, name) for s in stacks]) for name in ("elements", "hidden", "cell")))


class StackLSTM(nn.Module):
    """The stack LSTM's cells, one per layer, with dropout between layers (rnng-pytorch's MultiLayerLSTMCell)."""

    def __init__(self, config):
        super().__init__()
        sizes = [config.embedding_size] + [config.hidden_size] * (config.num_hidden_layers - 1)
        self.cells = nn.ModuleList(nn.LSTMCell(size, config.hidden_size) for size in sizes)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, hidden, cell):
        """(hidden, cell) [R, layers, H] after reading x [R, E] from the states (hidden, cell) [R, layers, H]."""
        hiddens, cells = [], []
        for layer, lstm in enumerate(self.cells):
            h, c = lstm(x if layer == 0 else self.dropout(x), (hidden[:, layer], cell[:, layer]))
            hiddens.append(h)
            cells.append(c)
            x = h
        return torch.stack(hiddens, 1), torch.stack(cells, 1)


class BiLSTMComposition(nn.Module):
    """Dyer et al.'s composition: a bidirectional LSTM over (nonterminal, children, nonterminal); the forward direction
    read after the last child, the backward after the first; dropout, a linear layer, a ReLU. The two directions are
    two LSTMs over right-padded rows (the backward one over the children reversed), so no lengths leave the host."""

    def __init__(self, config):
        super().__init__()
        size = config.embedding_size
        self.forward_lstm = nn.LSTM(size, size, batch_first=True)
        self.backward_lstm = nn.LSTM(size, size, batch_first=True)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(2 * size, size)

    def forward(self, nonterminals, children, counts, reversed_children):
        """nonterminals [C, E], children [C, n, E] (padded), counts [C], reversed_children [C, n, E] (each row's
        children last to first, padded) -> composed [C, E]."""
        rows = torch.arange(len(counts), device=counts.device)
        forward, _ = self.forward_lstm(torch.cat([nonterminals[:, None], children], 1))
        backward, _ = self.backward_lstm(torch.cat([nonterminals[:, None], reversed_children], 1))
        read = torch.cat([forward[rows, counts], backward[rows, counts]], -1)
        return F.relu(self.output(self.dropout(read)))


def advance_stacks(stacks, plan, inputs, stack_lstm, composition):
    """One step of every active row on the device stacks (the one step the generative RNNG and the discriminative
    parser share): a closing row's input becomes its constituent composed from the stack, every input but `<s>`'s is
    written where the plan says, and the stack LSTM reads it from the state below. inputs [R, E]: the pushed
    elements' embeddings (a closing row's entry is replaced). Returns the new top states' hidden [R, layers, H]."""
    rows, written = plan["rows"], plan["written"]
    closing = plan["closing"]
    if len(closing):
        close_rows = rows[closing]
        opened_at = written[closing]
        children = plan["children"]
        counts = plan["child_counts"]
        child_vectors = stacks.elements[close_rows[:, None], children]
        reversed_index = (counts[:, None] - 1 - torch.arange(children.shape[1], device=counts.device)).clamp(min=0)
        reversed_children = child_vectors.gather(1, reversed_index[:, :, None].expand_as(child_vectors))
        composed = composition(stacks.elements[close_rows, opened_at], child_vectors, counts, reversed_children)
        inputs = inputs.index_copy(0, closing, composed.to(inputs.dtype))
    # Written in place, as rnng-pytorch's fixed stack: a step reads the stack by indexing (a copy), so autograd keeps
    # no view of what a later step overwrites, and a step costs no copy of the whole stack.
    pushing = plan["pushing"]
    stacks.elements.index_put_((rows[pushing], written[pushing]), inputs[pushing].to(stacks.elements.dtype))
    hidden, cell = stack_lstm(inputs, stacks.hidden[rows, written + 1], stacks.cell[rows, written + 1])
    stacks.hidden.index_put_((rows, written + 2), hidden.to(stacks.hidden.dtype))
    stacks.cell.index_put_((rows, written + 2), cell.to(stacks.cell.dtype))
    return hidden


# What HF tools pass to a causal LM's forward that a recurrent model reading whole sequences has no use for
IGNORED_INPUTS = ("position_ids", "cache_position", "use_cache", "past_key_values", "cache", "output_attentions",
                  "token_type_ids", "logits_to_keep")


def check_unused_inputs(unused):
    """ValueError naming an input the RNNG neither reads nor may ignore (a family input of another model)."""
    unknown = sorted(name for name, value in unused.items() if name not in IGNORED_INPUTS and value is not None)
    if unknown:
        raise ValueError(f"an RNNG reads input_ids and attention_mask; it does not take {unknown}")


@dataclass
class RNNGModelOutput(BaseModelOutput):
    """RNNGModel's output: the action contexts, and the label of each position's innermost open constituent."""

    innermost_labels: torch.LongTensor | None = None


class RNNGPreTrainedModel(SafetensorsOnlyLoading, SavesHubCode, PreTrainedModel):
    config_class = RNNGConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False

    def hub_code_objects(self):
        """What a checkpoint needs the code of (hub_code.py): the model, its config and its grammar."""
        return [self, self.config, self.grammar]

    def _init_weights(self, module):
        # PyTorch's own initialization of each layer, which rnng-pytorch keeps (its --param_init 0)
        if isinstance(module, (nn.Linear, nn.LSTM, nn.LSTMCell, nn.Embedding)):
            module.reset_parameters()
        if isinstance(module, RNNGForCausalLM):
            nn.init.zeros_(module.word_bias)


class RNNGModel(RNNGPreTrainedModel):
    """The stack machine under the HF contract: for input_ids [B, T] (action ids, `<s>` first, padded on either side
    as attention_mask says), last_hidden_state [B, T, E] is the action context after each action, which predicts the
    next one (zeros at padding)."""

    def __init__(self, config):
        super().__init__(config)
        self.grammar = grammar_for_config(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size)
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.stack_lstm = StackLSTM(config)
        self.composition = BiLSTMComposition(config)
        self.context = nn.Sequential(nn.Dropout(config.dropout), nn.Linear(config.hidden_size, config.embedding_size),
                                     nn.ReLU())
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def action_kinds_of(self, ids):
        """The ActionKinds of action ids (a numpy array), ValueError naming an id outside the vocabulary."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.config.vocab_size):
            bad = int(ids[(ids < 0) | (ids >= self.config.vocab_size)][0])
            raise ValueError(f"action id {bad} is outside the model's vocabulary of {self.config.vocab_size} ids")
        return self.grammar.action_kinds[ids]

    def step(self, stacks, plan):
        """Advance the device stacks by one planned action per active row (StepPlan.on's tensors); the action
        contexts [R, E] after it, one per active row."""
        inputs = self.embedding_dropout(self.embed_tokens(plan["actions"]))
        hidden = advance_stacks(stacks, plan, inputs, self.stack_lstm, self.composition)
        return self.context(hidden[:, -1])

    def forward(self, input_ids=None, attention_mask=None, output_hidden_states=None, return_dict=True, **unused):
        """RNNGModelOutput: last_hidden_state [B, T, E], and innermost_labels [B, T] (long), the label of each
        position's innermost open constituent (-1: none), which the LM head reads."""
        check_unused_inputs(unused)
        if input_ids is None:
            raise ValueError("an RNNG reads input_ids (action ids); inputs_embeds are not supported")
        ids = input_ids.detach().cpu().numpy()  # the stack's bookkeeping is the host's
        kinds = self.action_kinds_of(ids)
        keep = ids != self.config.pad_token_id if attention_mask is None else attention_mask.detach().cpu().numpy() != 0
        check_padding_at_the_ends(keep, self.config.pad_token_id, attention_mask is not None)
        rows = [row[where] for row, where in zip(ids, keep)]
        if any(len(row) == 0 for row in rows):
            raise ValueError("an input_ids row is all padding")
        longest = max(len(row) for row in rows)
        if longest > self.config.max_sequence_length:
            raise SequenceTooLong(f"input of {longest} actions is longer than the model's maximum of "
                             f"{self.config.max_sequence_length} (config.max_sequence_length)")
        self.grammar.validate_batch(rows, require_complete=False)  # the grammar's legality, as every family's
        kinds = np.where(keep, kinds, ActionKind.PAD)
        batch, width = ids.shape
        host = HostStacks(batch, width + 1)
        plans = [host.plan(ids[:, t], kinds[:, t], self.grammar.layout) for t in range(width)]
        device = input_ids.device
        uploaded = [plan.on(device) for plan in plans]
        stacks = DeviceStacks.empty(batch, width + 1, self.config, self.embed_tokens.weight)
        contexts = []
        for plan in uploaded:
            context = self.step(stacks, plan)
            contexts.append(context.new_zeros(batch, context.shape[-1]).index_copy(0, plan["rows"], context))
        innermost = np.full((batch, width), -1, dtype=np.int64)
        for t, plan in enumerate(plans):
            innermost[plan.rows, t] = plan.innermost
        hidden = torch.stack(contexts, 1) if contexts else self.embed_tokens.weight.new_zeros(batch, 0,
                                                                                                self.config.embedding_size)
        return RNNGModelOutput(last_hidden_state=hidden, innermost_labels=torch.from_numpy(innermost).to(device))


class RNNGForCausalLM(RNNGPreTrainedModel, SyntacticGenerationMixin):
    """The generative RNNG under the HF causal-LM contract: logits [B, T, V] are log p(action t + 1 | actions <= t)
    over the tokenizer's ids (module docstring), so `labels=input_ids` gives transformers' usual shifted mean NLL
    and log p(x, y) is the sum of the shifted log-probs. Labels equal to the pad id or under a 0 of the attention
    mask are ignored, as are -100s."""

    def __init__(self, config):
        super().__init__(config)
        self.model = RNNGModel(config)
        layout = self.grammar.layout
        self.action_head = nn.Linear(config.embedding_size, FIRST_NONTERMINAL + layout.open_nt_stop - layout.open_nt_start)
        self.word_bias = nn.Parameter(torch.zeros(config.vocab_size))
        # The word pieces' ids, uploaded once per device (not a buffer: from_pretrained builds the model on the meta
        # device and leaves a non-persistent buffer unset)
        self.word_ids = np.flatnonzero(self.grammar.action_kinds == ActionKind.TERMINAL)
        self._uploaded_word_ids = {}
        self.name_tree_pipeline(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def word_ids_on(self, device):
        """The word pieces' ids, a long tensor on `device`."""
        if device not in self._uploaded_word_ids:
            self._uploaded_word_ids[device] = torch.as_tensor(self.word_ids, dtype=torch.long).to(device)
        return self._uploaded_word_ids[device]

    def vocabulary_log_probs(self, contexts, innermost):
        """[..., V] log-probabilities over the ids of the actions after contexts [..., E], given the label of the
        innermost open constituent there (a long tensor [...], -1: none)."""
        layout = self.grammar.layout
        word_ids = self.word_ids_on(contexts.device)
        actions = torch.log_softmax(self.action_head(contexts).float(), -1)
        words = self.model.embed_tokens.weight[word_ids]
        word_scores = torch.log_softmax((contexts @ words.T.to(contexts.dtype)).float() + self.word_bias[word_ids], -1)
        log_probs = actions.new_full((*contexts.shape[:-1], self.config.vocab_size), float("-inf"))
        log_probs[..., word_ids] = actions[..., SHIFT:SHIFT + 1] + word_scores
        log_probs[..., layout.open_nt_start:layout.open_nt_stop] = actions[..., FIRST_NONTERMINAL:]
        closing_ids = layout.close_nt_stop - layout.close_nt_start
        # REDUCE closes the innermost open constituent: its own closing bracket (one for all labels, unlabelled)
        closing = innermost if closing_ids > 1 else innermost.clamp(max=0)
        reduce = torch.where(closing[..., None] == torch.arange(closing_ids, device=contexts.device),
                             actions[..., REDUCE:REDUCE + 1], float("-inf"))
        log_probs[..., layout.close_nt_start:layout.close_nt_stop] = reduce
        return log_probs

    def forward(self, input_ids=None, attention_mask=None, labels=None, output_hidden_states=None, return_dict=True,
                **unused):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, **unused)
        logits = self.vocabulary_log_probs(outputs.last_hidden_state, outputs.innermost_labels)
        loss = None
        if labels is not None:
            loss, _ = shifted_action_loss(logits, labels, attention_mask, self.config.pad_token_id, IGNORE_INDEX)
        return CausalLMOutput(loss=loss, logits=logits,
                              hidden_states=(outputs.last_hidden_state,) if output_hidden_states else None)

    def search_decoder(self, use_cache=True):
        """The beam search's decoder: the stack machine, one action per hypothesis and call (RNNGSearchDecoder);
        use_cache=False runs every hypothesis's whole prefix again (the generic ReencodingSearchDecoder)."""
        return RNNGSearchDecoder(self) if use_cache else ReencodingSearchDecoder(self)


@dataclass
class RNNGSearchState:
    """The rows of a beam search: their stacks on the host and on the device."""

    host: HostStacks
    device: DeviceStacks


def host_rows(rows):
    """The search's rows (a host tensor or a sequence) as an int64 numpy array."""
    return rows.numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows, dtype=np.int64)


class RNNGSearchDecoder(SearchDecoder):
    """The search decoder of an RNNG (search_decoders.py's interface): a state is its rows' stacks, advanced by the
    model's own step, so the search's scores are the forward's."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.device = next(model.parameters()).device
        model.word_ids_on(self.device)  # uploaded before any search call

    def _start(self, sequences, steps):
        """The rows' stacks after their sequences (`<s>`, or a document prefix): one `_advance` per column of the
        sequences left-padded, from empty stacks; a padding action leaves a row as it is, so every row's last action
        is in the last column, whose log-probabilities are the rows'."""
        width = max(len(sequence) for sequence in sequences)
        ids = np.full((len(sequences), width), self.model.config.pad_token_id, dtype=np.int64)
        for row, sequence in enumerate(sequences):
            ids[row, width - len(sequence):] = sequence
        rows, state = torch.arange(len(sequences)), None
        for column in range(width):
            state, log_probs = self._advance(state, rows, ids[:, column], steps)
        return state, log_probs

    @torch.no_grad()
    def _advance(self, state, rows, actions, steps):
        # The host's part first (the kept rows' stacks, advanced by the actions), then every upload, then the device's
        rows = host_rows(rows)
        actions = np.asarray(actions, dtype=np.int64)
        host = HostStacks(len(rows), 1) if state is None else state.host.select(rows)
        needed = host.needed_capacity(1)
        # room for SPARE_ELEMENTS more at once: growing by one element a step would copy every row's stack a step
        capacity = host.capacity if needed <= host.capacity else needed + SPARE_ELEMENTS
        host = host.grown(capacity)
        plan = host.plan(actions, self.model.model.action_kinds_of(actions), self.model.grammar.layout).on(self.device)
        if state is None:
            stacks = DeviceStacks.empty(len(rows), capacity, self.model.config, self.model.model.embed_tokens.weight)
        else:
            stacks = state.device.select(torch.from_numpy(rows).to(self.device)).grown(capacity)
        # the model's own time (SearchDecoder.forward_seconds): the stack's step and the distribution after it
        log_probs = self._log_probs(
            lambda: self.model.vocabulary_log_probs(self.model.model.step(stacks, plan), plan["innermost"]))
        return RNNGSearchState(host, stacks), log_probs

    def select(self, state, rows):
        rows = host_rows(rows)
        return RNNGSearchState(state.host.select(rows), state.device.select(torch.from_numpy(rows).to(self.device)))

    def concat(self, states):
        return RNNGSearchState(HostStacks.concat([s.host for s in states]),
                               DeviceStacks.concat([s.device for s in states]))
