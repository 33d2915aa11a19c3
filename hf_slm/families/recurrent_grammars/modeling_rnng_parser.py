"""The discriminative RNNG (Dyer et al. 2016) as a proposal parser: q(y | x), the model paper 000 draws its proposal
trees from (section 3, "we use the discriminative RNNG as the proposal model").

It builds a tree top-down over the sentence's words with three actions: open a nonterminal NT(X), SHIFT the next word
of the buffer onto the stack, REDUCE (close the innermost open constituent, composed as the generative RNNG composes
it). The state is read from the stack LSTM's top and the buffer: the next word's vector (the `</s>` position's once
every word is shifted) from the parsers' word encoder (modeling/parser_encoder.py: word and character BiLSTMs, or a
pretrained encoder); an MLP over the two gives the action softmax, renormalized over the legal actions, so q is a
distribution over trees: one root; SHIFT and NT(X) while words remain (NT(X) under an open constituent, or as the
root); REDUCE on a constituent of two children or more, or of one word (one constituent under another over the same
words is a unary chain, which the bracketing writes as one label, "S+VP"), the root last; at most
`max_open_nonterminals` open at once.
Differences from Dyer et al.'s model: the buffer is the encoder's BiLSTM state of the next word rather than a
backward LSTM over the words left, and there is no LSTM over the action history. Where the training trees have POS
tags, a tagger over the encoder's states predicts them beside the tree, as the CRF parser does, so that its trees
are PTB trees (a tree without tags whose every word sits alone under a constituent would read back as tagged).

Trees are the parsers' (tokenization/parser_trees.py): labels are the tokenizer's bracketing labels (a unary chain is
one label, "S+VP"), and a structure is the binary bracketing a constituency parser's tokenizer writes (`spans`: every
constituent, the left-binarization nodes labelled `<binarized>`, the one-word spans of words that are no constituent
`<word>`), so `hf-slm propose`, parsing and the card treat it as they treat the CRF parser's.

Batching and the stack are the generative RNNG's (modeling_rnng.py: HostStacks, DeviceStacks, advance_stacks): every
row advances one action per step; where things lie is the host's bookkeeping. Sampling and the best tree choose an
action per row per step, read back to the host.

Hub code of a family outside hf-slm's hub folder (see modeling_rnng.py).
"""

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

try:  # inside a checkpoint: the hub files lie beside this one
    from .configuration_parser import ConstituencyParserConfig
    from .configuration_base import check_whole_numbers
    from .grammar_protocol import ActionKind
    from .hub_code import SavesHubCode
    from .modeling_rnng import BiLSTMComposition, DeviceStacks, HostStacks, StackLSTM, advance_stacks
    from .parser_encoder import MLP, WordEncoder
    from .proposal_parser import ProposalParserOutput, ProposalParserPreTrainedModel, sentence_mean_nll
except ImportError:  # imported with hf-slm installed
    from hf_slm.families.recurrent_grammars.modeling_rnng import (
        BiLSTMComposition, DeviceStacks, HostStacks, StackLSTM, advance_stacks,
    )
    from hf_slm.modeling.configuration_parser import ConstituencyParserConfig
    from hf_slm.modeling.configuration_base import check_whole_numbers
    from hf_slm.modeling.grammar_protocol import ActionKind
    from hf_slm.modeling.hub_code import SavesHubCode
    from hf_slm.modeling.parser_encoder import MLP, WordEncoder
    from hf_slm.modeling.proposal_parser import (
        ProposalParserOutput, ProposalParserPreTrainedModel, sentence_mean_nll,
    )

# Action codes: SHIFT, REDUCE, then NT(label) for each bracketing label
SHIFT, REDUCE, FIRST_NONTERMINAL = 0, 1, 2
_NONTERMINALS = SimpleNamespace(open_nt_start=FIRST_NONTERMINAL)  # the codes as HostStacks.plan reads ids


