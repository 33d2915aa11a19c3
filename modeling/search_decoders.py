"""Decoders for word-synchronous beam search: what the search asks of a model, and nothing else.

The search (generation_slm.py) keeps hypotheses as rows and knows no model family. It asks a decoder:
  start(sequences, steps) -> (state, log_probs): one row per action sequence (`<s>`, then any document
      prefix); log_probs [N, V] of the next action;
  advance(state, rows, actions, steps) -> (state, log_probs): row i of the new state is row rows[i] of
      `state` followed by actions[i]; log_probs [H, V];
  select(state, rows) -> state: keep these rows (a long tensor), in this order;
  concat(states) -> state: the rows of several states, one after the other;
  retain(state) -> state: from now on only `state` (or rows of it) will be used: free everything else;
  pointer_log_probs(state, positions) -> [H, C] (models with paper 003's start pointer, Nb-Up): log p(start) of the
      candidate positions [H, C] (-1 padding) of a `)` that each row of `state` would take next.
A state is opaque to the search: a Transformer decoder's says where each row's keys and values are (and whatever
per-position values the model's family keeps, such as paper 003's Ex input embeddings, which a later composition
reads), a recurrent decoder's is its hidden state.
`steps` (hypothesis_rows.NewPositions) says what the grammar made of each action: the positions it expands
to, what each attends, its coordinate; a Transformer decoder builds its inputs from it, a recurrent decoder may
ignore it.
log_probs are float32 on the CPU. `forward_calls` counts the decoder's calls; `forward_seconds` the time in
the model's own forward (reading the cache included, preparing its inputs not); `peak_cache_bytes` the
largest cache held.

Hub code: imports only numpy, torch and its sibling files.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .backbone import PositionStructure
from .segment_recurrence import read_prefixes

# The key/value pool grows by at least this many positions at a time.
POOL_CHUNK = 1024


class SearchDecoder:
    """The decoder interface (see the module docstring). Subclasses implement `_start` and `_advance`,
    and `select` / `concat` / `retain` for their state, and run their model through `_log_probs`."""

    def __init__(self) -> None:
        self.forward_calls = 0
        self.forward_seconds = 0.0
        self.peak_cache_bytes = 0

    def start(self, sequences: Sequence[Sequence[int]], steps: Any) -> tuple[Any, torch.Tensor]:
        self.forward_calls += 1
        return self._start(sequences, steps)

    def advance(self, state: Any, rows: torch.Tensor, actions: torch.Tensor | np.ndarray, steps: Any
                ) -> tuple[Any, torch.Tensor]:
        self.forward_calls += 1
        return self._advance(state, rows, actions, steps)

    def _log_probs(self, forward, *arguments, **keywords):
        """log_softmax of `forward(...)`'s logits [H, V], float32 on the CPU, timed."""
        started = time.perf_counter()
        log_probs = torch.log_softmax(forward(*arguments, **keywords).float(), dim=-1).cpu()
        self.forward_seconds += time.perf_counter() - started
        return log_probs

    def _start(self, sequences: Sequence[Sequence[int]], steps: Any) -> tuple[Any, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} implements _start(sequences, steps)")

    def _advance(self, state: Any, rows: torch.Tensor, actions: Any, steps: Any) -> tuple[Any, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} implements _advance(state, rows, actions, steps)")

    def select(self, state: Any, rows: torch.Tensor) -> Any:
        raise NotImplementedError(f"{type(self).__name__} implements select(state, rows)")

    def concat(self, states: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} implements concat(states)")

    def retain(self, state: Any) -> Any:
        return state

    def pointer_log_probs(self, state: Any, positions: np.ndarray) -> torch.Tensor:
        raise ValueError(f"{type(self).__name__} cannot score the start positions of a Nb-Up `)` (paper 003, section "
                         "2.2); search with the KV-cache decoder (use_cache=True)")


@dataclass
class _KeyValueRows:
    """A TransformerSearchDecoder state: slots[r, i] is where position i of row r is in the pool (-1 past
    the row's length)."""

    slots: np.ndarray  # [H, L] int64

    @property
    def lengths(self):
        return (self.slots >= 0).sum(1)


def _copy_into(storage, slots, rows):
    """storage[slots] = rows, in the storage's dtype."""
    storage.index_copy_(0, slots, rows.to(storage.dtype))


