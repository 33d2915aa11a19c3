"""Word-synchronous beam search (Stern et al. 2017) for the Transformer syntactic LMs, batched and cached.

Semantics follow rnng-pytorch's word-synchronous beam search. For each word position t:
  repeat: expand every hypothesis of the frontier by every legal action; per sentence keep the `beam_size`
  best successors (action beam); those that generate word t go to the word beam, plus up to `fast_track`
  word-generating successors from outside the top (fast track); the others form the next frontier;
  until the word beam holds `beam_size` hypotheses or the frontier is empty. Then prune the word beam to
  `word_beam_size`; it is the frontier of word t + 1. After the last word a final round closes the trees.
The marginal log p(x_<=t) is the logsumexp of the word beam's joint scores (after pruning by default, or
before, as the DTG reference); surprisal(t) = marginal(t - 1) - marginal(t).

Words are pieces: after the first piece of a word only its next piece is legal, and a hypothesis has
generated word t when it generates the word's last piece. In free generation hypotheses synchronize on
every terminal piece.

All hypotheses of all sentences advance together: one forward call per round, with a KV cache whose rows
are hypotheses. A successor's row is its parent's row, selected by index (`index_select`) when the beam is
pruned or branched; the new positions go into new slots. Rows of different hypotheses hold different
numbers of positions, so some slots are holes: masked, never recomputed. The grammar's incremental state
gives each new position's mask row and coordinate (its depth for TG). With `use_cache=False` every round
re-encodes each hypothesis's whole prefix instead (same numbers, for tests and benchmarks).

Hub code: imports only torch and its sibling files.
"""

from dataclasses import dataclass

import numpy as np
import torch

from .backbone import PositionStructure
from .grammars import ActionKind, ActionLayout, grammar_for_config
from .search_constraints import DecodingStatus, SearchConstraints
# KV cache storage grows by this many slots at a time.
CACHE_CHUNK = 64


# Paper 003's search constraints (section 4 and appendix), for its unlabeled, unary-free trees: n_c = the
# number of words, p_c = 3 for SyntaxGym and 5 for summaries. BeamSearchOptions(**CONSTRAINT_SETTINGS[name]).
CONSTRAINT_SETTINGS = {
    "default": dict(max_nonterminals_per_word=2.0, max_consecutive_open=6),
    "paper003-sg": dict(max_nonterminals_per_word=1.0, max_consecutive_open=3),
    "paper003-summaries": dict(max_nonterminals_per_word=1.0, max_consecutive_open=5),
}