class RNNGParserConfig(ConstituencyParserConfig):
    """A discriminative RNNG proposal parser (module docstring).

    Args (besides ConstituencyParserConfig's: the word encoder, the bracketing labels; its span and label MLP sizes
    are unused):
        stack_input_size: the stack's elements (nonterminal embeddings, projected word vectors, compositions).
        stack_hidden_size, stack_layers: the stack LSTM.
        stack_dropout: dropout on the stack's inputs, between its layers and before the composition's linear layer.
        action_mlp_size: the hidden layer of the MLP that reads the stack's top and the buffer.
        max_open_nonterminals: the most constituents open at once (Dyer et al.'s bound on NT actions).
    """

    model_type = "rnng_parser"

    def __init__(self, stack_input_size=128, stack_hidden_size=128, stack_layers=2, stack_dropout=0.2,
                 action_mlp_size=128, max_open_nonterminals=100, **kwargs):
        check_whole_numbers({"stack_input_size": stack_input_size, "stack_hidden_size": stack_hidden_size,
                             "stack_layers": stack_layers, "action_mlp_size": action_mlp_size,
                             "max_open_nonterminals": max_open_nonterminals})
        self.stack_input_size = stack_input_size
        self.stack_hidden_size = stack_hidden_size
        self.stack_layers = stack_layers
        self.stack_dropout = stack_dropout
        self.action_mlp_size = action_mlp_size
        self.max_open_nonterminals = max_open_nonterminals
        kwargs["auto_map"] = {"AutoConfig": "modeling_rnng_parser.RNNGParserConfig",
                              "AutoModel": "modeling_rnng_parser.RNNGParser"}
        super().__init__(**kwargs)

    @property
    def stack_sizes(self):
        """The stack's sizes under the names the generative RNNG's modules read."""
        return SimpleNamespace(embedding_size=self.stack_input_size, hidden_size=self.stack_hidden_size,
                               num_hidden_layers=self.stack_layers, dropout=self.stack_dropout)


# Its checkpoint's files are copied by SavesHubCode (this file lives outside hf-slm's hub folder), not by transformers
RNNGParserConfig._auto_class = None


def gold_actions(chart, length, reserved):
    """The action codes of the tree a span chart [n + 1, n + 1] holds (label id per span, -1 elsewhere; the
    collator's span_labels): its constituents are the spans whose label is not reserved (`<binarized>`, `<word>`),
    opened top-down, each word shifted in order. ValueError when the whole sentence is no constituent."""
    starts = {}
    for start, end in zip(*np.nonzero(chart[: length + 1, : length + 1] >= 0)):
        label = int(chart[start, end])
        if label not in reserved:
            starts.setdefault(int(start), []).append((int(end), label))
    if not any(end == length for end, _ in starts.get(0, [])):
        raise ValueError(f"a tree of {length} words whose whole sentence is no constituent: a discriminative RNNG "
                         "builds trees under one root")
    for ends in starts.values():
        ends.sort(reverse=True)
    codes = []

    def emit(start, end, label):
        codes.append(FIRST_NONTERMINAL + label)
        position = start
        while position < end:
            child = next(((e, lab) for e, lab in starts.get(position, []) if e <= end and (position, e) != (start, end)),
                         None)
            if child is None:
                codes.append(SHIFT)
                position += 1
            else:
                emit(position, *child)
                position = child[0]
        codes.append(REDUCE)

    emit(0, length, next(label for end, label in starts[0] if end == length))
    return codes