class _KeyValuePool:
    """Keys, values, coordinates and token ids of every position computed since the last `retain`, one slot
    each (a DTG arc adds the embedding of an earlier position's token: its head word's last piece), and the named
    per-slot values a model's family hooks keep (`write_values` / `read_values`: paper 003's Ex keeps each
    position's input embedding, what a later `)` composes from; Nb-Up the start pointer's states).

    A hypothesis is a list of slots: branching and pruning hypotheses copy those lists (small integer
    arrays), never keys or values, and a forward call gathers only the slots its new positions attend.
    """

    def __init__(self, device):
        self.device = device
        self.keys, self.values = {}, {}  # per cache layer: [capacity, heads, head_dim]
        self.tables = {}  # {name: [capacity, ...]} the per-slot values of the model's family hooks
        self.coordinates = np.zeros(0, dtype=np.int64)
        self.token_ids = np.zeros(0, dtype=np.int64)
        # Whether a slot holds keys and values: a prefix read through a segment model's memory leaves holes for the
        # positions the memory dropped, masked wherever they are attended.
        self.readable = np.zeros(0, dtype=bool)
        self.used = 0

    def allocate(self, coordinates, token_ids):
        """Slots for new positions with these coordinates and token ids (keys and values grow in `write`)."""
        start, stop = self.used, self.used + len(coordinates)
        if stop > len(self.coordinates):
            size = max(stop, 2 * len(self.coordinates), POOL_CHUNK)
            for name, dtype in (("coordinates", np.int64), ("token_ids", np.int64), ("readable", bool)):
                grown = np.zeros(size, dtype=dtype)
                grown[: self.used] = getattr(self, name)[: self.used]
                setattr(self, name, grown)
        self.coordinates[start:stop] = coordinates
        self.token_ids[start:stop] = token_ids
        self.readable[start:stop] = True
        self.used = stop
        return np.arange(start, stop)

    def _storage(self, table, layer, like):
        """The table's storage of `layer`, grown to the pool's capacity, in the dtype of the first tensor stored
        (writes are cast to it: under autocast a token's embedding is float32 and a composed one bfloat16)."""
        capacity = len(self.coordinates)
        storage = table.get(layer)
        if storage is None or storage.shape[0] < capacity:
            grown = like.new_zeros((capacity,) + tuple(like.shape[1:]))
            if storage is not None:
                grown[: storage.shape[0]] = storage
            table[layer] = storage = grown
        return storage

    def write(self, layer, slots, keys, values):
        _copy_into(self._storage(self.keys, layer, keys), slots, keys)
        _copy_into(self._storage(self.values, layer, values), slots, values)

    def write_values(self, name, slots, values):
        """Store the values [N, D] called `name` of the positions at `slots` (a long tensor)."""
        _copy_into(self._storage(self.tables, name, values), slots, values)

    def read_values(self, name, slots):
        """The values called `name` stored at `slots` (a long tensor of any shape): [*slots.shape, D]."""
        storage = self.tables[name]
        return storage.index_select(0, slots.reshape(-1)).view(*slots.shape, storage.shape[-1])

    def nbytes(self):
        return sum(t.numel() * t.element_size() for table in (self.keys, self.values, self.tables) for t in table.values())

    def keep(self, live):
        """Keep only the slots `live` (sorted), renumbered 0..len(live) - 1."""
        index = torch.as_tensor(live, device=self.device)
        self.keys = {layer: storage.index_select(0, index) for layer, storage in self.keys.items()}
        self.values = {layer: storage.index_select(0, index) for layer, storage in self.values.items()}
        self.tables = {name: storage.index_select(0, index) for name, storage in self.tables.items()}
        self.coordinates = self.coordinates[live]
        self.token_ids = self.token_ids[live]
        self.readable = self.readable[live]
        self.used = len(live)