@dataclass
class BeamSearchOptions:
    """Options of word-synchronous beam search.

    beam_size: the action beam (successors kept per round and sentence); 300 in papers 002 and 003.
    word_beam_size: hypotheses kept after each word.
    fast_track: word-generating successors admitted from outside the action beam each round.
    max_nonterminals: n_c, the most opening nonterminals a tree may have (None: max_nonterminals_per_word
        times the number of words, rounded up).
    max_nonterminals_per_word: the n_c per word when max_nonterminals is None. 2 lets every gold tree of the
        GUM and PTB samples through under the default normalization (unary chains make NTs outnumber words:
        n_c = the number of words, paper 003's value for its unary-free trees, excludes 9.8% of GUM's and 3.9%
        of the PTB sample's).
    max_consecutive_open: p_c, the most opening nonterminals in a row (None: no limit). The default 6 lets
        every gold tree of both samples through; paper 003's 3 (SyntaxGym) and 5 (summaries), meant for its
        unlabeled, unary-free trees, exclude 5.4% / 0.05% of GUM's and 10.4% / 0.03% of the PTB sample's
        (named settings: CONSTRAINT_SETTINGS). Some cap matters: without one, cheap runs of opening
        nonterminals crowd the action beam.
    max_structural_per_word: the most nonterminal actions between two words (None: no limit).
    marginal: "after_pruning" (rnng-pytorch) or "before_pruning" (the DTG reference) for log p(x_<=t).
    num_trees: how many best trees to return per sentence.
    use_cache: keep a KV cache (True) or re-encode every prefix each round (False).
    """

    beam_size: int = 100
    word_beam_size: int = 10
    fast_track: int = 1
    max_nonterminals: int | None = None
    max_nonterminals_per_word: float = 2.0
    max_consecutive_open: int | None = 6
    max_structural_per_word: int | None = None
    marginal: str = "after_pruning"
    num_trees: int = 1
    use_cache: bool = True

    def check(self):
        for name in ("beam_size", "word_beam_size", "num_trees"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.word_beam_size > self.beam_size:
            raise ValueError(f"word_beam_size ({self.word_beam_size}) cannot be larger than beam_size ({self.beam_size})")
        if not isinstance(self.fast_track, int) or self.fast_track < 0:
            raise ValueError(f"fast_track must be a non-negative integer, got {self.fast_track!r}")
        for name in ("max_nonterminals", "max_consecutive_open", "max_structural_per_word"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be None or a positive integer, got {value!r}")
        if not (isinstance(self.max_nonterminals_per_word, (int, float)) and self.max_nonterminals_per_word > 0):
            raise ValueError(f"max_nonterminals_per_word must be a positive number, got {self.max_nonterminals_per_word!r}")
        if self.marginal not in ("after_pruning", "before_pruning"):
            raise ValueError(f"marginal must be 'after_pruning' or 'before_pruning', got {self.marginal!r}")
        return self


@dataclass
class _Task:
    words: list  # per sentence, the forced words (lists of piece ids)
    max_new_words: list  # per sentence, how many free words may follow (0: forced words only)
    top_k: int | None = None  # sample among the top-k actions instead of beam search
    temperature: float = 1.0  # sampling: divide log-probabilities by it
    seed: int | None = None
    prefixes: list | None = None  # per sentence, the action ids before it (document-level models)


@dataclass
class SentenceResult:
    """What forced-word beam search finds for one sentence (natural logarithms)."""

    surprisals: list  # per word, marginal(t - 1) - marginal(t)
    end_surprisal: float  # marginal(last word) - log p(x): the cost of ending the sentence there
    log_prob: float  # log p(x) lower bound: logsumexp over the final beam of complete trees
    trees: list  # [(action ids with <s> (and the prefix, if any), joint log-probability)], best first
    forward_calls: int  # forward calls of the whole batch while this sentence was searched


class _Hypothesis:
    __slots__ = ("sentence", "ids", "state", "score", "word", "piece", "structural", "consecutive_open",
                 "slots", "coordinates", "log_probs", "row", "finished", "open_before", "_new_positions",
                 "_parent_row")

    def successor(self, action_id):
        child = _Hypothesis.__new__(_Hypothesis)
        child.sentence = self.sentence
        child.ids = self.ids + [action_id]
        child.state = self.state.clone()
        child.score = self.score
        child.word, child.piece = self.word, self.piece
        child.structural, child.consecutive_open = self.structural, self.consecutive_open
        child.slots = list(self.slots)
        child.coordinates = list(self.coordinates)
        child.log_probs = None
        child.row = None
        child.finished = False
        child.open_before = self.open_before
        child._new_positions = None
        child._parent_row = self.row
        return child


class _RowCache:
    """A KV cache whose rows are hypotheses (the model calls `update` and `get_seq_length`).

    Storage is allocated in chunks of CACHE_CHUNK slots and filled in place, so that a round costs one
    write of the new positions, not a copy of everything cached. Alongside keys and values it keeps, per
    slot, the coordinate (depth for TG) and the position in its hypothesis (-1 for a hole) of what the slot
    holds. Only the first `length` slots are in use.
    """

    def __init__(self, keys=None, values=None, coordinates=None, slot_positions=None, length=0):
        self.keys = keys or {}
        self.values = values or {}
        self.coordinates = coordinates
        self.slot_positions = slot_positions
        self.length = length

    def get_seq_length(self, layer_idx=0):
        return self.length

    @staticmethod
    def _room(storage, needed, dim, fill=0):
        """`storage` with at least `needed` slots along `dim` (grown by whole chunks, new slots = fill)."""
        if storage.shape[dim] >= needed:
            return storage
        shape = list(storage.shape)
        shape[dim] = -(-needed // CACHE_CHUNK) * CACHE_CHUNK - storage.shape[dim]
        return torch.cat([storage, storage.new_full(shape, fill)], dim=dim)

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        start, stop = self.length, self.length + key_states.shape[2]
        if layer_idx not in self.keys:
            shape = list(key_states.shape)
            shape[2] = 0
            self.keys[layer_idx] = key_states.new_zeros(shape)
            self.values[layer_idx] = value_states.new_zeros(shape)
        keys = self.keys[layer_idx] = self._room(self.keys[layer_idx], stop, 2)
        values = self.values[layer_idx] = self._room(self.values[layer_idx], stop, 2)
        keys[:, :, start:stop] = key_states
        values[:, :, start:stop] = value_states
        return keys[:, :, :stop], values[:, :, :stop]

    def extend(self, coordinates, slot_positions):
        """Write the coordinates and positions of the next slots; return both for all slots, new included."""
        start, stop = self.length, self.length + coordinates.shape[1]
        if self.coordinates is None:
            self.coordinates = coordinates.new_zeros((len(coordinates), 0))
            self.slot_positions = slot_positions.new_full((len(slot_positions), 0), -1)
        self.coordinates = self._room(self.coordinates, stop, 1)
        self.slot_positions = self._room(self.slot_positions, stop, 1, fill=-1)
        self.coordinates[:, start:stop] = coordinates
        self.slot_positions[:, start:stop] = slot_positions
        return self.coordinates[:, :stop], self.slot_positions[:, :stop]

    def commit(self, width):
        self.length += width

    def rows(self, start, stop):
        """Rows start..stop-1 as views (no copy; their storage is shared, and later rounds write only rows
        of the cache they run on)."""
        return _RowCache(
            {k: v[start:stop] for k, v in self.keys.items()}, {k: v[start:stop] for k, v in self.values.items()},
            self.coordinates[start:stop], self.slot_positions[start:stop], self.length,
        )

    def compact(self, slot_lists):
        """A new cache where row r holds exactly the slots `slot_lists[r]`, moved to 0..n_r - 1 (holes dropped).

        Beam search calls it once per word: rows then hold only their hypothesis's positions, so the slots a
        round must copy stay close to the real sequence lengths.
        """
        rows = len(slot_lists)
        length = max(len(slots) for slots in slot_lists)
        capacity = -(-max(length, 1) // CACHE_CHUNK) * CACHE_CHUNK
        index = torch.zeros((rows, capacity), dtype=torch.long, device=self.coordinates.device)
        valid = torch.zeros((rows, capacity), dtype=torch.bool, device=self.coordinates.device)
        for row, slots in enumerate(slot_lists):
            index[row, : len(slots)] = torch.tensor(slots, dtype=torch.long)
            valid[row, : len(slots)] = True

        def gather(storage):
            expanded = index[:, None, :, None].expand(-1, storage.shape[1], -1, storage.shape[3])
            return torch.gather(storage, 2, expanded) * valid[:, None, :, None].to(storage.dtype)

        positions = torch.arange(capacity, device=index.device)[None].expand(rows, -1)
        return _RowCache(
            {k: gather(v) for k, v in self.keys.items()}, {k: gather(v) for k, v in self.values.items()},
            torch.gather(self.coordinates, 1, index) * valid, torch.where(valid, positions, torch.full_like(positions, -1)),
            length,
        )

    def select(self, rows):
        return _RowCache(
            {k: v.index_select(0, rows) for k, v in self.keys.items()},
            {k: v.index_select(0, rows) for k, v in self.values.items()},
            self.coordinates.index_select(0, rows), self.slot_positions.index_select(0, rows), self.length,
        )


def _concat_caches(caches):
    """Stack the rows of several caches; slots past a cache's own length become holes."""
    caches = [c for c in caches if c is not None and c.coordinates is not None and len(c.coordinates)]
    if not caches:
        return None
    if len(caches) == 1:
        return caches[0]
    capacity = max(c.coordinates.shape[1] for c in caches)
    length = max(c.length for c in caches)

    def padded(tensor, dim, fill=0):
        missing = capacity - tensor.shape[dim]
        if missing == 0:
            return tensor
        shape = list(tensor.shape)
        shape[dim] = missing
        return torch.cat([tensor, tensor.new_full(shape, fill)], dim=dim)

    keys = {k: torch.cat([padded(c.keys[k], 2) for c in caches]) for k in caches[0].keys}
    values = {k: torch.cat([padded(c.values[k], 2) for c in caches]) for k in caches[0].values}
    coordinates = torch.cat([padded(c.coordinates, 1) for c in caches])
    slot_positions = torch.cat([padded(c.slot_positions, 1, -1) for c in caches])
    start = 0
    for c in caches:
        stop = start + len(c.coordinates)
        slot_positions[start:stop, c.length : length] = -1
        coordinates[start:stop, c.length : length] = 0
        start = stop
    return _RowCache(keys, values, coordinates, slot_positions, length)


class WordSynchronousBeamSearch:
    """Batched word-synchronous beam search over a TG / TXL (CC) / TXL (terminals) model."""

    def __init__(self, model, options=None, word_start_mask=None, incomplete_word_ids=()):
        """word_start_mask: for every id, whether it begins a word (tokenizer.word_start_mask); without it every
        terminal piece is a word. incomplete_word_ids: pieces that start a word but spell none of it
        (SentencePiece's bare "\u2581"): in free generation a continuation piece must follow them."""
        self.model = model
        self.options = (options or BeamSearchOptions()).check()
        config = model.config
        self.layout = ActionLayout.from_config(config)
        self.grammar = grammar_for_config(config)
        self.vocab_size = config.vocab_size
        self.kinds = torch.from_numpy(self.grammar._kinds.astype(np.int64))
        self.constraints = SearchConstraints(
            self.grammar, word_start_mask, incomplete_word_ids, self.options.max_nonterminals,
            self.options.max_consecutive_open, self.options.max_structural_per_word,
            self.options.max_nonterminals_per_word,
        )
        self.device = next(model.parameters()).device
        self.forward_calls = 0

    # ---- model calls ------------------------------------------------------------------------------
    @torch.no_grad()
    def _advance(self, parents_cache, hypotheses, parent_rows):
        """Run the model on the last action of each hypothesis; set its log_probs and cache row.

        `parent_rows[i]` is the row of hypothesis i's parent in `parents_cache` (None for the first
        action). Returns the cache whose row i belongs to hypotheses[i].
        """
        if not hypotheses:
            return None
        self.forward_calls += 1
        if not self.options.use_cache:
            return self._advance_reencoding(hypotheses)
        pending = []  # per hypothesis: the NewPositions of its last action (already added to its state)
        for hypothesis in hypotheses:
            pending.append(hypothesis._new_positions)
        width = max(len(p) for p in pending)
        rows = len(hypotheses)
        if parents_cache is None:
            cache = _RowCache()
            old = 0
        else:
            cache = parents_cache.select(torch.tensor(parent_rows, dtype=torch.long, device=self.device))
            old = cache.get_seq_length()
        total = old + width
        input_ids = torch.full((rows, width), self.layout.pad_token_id, dtype=torch.long)
        mask = torch.zeros((rows, width, total), dtype=torch.bool)
        new_coordinates = torch.zeros((rows, width), dtype=torch.long)
        new_slot_positions = torch.full((rows, width), -1, dtype=torch.long)
        new_kinds = torch.zeros((rows, width), dtype=torch.long)  # PositionKind.PAD for holes
        predicting = torch.zeros(rows, dtype=torch.long)
        row_index, query_index, key_index = [], [], []
        for r, (hypothesis, positions) in enumerate(zip(hypotheses, pending)):
            first_new = len(hypothesis.slots)
            for k, position in enumerate(positions):
                hypothesis.slots.append(old + k)
                hypothesis.coordinates.append(position.coordinate)
                input_ids[r, k] = position.input_id
                new_coordinates[r, k] = position.coordinate
                new_slot_positions[r, k] = first_new + k
                new_kinds[r, k] = int(position.kind)
                if position.predicts:
                    predicting[r] = k
            for k, position in enumerate(positions):
                for attended in position.attended.tolist():
                    row_index.append(r)
                    query_index.append(k)
                    key_index.append(hypothesis.slots[attended])
            for k in range(len(positions), width):  # holes attend themselves only
                row_index.append(r)
                query_index.append(k)
                key_index.append(old + k)
        mask[row_index, query_index, key_index] = True
        coordinates, slot_positions = cache.extend(new_coordinates.to(self.device), new_slot_positions.to(self.device))
        structure = PositionStructure(mask.to(self.device), coordinates, slot_positions, new_kinds.to(self.device),
                                      self.model.config.min_relative_position, self.model.config.relative_attention)
        logits = self.model.forward_positions(input_ids.to(self.device), structure, cache)
        cache.commit(width)
        logits = logits[torch.arange(rows), predicting.to(self.device)].float()
        log_probs = torch.log_softmax(logits, dim=-1).cpu()
        for r, hypothesis in enumerate(hypotheses):
            hypothesis.log_probs = log_probs[r]
            hypothesis.row = r
            hypothesis._new_positions = None
        return cache

    def _advance_reencoding(self, hypotheses):
        """Without a cache: run each hypothesis's whole action prefix (right-padded) through the model."""
        rows = [h.ids for h in hypotheses]
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.layout.pad_token_id, dtype=torch.long)
        for r, ids in enumerate(rows):
            input_ids[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask = (torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
        logits = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)).logits
        last = torch.tensor([len(r) - 1 for r in rows], device=self.device)
        log_probs = torch.log_softmax(logits[torch.arange(len(rows)), last].float(), dim=-1).cpu()
        for r, hypothesis in enumerate(hypotheses):
            hypothesis.log_probs = log_probs[r]
            hypothesis.row = r
            hypothesis._new_positions = None
        return None

    # ---- legality -----------------------------------------------------------------------------------
    def _legal(self, hypotheses, task):
        """[H, V] bool allowed next actions, and [H, V] bool the actions that complete the round: the
        grammar's legal actions under the search constraints (search_constraints.py)."""
        return self.constraints.allowed([
            DecodingStatus(h.state, h.ids[-1], task.words[h.sentence], task.max_new_words[h.sentence], h.word,
                           h.piece, h.structural, h.consecutive_open, h.open_before)
            for h in hypotheses
        ])

    # ---- the search -----------------------------------------------------------------------------------
    def _apply(self, parent, action_id, task):
        child = parent.successor(action_id)
        child._new_positions = self.grammar.step(child.state, action_id)
        child.score = parent.score + float(parent.log_probs[action_id])
        child.word, child.piece, child.structural, child.consecutive_open = self.constraints.counters_after(
            action_id, task.words[parent.sentence], parent.word, parent.piece, parent.structural, parent.consecutive_open)
        return child

    @torch.no_grad()
    def search(self, words, prefixes=None):
        """Forced words: `words[s]` is sentence s as a list of words, each a list of piece ids.

        prefixes: for a document-level model, `prefixes[s]` are the action ids (`<s>` first) of the complete
            trees before sentence s in its document; the search continues after them, and every score,
            surprisal and log p(x) is conditional on the prefix (log p(x_s | prefix)).
        Returns one SentenceResult per sentence.
        """
        for s, sentence in enumerate(words):
            if not sentence or any(not word for word in sentence):
                raise ValueError(f"sentence {s} is empty or has an empty word; expected at least one word of pieces")
        return self._run(_Task(words, [0] * len(words), prefixes=self._checked_prefixes(prefixes, len(words))))

    def _checked_prefixes(self, prefixes, count):
        if prefixes is None:
            return None
        if len(prefixes) != count:
            raise ValueError(f"got {len(prefixes)} prefixes for {count} sentences; expected one per sentence")
        if not self.grammar.document_level and any(len(p) > 1 for p in prefixes):
            raise ValueError("prefixes of earlier sentences need a document-level model (config.document_level); "
                             "this model reads one tree per sequence")
        checked = []
        for s, prefix in enumerate(prefixes):
            prefix = [int(i) for i in prefix]
            if not prefix or prefix[0] != self.layout.bos_token_id:
                raise ValueError(f"prefix {s} must start with <s> (id {self.layout.bos_token_id})")
            try:
                self.grammar.validate(prefix, require_complete=len(prefix) > 1)
            except ValueError as error:
                raise ValueError(f"prefix {s} is not a sequence of complete trees: {error}") from None
            checked.append(prefix)
        return checked

    @torch.no_grad()
    def generate(self, prompts, max_new_words=20, top_k=None, num_samples=1, seed=None, prefixes=None, temperature=1.0):
        """Free generation after forced prompt words (`prompts[s]`: a list of words, each a list of piece ids;
        it may be empty). Beam search by default; with `top_k`, `num_samples` samples per prompt, every
        action drawn among the top-k legal ones. `prefixes` as in `search` (earlier sentences of a
        document). Returns, per prompt, [(action ids, joint log-probability)] best first (beam) or in
        sampling order."""
        if not isinstance(max_new_words, int) or max_new_words < 1:
            raise ValueError(f"max_new_words must be a positive integer, got {max_new_words!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        if top_k is not None:
            prompts = [p for p in prompts for _ in range(num_samples)]
            if prefixes is not None:
                prefixes = [p for p in prefixes for _ in range(num_samples)]
        results = self._run(_Task(prompts, [max_new_words] * len(prompts), top_k=top_k, seed=seed, temperature=temperature,
                                  prefixes=self._checked_prefixes(prefixes, len(prompts))))
        trees = [r.trees for r in results]
        if top_k is None:
            return trees
        return [sum(trees[i * num_samples : (i + 1) * num_samples], []) for i in range(len(trees) // num_samples)]

    def _new_hypothesis(self, sentence, prefix=None):
        """The search's start: after `<s>`, or after a document prefix (all its positions run in one call)."""
        h = _Hypothesis.__new__(_Hypothesis)
        h.sentence, h.ids, h.state, h.score = sentence, list(prefix or [self.layout.bos_token_id]), self.grammar.start(), 0.0
        h.word = h.piece = h.structural = h.consecutive_open = 0
        h.slots, h.coordinates, h.log_probs, h.row, h.finished = [], [], None, None, False
        h._new_positions = [position for action in h.ids for position in self.grammar.step(h.state, action)]
        h.open_before = h.state.num_open_total  # n_c counts the nonterminals of this sentence only
        h._parent_row = None
        return h

    def _run(self, task):
        self.model.eval()
        options = self.options
        count = len(task.words)
        calls_before = self.forward_calls
        prefixes = task.prefixes or [None] * count
        frontier = [self._new_hypothesis(s, prefixes[s]) for s in range(count)]
        cache = self._advance(None, frontier, [None] * count)
        marginals = [[0.0] for _ in range(count)]
        finished = [[] for _ in range(count)]
        sampling = task.top_k is not None
        generator = torch.Generator().manual_seed(task.seed) if task.seed is not None else None
        while frontier:
            completed = [[] for _ in range(count)]
            completed_caches = []
            active = frontier
            while active:
                allowed, completing = self._legal(active, task)
                scores = torch.stack([h.log_probs for h in active]) + torch.tensor([h.score for h in active])[:, None]
                scores = scores.masked_fill(~allowed, float("-inf"))
                if sampling:
                    picks = self._sample(scores, task.top_k, generator, task.temperature)
                else:
                    picks = []
                    for s in sorted({h.sentence for h in active}):
                        rows = [i for i, h in enumerate(active) if h.sentence == s]
                        chosen, fast = self._select(scores[rows], completing[rows])
                        picks.extend((rows[local], action) for local, action in chosen + fast)
                successors, round_done = [], []
                for index, action in picks:
                    parent = active[index]
                    child = self._apply(parent, action, task)
                    # Its tree is complete (in a document, the current sentence's root closed).
                    if child.state.finished or self.grammar.is_complete(child.state):
                        child.finished = True
                        finished[child.sentence].append(child)
                        if bool(completing[index, action]):
                            completed[child.sentence].append(child)
                    elif bool(completing[index, action]):
                        round_done.append(child)
                    else:
                        successors.append(child)
                to_run = successors + round_done
                new_cache = self._advance(cache, to_run, [c._parent_row for c in to_run])
                for c in round_done:
                    completed[c.sentence].append(c)
                if options.use_cache and to_run:
                    # Successors come first in to_run, then the round-completing ones: both are slices.
                    if round_done:
                        completed_caches.append((new_cache.rows(len(successors), len(to_run)), round_done))
                    cache = new_cache.rows(0, len(successors)) if successors else None
                    for new_row, c in enumerate(successors):
                        c.row = new_row
                active = [c for c in successors if sampling or len(completed[c.sentence]) < options.beam_size]
                if options.use_cache and cache is not None and len(active) != len(successors):
                    cache = cache.select(torch.tensor([c.row for c in active], dtype=torch.long, device=self.device))
                    for new_row, c in enumerate(active):
                        c.row = new_row
            # Prune each word beam, record the marginal, and go on with the hypotheses that did not finish.
            frontier = []
            for s in range(count):
                if not completed[s]:
                    continue
                beam = sorted(completed[s], key=lambda h: -h.score)
                kept = beam if sampling else beam[: options.word_beam_size]
                scored = kept if options.marginal == "after_pruning" else beam
                marginals[s].append(float(torch.logsumexp(torch.tensor([h.score for h in scored]), 0)))
                frontier.extend(h for h in kept if not h.finished)
            if options.use_cache:
                cache = self._gather_rows(completed_caches, frontier)
        calls = self.forward_calls - calls_before
        results = []
        for s in range(count):
            if not finished[s]:
                raise RuntimeError(
                    f"sentence {s}: no complete tree was found under the beam constraints; relax max_nonterminals, "
                    "max_consecutive_open or max_structural_per_word, or widen the beam"
                )
            n = len(task.words[s])
            m = marginals[s]
            ranked = finished[s] if sampling else sorted(finished[s], key=lambda h: -h.score)[: options.word_beam_size]
            log_prob = float(torch.logsumexp(torch.tensor([h.score for h in ranked]), 0))
            surprisals = [m[t - 1] - m[t] for t in range(1, min(n, len(m) - 1) + 1)]
            end = m[n] - log_prob if len(m) > n else float("nan")
            trees = [(h.ids, h.score) for h in (ranked if sampling else ranked[: options.num_trees])]
            results.append(SentenceResult(surprisals, end, log_prob, trees, calls))
        return results

    def _select(self, scores, completing):
        """Top successors of one sentence: (row, action) within the action beam, and the fast track of
        round-completing successors from outside it."""
        flat = scores.reshape(-1)
        finite = int(torch.isfinite(flat).sum())
        k = min(self.options.beam_size, finite)
        if k == 0:
            return [], []
        top = torch.topk(flat, k).indices
        vocab = self.vocab_size
        completing_flat = completing.reshape(-1)
        in_top = int(completing_flat[top].sum())
        chosen = [(int(i) // vocab, int(i) % vocab) for i in top]
        wanted = self.options.fast_track - in_top
        fast = []
        if wanted > 0:
            outside = completing_flat & torch.isfinite(flat)
            outside[top] = False
            available = int(outside.sum())
            if available:
                candidates = torch.where(outside, flat, torch.full_like(flat, float("-inf")))
                best = torch.topk(candidates, min(wanted, available)).indices
                fast = [(int(i) // vocab, int(i) % vocab) for i in best]
        return chosen, fast

    def _sample(self, scores, top_k, generator, temperature=1.0):
        """One successor per hypothesis, drawn among its top-k legal actions (log-probabilities / temperature)."""
        picks = []
        for row in range(len(scores)):
            legal = int(torch.isfinite(scores[row]).sum())
            if legal == 0:
                continue
            values, indices = torch.topk(scores[row], min(top_k, legal))
            probabilities = torch.softmax((values - values.max()) / temperature, -1)
            picks.append((row, int(indices[torch.multinomial(probabilities, 1, generator=generator)])))
        return picks

    def _gather_rows(self, completed_caches, frontier):
        """The cache of the next frontier: rows of the kept word-completing hypotheses, in frontier order."""
        if not frontier:
            return None
        where = {}
        pieces = []
        for index, (cache, hypotheses) in enumerate(completed_caches):
            pieces.append(cache)
            for row, h in enumerate(hypotheses):
                where[id(h)] = (index, row)
        offsets = np.cumsum([0] + [len(c.coordinates) for c in pieces])
        merged = _concat_caches(pieces)
        rows = []
        for h in frontier:
            index, row = where[id(h)]
            rows.append(int(offsets[index] + row))
        cache = merged.select(torch.tensor(rows, device=self.device)).compact([h.slots for h in frontier])
        for new_row, h in enumerate(frontier):
            h.row = new_row
            h.slots = list(range(len(h.slots)))
        return cache


def prompt_words(ids, layout, word_start_mask=None):
    """Split `<s>` + word pieces (a tokenizer's output for a list of words) into words of piece ids."""
    kinds = layout.kinds(np.asarray(ids, dtype=np.int64))
    words = []
    for position, (piece, kind) in enumerate(zip(ids, kinds)):
        piece = int(piece)
        if kind in (ActionKind.BOS, ActionKind.PAD):
            continue
        if kind != ActionKind.TERMINAL:
            raise ValueError(
                f"prompt position {position} holds id {piece} ({ActionKind(int(kind)).name}); a prompt must be words "
                "(encode it with tokenizer(words, is_split_into_words=True))"
            )
        starts_word = word_start_mask is None or bool(word_start_mask[piece])
        if starts_word or not words:
            words.append([piece])
        else:
            words[-1].append(piece)
    return words


def syntactic_generate(model, input_ids=None, num_beams=1, do_sample=False, top_k=None, max_new_words=20,
                       num_return_sequences=1, word_start_mask=None, incomplete_word_ids=(), seed=None, **beam_options):
    """What `model.generate` does for TG and TXL (CC): complete each prompt into a tree.

    Returns a LongTensor [B * num_return_sequences, L] of action ids (`<s>` first, right-padded with the pad
    id) that `tokenizer.decode` turns into bracketed trees. With do_sample, every action is drawn among the
    top-k legal ones (k = top_k, default 2 as paper 003); otherwise word-synchronous beam search with a word
    beam of num_beams (at least num_return_sequences) and an action beam ten times larger, unless
    beam_size / word_beam_size are given.
    """
    layout = ActionLayout.from_config(model.config)
    if input_ids is None:
        prompts = [[]]
    else:
        prompts = [prompt_words(row.tolist(), layout, word_start_mask) for row in torch.as_tensor(input_ids)]
    word_beam = max(num_beams or 1, num_return_sequences)
    beam_options.setdefault("max_consecutive_open", 5)  # paper 003's setting for generation
    options = BeamSearchOptions(
        beam_size=beam_options.pop("beam_size", 10 * word_beam),
        word_beam_size=beam_options.pop("word_beam_size", word_beam),
        num_trees=num_return_sequences,
        **beam_options,
    )
    search = WordSynchronousBeamSearch(model, options, word_start_mask=word_start_mask,
                                       incomplete_word_ids=incomplete_word_ids)
    if do_sample:
        trees = search.generate(prompts, max_new_words=max_new_words, top_k=top_k or 2,
                                num_samples=num_return_sequences, seed=seed)
    else:
        trees = search.generate(prompts, max_new_words=max_new_words)
    rows = []
    for per_prompt in trees:
        chosen = [ids for ids, _ in per_prompt[:num_return_sequences]]
        while len(chosen) < num_return_sequences:  # fewer complete trees than asked: repeat the best
            chosen.append(chosen[0])
        rows.extend(chosen)
    width = max(len(r) for r in rows)
    output = torch.full((len(rows), width), layout.pad_token_id, dtype=torch.long)
    for index, row in enumerate(rows):
        output[index, : len(row)] = torch.tensor(row, dtype=torch.long)
    return output