def bracketing(codes, length, dummy, no_constituent):
    """The binary bracketing [(start, end, label id)] of the tree an action sequence builds: every constituent, the
    left-binarization nodes of a constituent of three children or more (`dummy`), and `no_constituent` on the
    one-word span of a word that is no constituent of its own (tokenization/parser_trees.py)."""
    spans, open_ones, position = {}, [], 0
    for code in codes:
        if code == SHIFT:
            open_ones[-1][2].append((position, position + 1))
            position += 1
        elif code == REDUCE:
            label, start, children = open_ones.pop()
            end = children[-1][1]
            spans[(start, end)] = label
            for last in children[1:-1]:  # left binarization: (((c1 c2) c3) ... cm)
                spans.setdefault((start, last[1]), dummy)
            if open_ones:
                open_ones[-1][2].append((start, end))
        else:
            open_ones.append((code - FIRST_NONTERMINAL, position, []))
    for word in range(length):
        spans.setdefault((word, word + 1), no_constituent)
    return [(start, end, label) for (start, end), label in sorted(spans.items())]


class ParserMachine:
    """The host's side of a batch of parses: the stacks' bookkeeping (HostStacks), each row's next word and length,
    which actions are legal, and what each row did."""

    def __init__(self, lengths, capacity, config):
        self.stacks = HostStacks(len(lengths), capacity)
        self.is_word = np.zeros((len(lengths), capacity), dtype=bool)  # whether a stack element is a shifted word
        self.pointer = np.zeros(len(lengths), dtype=np.int64)
        self.length = np.asarray(lengths, dtype=np.int64)
        self.codes = [[] for _ in lengths]
        self.max_open = config.max_open_nonterminals
        self.labels = np.ones(config.num_span_labels, dtype=bool)  # the labels a constituent may carry
        self.labels[[config.dummy_label_id, config.no_constituent_label_id]] = False

    @property
    def finished(self):
        return (self.stacks.height == 1) & (self.stacks.open_count == 0) & (self.pointer == self.length)

    def legal(self, rows):
        """[len(rows), 2 + labels] bool: the legal actions of each row (module docstring). An action is legal only if
        the words left can still complete the tree: every open constituent that cannot close yet (no child, or one
        child that is a constituent) needs a word of its own (`_unfinished`)."""
        stacks = self.stacks
        height, open_count = stacks.height[rows], stacks.open_count[rows]
        words_left = self.length[rows] - self.pointer[rows]
        unfinished, innermost_unfinished, innermost_one_constituent = self._unfinished(rows)
        legal = np.zeros((len(rows), FIRST_NONTERMINAL + len(self.labels)), dtype=bool)
        # SHIFT finishes the innermost constituent if it was unfinished; the other words must cover the rest
        legal[:, SHIFT] = (open_count > 0) & (words_left - 1 >= unfinished - innermost_unfinished)
        legal[:, REDUCE] = (open_count > 0) & ~innermost_unfinished & ((open_count > 1) | (words_left == 0))
        # NT adds an unfinished constituent, and finishes a parent whose one child was a constituent
        opens = ((height == 0) | (open_count > 0)) & (open_count < self.max_open)
        opens &= words_left >= unfinished + 1 - innermost_one_constituent
        legal[:, FIRST_NONTERMINAL:] = opens[:, None] & self.labels[None, :]
        return legal

    def _unfinished(self, rows):
        """Per row: how many open constituents cannot close yet, whether the innermost cannot, and whether the
        innermost's only child is a constituent."""
        stacks = self.stacks
        count = stacks.open_count[rows]
        slots = np.arange(stacks.capacity)[None, :]
        opened = stacks.open_at[rows]
        # an open constituent's children: the elements above it up to the next open one, which is a child too, or up
        # to the stack's top for the innermost
        inner = slots + 1 < count[:, None]
        children = np.where(inner, np.roll(opened, -1, axis=1) - opened, stacks.height[rows][:, None] - opened - 1)
        first_is_word = np.take_along_axis(self.is_word[rows], np.minimum(opened + 1, stacks.capacity - 1), 1)
        open_slot = slots < count[:, None]
        one_constituent = open_slot & (children == 1) & ~first_is_word
        unfinished = open_slot & ((children == 0) | one_constituent)
        last = np.maximum(count - 1, 0)[:, None]
        innermost_unfinished = (count > 0) & np.take_along_axis(unfinished, last, 1)[:, 0]
        innermost_one_constituent = (count > 0) & np.take_along_axis(one_constituent, last, 1)[:, 0]
        return unfinished.sum(1), innermost_unfinished, innermost_one_constituent

    def start(self):
        """The plan of the first step: every row reads the stack's bottom input."""
        rows = np.arange(len(self.length))
        return self.stacks.plan(np.zeros(len(rows), dtype=np.int64), np.full(len(rows), ActionKind.BOS), _NONTERMINALS)

    def take(self, rows, codes):
        """Rows `rows` take the actions `codes`: the plan of the step, and the word each shifting row pushes (its
        position in input_ids, `<s>` being 0)."""
        kinds = np.where(codes == SHIFT, ActionKind.TERMINAL, np.where(codes == REDUCE, ActionKind.CLOSE_NT,
                                                                       ActionKind.OPEN_NT))
        ids = np.full(len(self.length), 0, dtype=np.int64)
        all_kinds = np.full(len(self.length), ActionKind.PAD)
        ids[rows], all_kinds[rows] = codes, kinds
        shifted = self.pointer[rows] + 1
        plan = self.stacks.plan(ids, all_kinds, _NONTERMINALS)
        self.is_word[plan.rows, plan.written] = codes == SHIFT  # a word, or an opened (later composed) constituent
        self.pointer[rows] += codes == SHIFT
        for row, code in zip(rows, codes):
            self.codes[row].append(int(code))
        return plan, shifted

    def buffer_positions(self, rows):
        """Each row's next word's position in input_ids (`</s>`'s when every word is shifted)."""
        return self.pointer[rows] + 1