class _GatheredCache:
    """The `past_key_values` of one forward call in which every row is one new position (T = 1). Per layer,
    the rows' keys and values are written to the pool at `new_slots`, then each row reads the pool at
    `reads[row]` [G]: the slots it attends, itself last (padding, masked, in between). A position computed
    in the same call (TG's COMPOSE copy, read by its STACK copy) is read at the same layer, as it should."""

    def __init__(self, pool, reads, new_slots):
        self.pool, self.reads, self.new_slots = pool, reads, new_slots

    def get_seq_length(self, layer_idx=0):
        return self.reads.shape[1] - 1

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        rows, heads, _, head_dim = key_states.shape  # [N, heads, 1, head_dim]
        self.pool.write(layer_idx, self.new_slots, key_states[:, :, 0], value_states[:, :, 0])
        width = self.reads.shape[1]
        flat = self.reads.reshape(-1)
        keys = self.pool.keys[layer_idx].index_select(0, flat).view(rows, width, heads, head_dim).transpose(1, 2)
        values = self.pool.values[layer_idx].index_select(0, flat).view(rows, width, heads, head_dim).transpose(1, 2)
        return keys, values


class TransformerSearchDecoder(SearchDecoder):
    """A KV-cache decoder for the Transformer families (model.forward_positions).

    Each new position reads only the cached positions it attends (TG: the stack, tens of positions; causal
    grammars and unrestricted heads: the whole prefix), gathered from a pool where every position computed
    since the last word boundary has one slot; hypotheses are lists of slots.

    What a family's positions read besides their tokens (NewPositions.references: DTG's head tokens, paper 003's
    Ex children) goes through the model's family hooks (`search_embeddings`, `after_search_forward`,
    `search_pointer_log_probs`), with the references mapped to the pool's slots; the pool keeps the per-slot values
    those hooks store (Ex: every position's input embedding, all the `)` of a round composed in one call).
    """

    def __init__(self, model):
        super().__init__()
        self.model = model
        config = model.config
        self.device = next(model.parameters()).device
        self.pad_id = config.pad_token_id
        self.grammar = model.grammar  # what the grammar's positions carry besides coordinates
        self.explicit_relative_positions = self.grammar.explicit_relative_positions
        # Unrestricted heads see every earlier position of their sequence, whatever the grammar's mask.
        self.attends_everything = bool(config.num_unrestricted_heads or config.num_unrestricted_layers)
        # A model trained with segment recurrence reads document prefixes through its memory (_start_from_memory).
        self.reads_memory = bool(config.segment_length)
        self.pool = _KeyValuePool(self.device)

    def _start(self, sequences, steps):
        self.pool = _KeyValuePool(self.device)
        if self.reads_memory and max(len(sequence) for sequence in sequences) > 1:
            return self._start_from_memory(sequences, steps)
        empty = _KeyValueRows(np.zeros((len(sequences), 0), dtype=np.int64))
        return self._advance(empty, torch.arange(len(sequences)), None, steps)

    def _start_from_memory(self, sequences, steps):
        """A segment model (config.segment_length) reads a document prefix as it was trained: segment by segment
        (segment_recurrence.read_prefixes). The search then continues from the memory the prefix leaves: its slots'
        keys and values are the memory's, through each layer's own LayerNorm and projections; the prefix positions
        the memory does not hold are holes, never read. (The search's own positions are not cut into segments:
        they attend the memory and each other, an approximation where a sentence is longer than a segment.) A grammar
        whose model reads inputs beside the ids (a start pointer's starts) has no segment model: its config refuses
        segment_length (segments.check_segments_carry_inputs)."""
        config, model = self.model.config, self.model
        found = {}

        def read():
            found["memory"], found["positions"], logits = read_prefixes(
                model, model.grammar, sequences, config.segment_length, config.memory_length,
                config.memory_update)
            return logits

        log_probs = self._log_probs(read)
        owner, slot = np.nonzero(steps.valid)
        new_slots = self.pool.allocate(steps.coordinate[owner, slot], steps.input_id[owner, slot])
        slots = np.full(steps.valid.shape, -1, dtype=np.int64)
        slots[owner, slot] = new_slots
        self.pool.readable[new_slots] = False
        rows, columns = np.nonzero(found["positions"] >= 0)
        held = slots[rows, found["positions"][rows, columns]]
        self.pool.readable[held] = True
        # the slots and the memory's rows and columns go to the device before the loop's kernels (a copy from the
        # host waits for the work queued before it)
        held_slots, rows, columns = (torch.from_numpy(array).to(self.device) for array in (held, rows, columns))
        layers = model.model.decoder.layers
        slots_per_layer = max(len(layer.attention_modules()) for layer in layers)
        with torch.no_grad():
            for index, (layer, memory) in enumerate(zip(layers, found["memory"])):
                states = memory[rows, columns]
                states = layer.ln_attention(states) if layer.pre_layer_norm else states
                for position, attention in enumerate(layer.attention_modules()):
                    keys, values = attention.project(states[None])  # [1, heads, N, head_dim]
                    self.pool.write(index * slots_per_layer + position, held_slots, keys[0].transpose(0, 1),
                                    values[0].transpose(0, 1))
        self.peak_cache_bytes = max(self.peak_cache_bytes, self.pool.nbytes())
        return _KeyValueRows(slots), log_probs

    def select(self, state, rows):
        rows = rows.numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows)
        return _KeyValueRows(state.slots[rows])

    def concat(self, states):
        width = max(s.slots.shape[1] for s in states)
        slots = np.concatenate([np.pad(s.slots, ((0, 0), (0, width - s.slots.shape[1])), constant_values=-1) for s in states])
        return _KeyValueRows(slots)

    def retain(self, state):
        """Between words: keep only the slots `state` uses, renumbered (the pool stays one word's size)."""
        used = state.slots >= 0
        live = np.unique(state.slots[used])
        slots = np.full_like(state.slots, -1)
        slots[used] = np.searchsorted(live, state.slots[used])
        self.pool.keep(live)
        return _KeyValueRows(slots)

    @torch.no_grad()
    def _advance(self, state, rows, actions, steps):
        """One model call in which every row is one new position (a TG closing NT gives two, COMPOSE and
        STACK; a prefix many): no padding positions are computed."""
        rows = rows.numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows)
        count = len(rows)
        parent_slots = state.slots[rows]  # [H, L]
        old = (parent_slots >= 0).sum(1)  # [H] positions each row has
        new_counts = steps.count
        owner, slot = np.nonzero(steps.valid)  # the hypothesis and slot of each new position, in order
        total = len(owner)
        own_position = old[owner] + slot

        # The hypotheses' slots after this call: their parents' and the new positions'.
        input_ids = steps.input_id[owner, slot]
        new_slots = self.pool.allocate(steps.coordinate[owner, slot], input_ids)
        lengths = old + new_counts
        slots = np.full((count, max(int(lengths.max()), parent_slots.shape[1])), -1, dtype=np.int64)
        slots[:, : parent_slots.shape[1]] = parent_slots
        slots[owner, own_position] = new_slots

        # What each new position attends under the grammar's mask (increasing, itself last), as positions of
        # its own sequence; and what it reads: the same, or every earlier position for unrestricted heads.
        attended_table = steps.attended[owner, slot]  # [N, W], -1 after each row's last
        listed = attended_table >= 0
        attended_sizes = listed.sum(1)
        attended = attended_table[listed]
        attending = np.repeat(np.arange(total), attended_sizes)
        if self.attends_everything:
            sizes = own_position + 1
            read = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        else:
            sizes, read = attended_sizes, attended
        query = np.repeat(np.arange(total), sizes)
        rank = np.arange(len(query)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        width = int(sizes.max())
        column = np.where(rank == sizes[query] - 1, width - 1, rank)  # itself in the last column
        reads = np.repeat(new_slots[:, None], width, axis=1)  # padding reads itself (masked)
        reads[query, column] = slots[owner[query], read]
        positions = np.full((total, width), -1, dtype=np.int64)
        positions[query, column] = read
        # Read position p sits in column p (unrestricted heads) or in its rank among the attended ones.
        attended_column = column if not self.attends_everything else np.where(
            attended == own_position[attending], width - 1, attended)
        mask = np.zeros((total, 1, width), dtype=bool)
        mask[attending, 0, attended_column] = True
        mask[:, 0] &= self.pool.readable[reads]  # holes: prefix positions a segment model's memory dropped
        coordinates = self.pool.coordinates[reads] * (positions >= 0)
        relative = None
        if self.explicit_relative_positions:  # DTG's COMPOSE rows
            relative = np.zeros((total, 1, width), dtype=np.int64)
            relative[attending, 0, attended_column] = steps.relative[owner, slot][listed]
        # The earlier positions each new position reads besides its token (DTG: an arc's head word's last piece;
        # Ex: a `)`'s children), as slots of the pool.
        references = None
        if steps.references is not None:
            referenced = steps.references[owner, slot]
            references = np.where(referenced >= 0, slots[owner[:, None], np.maximum(referenced, 0)], -1)

        # Logits of each hypothesis's last predicting position only.
        predicts = steps.predicts[owner, slot]
        output = np.full(count, -1, dtype=np.int64)
        np.maximum.at(output, owner[predicts], np.flatnonzero(predicts))

        # Every input goes to the device before the first kernel of the call, so that the host waits for the
        # device once, for the log-probabilities (a copy from the host waits for the work queued before it). The
        # counts the attention asks for are the host's (the device would be read for them: a sync).
        device = self.device
        to_device = lambda array: torch.from_numpy(array).to(device)  # noqa: E731
        config = self.model.config
        structure = PositionStructure(
            to_device(mask), to_device(coordinates), to_device(positions),
            to_device(steps.kind[owner, slot][:, None]),
            config.min_relative_position, config.relative_attention,
            None if relative is None else to_device(relative), segmented=self.reads_memory,
            coordinate_bound=int(coordinates.max()) + 1, position_bound=int(positions.max()) + 1,
        )
        input_ids = to_device(input_ids[:, None])
        cache = _GatheredCache(self.pool, to_device(reads), to_device(new_slots))
        output_index = (to_device(output), to_device(np.zeros(count, dtype=np.int64)))
        extra, inputs_embeds = self.model.model.search_embeddings(self.pool, input_ids, new_slots, references, slot)
        log_probs = self._log_probs(self.model.forward_positions, input_ids, structure, cache, extra,
                                    output_index=output_index, inputs_embeds=inputs_embeds)
        self.model.model.after_search_forward(self.pool, structure, new_slots)
        self.peak_cache_bytes = max(self.peak_cache_bytes, self.pool.nbytes())
        return _KeyValueRows(slots), log_probs

    @torch.no_grad()
    def pointer_log_probs(self, state, positions):
        """[H, C] float32 log p(s = i) (start_pointer.py) of the candidate positions `positions` [H, C] (-1 padding)
        of a `)` after each row of `state`: h_{k-1} is the row's last position's (the one that predicts the next
        action), h_i the candidates'; -inf on padding."""
        slots = state.slots
        rows = np.arange(len(slots))
        last = slots[rows, (slots >= 0).sum(1) - 1]
        candidate_slots = np.where(positions >= 0, slots[rows[:, None], np.maximum(positions, 0)], 0)
        log_probs = self.model.model.search_pointer_log_probs(self.pool, last, candidate_slots, positions >= 0)
        return log_probs.float().cpu()


class ReencodingSearchDecoder(SearchDecoder):
    """No cache: every call runs each row's whole action prefix through the model (right-padded). The same
    numbers as TransformerSearchDecoder, for tests and benchmarks. Its state is the rows' action lists."""

    def __init__(self, model):
        super().__init__()
        read = list(model.grammar.action_inputs)
        if read:
            raise ValueError(f"a {model.config.grammar} model's actions carry {read} that an action-id prefix does not "
                             "hold, so it cannot be re-encoded; search it with the KV-cache decoder (use_cache=True)")
        self.model = model
        self.device = next(model.parameters()).device
        self.pad_id = model.config.pad_token_id

    def _start(self, sequences, steps):
        return self._run([list(s) for s in sequences])

    def _advance(self, state, rows, actions, steps):
        return self._run([state[r] + [a] for r, a in zip(rows.tolist(), actions.tolist())])

    def select(self, state, rows):
        return [state[r] for r in rows.tolist()]

    def concat(self, states):
        return [row for state in states for row in state]

    @torch.no_grad()
    def _run(self, sequences):
        width = max(len(s) for s in sequences)
        input_ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        for r, ids in enumerate(sequences):
            input_ids[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        lengths = torch.tensor([len(s) for s in sequences])
        attention_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        last = (lengths - 1).to(self.device)

        def forward():
            logits = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)).logits
            return logits[torch.arange(len(sequences), device=self.device), last]

        return sequences, self._log_probs(forward)


def search_decoder_for(model: Any, use_cache: bool = True) -> SearchDecoder:
    """The decoder beam search uses for `model`: its own (`model.search_decoder(use_cache)`, the hook every family's LM
    class has: generation_mixin.py)."""
    return model.search_decoder(use_cache=use_cache)