class RNNGParser(SavesHubCode, ProposalParserPreTrainedModel):
    """The discriminative RNNG (module docstring) under the proposal parsers' interface (proposal_parser.py)."""

    config_class = RNNGParserConfig
    tree_kind = "constituency"
    best_is_exact = False  # the greedy parse: a sample may be more probable

    def __init__(self, config):
        super().__init__(config)
        sizes = config.stack_sizes
        self.encoder = WordEncoder(config)
        self.word_projection = nn.Linear(config.word_vector_size, sizes.embedding_size)
        self.nonterminals = nn.Embedding(config.num_span_labels, sizes.embedding_size)
        self.bottom = nn.Embedding(1, sizes.embedding_size)  # the stack's first input, as the generative `<s>`
        self.input_dropout = nn.Dropout(sizes.dropout)
        self.stack_lstm = StackLSTM(sizes)
        self.composition = BiLSTMComposition(sizes)
        self.action_mlp = nn.Sequential(
            nn.Dropout(config.mlp_dropout), nn.Linear(sizes.hidden_size + config.word_vector_size, config.action_mlp_size),
            nn.ReLU(), nn.Linear(config.action_mlp_size, FIRST_NONTERMINAL + config.num_span_labels))
        if config.num_tags:  # POS tags beside the tree, as the CRF parser predicts them (the trees are then PTB's)
            self.tagger = nn.Sequential(MLP(config.word_vector_size, config.tag_mlp_size, config.mlp_dropout),
                                        nn.Linear(config.tag_mlp_size, config.num_tags))
        self.post_init()

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, (nn.LSTM, nn.LSTMCell)):
            module.reset_parameters()

    # ---- the machine ----------------------------------------------------------------------------------------
    def _run(self, words, lengths, choose):
        """Parse each row of `words` [R, T, D] (the encoder's vectors) to the end, `choose(log_probs, legal, rows,
        step)` picking each step's actions (numpy codes) from the masked log-probabilities [R', A] of the rows
        `rows` still parsing. Returns (the action codes of each row, log q of each row [R])."""
        rows_total = len(lengths)
        # a stack holds at most the words and the open constituents (and the root's bottom slot)
        capacity = int(max(lengths)) + self.config.max_open_nonterminals + 2
        machine = ParserMachine(lengths, capacity=capacity, config=self.config)
        device = words.device
        stacks = DeviceStacks.empty(rows_total, machine.stacks.capacity, self.config.stack_sizes, words)
        plan = machine.start().on(device)
        tops = advance_stacks(stacks, plan, self.input_dropout(self.bottom.weight.expand(rows_total, -1)),
                              self.stack_lstm, self.composition)[:, -1]
        log_q = words.new_zeros(rows_total)
        step = 0
        while not machine.finished.all():
            rows = np.flatnonzero(~machine.finished)
            legal = machine.legal(rows)
            rows_on = torch.as_tensor(rows).to(device)
            buffer = words[rows_on, torch.as_tensor(machine.buffer_positions(rows)).to(device)]
            scores = self.action_mlp(torch.cat([tops[rows_on], buffer], -1)).float()
            log_probs = torch.log_softmax(scores.masked_fill(~torch.as_tensor(legal).to(device), float("-inf")), -1)
            codes = choose(log_probs, legal, rows, step)
            chosen = torch.as_tensor(codes).to(device)
            log_q = log_q.index_add(0, rows_on, log_probs.gather(1, chosen[:, None])[:, 0])
            plan, shifted = machine.take(rows, codes)
            plan = plan.on(device)
            inputs = self._inputs(words, rows_on, codes, torch.as_tensor(shifted).to(device), chosen)
            new_tops = advance_stacks(stacks, plan, inputs, self.stack_lstm, self.composition)[:, -1]
            tops = tops.index_copy(0, rows_on, new_tops.to(tops.dtype))
            step += 1
        return machine.codes, log_q

    def _inputs(self, words, rows, codes, shifted, chosen):
        """[R, E] the elements the rows push: a shifted word's projected vector, an opened nonterminal's embedding (a
        closing row's entry is replaced by its composition)."""
        labels = (chosen - FIRST_NONTERMINAL).clamp(min=0)
        inputs = self.nonterminals(labels)
        shifting = torch.as_tensor(np.flatnonzero(codes == SHIFT)).to(words.device)
        if len(shifting):
            vectors = self.word_projection(words[rows[shifting], shifted[shifting]])
            inputs = inputs.index_copy(0, shifting, vectors.to(inputs.dtype))
        return self.input_dropout(inputs)

    def _words(self, input_ids, attention_mask=None, char_ids=None, piece_ids=None, piece_attention_mask=None,
               word_piece_spans=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        words = self.encoder(input_ids, attention_mask, char_ids=char_ids, piece_ids=piece_ids,
                             piece_attention_mask=piece_attention_mask, word_piece_spans=word_piece_spans)
        return words, self.sentence_lengths(attention_mask).tolist()

    def _tag_logits(self, words):
        return self.tagger(words) if self.config.num_tags else None

    def _tags(self, words, lengths):
        """Each sentence's most probable POS tags (None without a tagger)."""
        logits = self._tag_logits(words)
        if logits is None:
            return [None] * len(lengths)
        best = logits.argmax(-1).tolist()
        return [row[1 : 1 + length] for row, length in zip(best, lengths)]

    def _forced(self, words, lengths, sequences):
        """log q of given action sequences (one per row of `words`)."""
        def follow(log_probs, legal, rows, step):
            codes = np.array([sequences[row][step] for row in rows], dtype=np.int64)
            if not legal[np.arange(len(rows)), codes].all():
                bad = rows[~legal[np.arange(len(rows)), codes]][0]
                raise ValueError(f"sentence {int(bad)}: its tree's action {step} is not legal for a discriminative "
                                 "RNNG (one root, no empty constituent)")
            return codes

        return self._run(words, lengths, follow)[1]

    def _gold(self, span_labels, lengths):
        reserved = {self.config.dummy_label_id, self.config.no_constituent_label_id}
        charts = span_labels.detach().cpu().numpy()
        return [gold_actions(chart, length, reserved) for chart, length in zip(charts, lengths)]

    def _structures(self, sequences, log_q, lengths, tags):
        dummy, word = self.config.dummy_label_id, self.config.no_constituent_label_id
        return [{"spans": bracketing(codes, length, dummy, word), "tags": sentence_tags, "log_prob": float(value)}
                for codes, value, length, sentence_tags in zip(sequences, log_q.tolist(), lengths, tags)]

    # ---- the proposal parsers' interface ---------------------------------------------------------------------
    def forward(self, input_ids, attention_mask=None, char_ids=None, span_labels=None, tags=None, piece_ids=None,
                piece_attention_mask=None, word_piece_spans=None, **_):
        """ProposalParserOutput whose loss is the mean over sentences of -log q(y | x) of the gold trees (span_labels),
        plus each sentence's summed tagging cross-entropy (tags) when the parser predicts POS tags."""
        words, lengths = self._words(input_ids, attention_mask, char_ids, piece_ids, piece_attention_mask,
                                     word_piece_spans)
        tag_logits = self._tag_logits(words)
        if span_labels is None:
            return ProposalParserOutput(label_logits=tag_logits)
        loss = -self._forced(words, lengths, self._gold(span_labels, lengths)).mean()
        if tag_logits is not None and tags is not None:
            loss = loss + sentence_mean_nll(tag_logits, tags)
        return ProposalParserOutput(loss=loss, label_logits=tag_logits)

    @torch.no_grad()
    def best_structures(self, **inputs):
        """Per sentence, the tree of the most probable action at every step (greedy, as Dyer et al. parse)."""
        words, lengths = self._words(**inputs)
        sequences, log_q = self._run(words, lengths, lambda log_probs, legal, rows, step: log_probs.argmax(-1).cpu().numpy())
        return self._structures(sequences, log_q, lengths, self._tags(words, lengths))

    @torch.no_grad()
    def sample_structures(self, num_samples, generator=None, **inputs):
        """Per sentence, `num_samples` trees drawn from q(y | x), action by action (ancestral sampling). generator:
        one torch.Generator, or a list of one per sentence (each sentence's draws then depend on its own only)."""
        words, lengths = self._words(**inputs)
        if isinstance(generator, (list, tuple)) and len(generator) != len(lengths):
            raise ValueError(f"{len(generator)} generators for {len(lengths)} sentences; expected one per sentence")
        if isinstance(generator, (list, tuple)):
            return [self._draw(words[row : row + 1], lengths[row : row + 1], num_samples, generator[row])[0]
                    for row in range(len(lengths))]
        return self._draw(words, lengths, num_samples, generator)

    def _draw(self, words, lengths, num_samples, generator):
        repeated = words.repeat_interleave(num_samples, 0)
        lengths_repeated = [length for length in lengths for _ in range(num_samples)]

        def draw(log_probs, legal, rows, step):
            probabilities = log_probs.exp()
            if generator is not None:  # drawn where the generator lives
                probabilities = probabilities.to(generator.device)
            return torch.multinomial(probabilities, 1, generator=generator)[:, 0].cpu().numpy()

        sequences, log_q = self._run(repeated, lengths_repeated, draw)
        tags = [sentence_tags for sentence_tags in self._tags(words, lengths) for _ in range(num_samples)]
        structures = self._structures(sequences, log_q, lengths_repeated, tags)
        return [structures[index * num_samples : (index + 1) * num_samples] for index in range(len(lengths))]

    @torch.no_grad()
    def structure_log_probs(self, structures, **inputs):
        """log q(y | x) [B] of given structures (their spans)."""
        words, lengths = self._words(**inputs)
        reserved = {self.config.dummy_label_id, self.config.no_constituent_label_id}
        sequences = []
        for structure, length in zip(structures, lengths):
            chart = np.full((length + 1, length + 1), -1, dtype=np.int64)
            for start, end, label in structure["spans"]:
                chart[int(start), int(end)] = int(label)
            sequences.append(gold_actions(chart, length, reserved))
        return self._forced(words, lengths, sequences)
