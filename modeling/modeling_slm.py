"""Transformer syntactic LMs as transformers models: the shared classes that every Transformer family extends.

A family (in its own files: transformer_grammar_model.py for paper 000's, dependency_model.py for paper 002's,
compositional_model.py for paper 003's) is a config class (which grammars it takes) and two thin model classes
over the ones below, with hooks where its inputs or outputs differ; everything else is shared:

- `SyntacticTransformerModel` (AutoModel) and `SyntacticTransformerForCausalLM` (AutoModelForCausalLM) follow
  the HuggingFace causal-LM contract. `input_ids` [B, T] are the tokenizer's action ids (`<s>` first) with
  its [B, T] padding `attention_mask`; the model asks its grammar to expand them into positions (TG: each
  closing NT becomes a COMPOSE and a STACK copy), runs the backbone over the positions, and returns one
  output per action: `logits[:, t]` is the distribution of action t + 1. So `labels=input_ids` gives
  transformers' usual shifted mean NLL of the actions (labels equal to the pad id, or under a 0 of the
  attention mask, are ignored), and log p(x, y) is the sum of the shifted log-probs, as for GPT-2.
- The data collator's precomputed structure (`expansion_index`, `position_mask`, `position_coordinates`,
  `position_kinds`, `prediction_index`) is the fast training path: the same numbers without computing
  the grammar inside forward; with the sizes it counted on the host (`num_coordinate_values`; the grammar's
  `host_inputs`), a training step reads nothing back from the device.
- A family's extra inputs travel as one mapping, the family inputs: what its grammar reads beside the action ids
  (`grammar.action_inputs`, e.g. paper 003's Nb-Up `constituent_starts`), what its `batch` gives beside the
  generic structure (`grammar.family_inputs`: DTG's head tokens, Ex's compositions, Nb-Up's start candidates)
  and what it counts on the host (`grammar.host_input_names`). `forward` takes them by name, `positions_of_actions`
  gathers them once whichever path built the structure, and the family's own model class turns them into
  embeddings and outputs through its hooks (`family_embeddings`, `family_outputs`, `family_losses`, and for the
  beam search `search_embeddings`, `after_search_forward`, `search_pointer_log_probs`): dependency_model.py for
  DTG, compositional_model.py for paper 003's. The backbone sees positions and their structure only.
- `forward_positions` runs given positions and structure (with a KV cache of the attended positions): the
  beam-search decoder of search_decoders.py uses it.

Hub code: imports only torch, transformers and its sibling files.
"""

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .backbone import PositionStructure, SyntacticTransformerDecoder, init_backbone_weights
from .configuration_slm import SyntacticTransformerConfig
from .generation_mixin import SyntacticGenerationMixin
from .grammars import PositionKind, grammar_for_config
from .hub_code import SavesHubCode
from .padding import check_padding_at_the_ends, shifted_action_loss
from .safe_loading import SafetensorsOnlyLoading
from .search_decoders import ReencodingSearchDecoder, TransformerSearchDecoder
from .segments import causal_segment_window, check_segment_options

IGNORE_INDEX = -100
# What transformers' generate passes to forward and this model does not need: positions come from the
# grammar and the attention mask, and every output is computed.
IGNORED_GENERATION_INPUTS = ("position_ids", "cache_position", "output_attentions", "logits_to_keep")
# transformers 5.24 renamed the key/value cache from `past_key_values` to `cache` (input and output field);
# forward takes either name, and outputs fill the field the installed transformers defines.
CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
# The collator's precomputed structure (all of them, or none).
STRUCTURE_INPUTS = ("expansion_index", "position_mask", "position_coordinates", "position_kinds", "prediction_index")


class ExpandedActions(NamedTuple):
    """What `positions_of_actions` makes of action ids [B, T]: the positions, their structure, and the family's
    inputs, the same whichever path built them (the collator's precomputed structure, the grammar on the host, or a
    causal grammar's own layout)."""

    position_ids: torch.Tensor  # [B, T'] the token id of each position
    structure: PositionStructure  # what each position attends and where it sits (the backbone's input)
    prediction_index: torch.Tensor  # [B, T] the position whose output predicts action t + 1
    position_actions: torch.Tensor  # [B, T'] the action (column of input_ids) each position comes from
    family_inputs: dict  # {name: value}: the grammar's action inputs, family inputs and host inputs present


def coordinate_count(coordinates):
    """1 + max - min(0, min) of host (numpy) coordinates, a Python int: how many coordinate values the factorized
    attention spans (backbone.PositionStructure.num_coordinate_values; grammars whose relative positions are affine
    in the coordinates shift them to start at 0, hence the smallest). Counted where the grammar ran, on the host."""
    if not coordinates.size:
        return 1
    return int(coordinates.max()) - min(0, int(coordinates.min())) + 1


def _one_cache(cache, past_key_values):
    """The cache given under either name (transformers' own generate passes `cache` from 5.24 on)."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("got both `cache` and `past_key_values`; pass the cache once (`cache` is its new name)")
    return cache if cache is not None else past_key_values


def family_input_names(grammar):
    """Every family input a model of `grammar` takes: its action inputs, its batch's family inputs, its host inputs."""
    return (*grammar.action_inputs, *grammar.family_inputs, *grammar.host_input_names)


def _family_inputs(model, inputs):
    """The family inputs among forward's other keyword inputs; anything else that is set is a TypeError (what
    transformers' generate passes and this model does not need aside)."""
    known = family_input_names(model.grammar)
    unknown = sorted(name for name, value in inputs.items()
                     if name not in known and name not in IGNORED_GENERATION_INPUTS and value is not None)
    if unknown:
        raise TypeError(f"{type(model).__name__}.forward() got unexpected inputs {unknown}")
    return {name: value for name, value in inputs.items() if name in known and value is not None}


def _in_slots(array, keep):
    """A grammar.batch array [B, W] or [B, W, W] (each row's positions numbered from 0) laid out in the batch's own
    slots `keep` [B, S] bool (left or right padding): [B, S] or [B, S, S], False or -1 elsewhere."""
    count, width = keep.shape
    placed = np.full((count, width) + (width,) * (array.ndim - 2), False if array.dtype == bool else -1, array.dtype)
    for b, where in enumerate(keep):
        slots = np.flatnonzero(where)
        length = len(slots)
        if array.ndim == 3:
            placed[b][np.ix_(slots, slots)] = array[b, :length, :length]
        else:
            placed[b, slots] = array[b, :length]
    return placed


def _slot_positions(kinds):
    """[B, T'] each position's index in its right-padded row, -1 for padding (from the PositionKinds)."""
    index = torch.arange(kinds.shape[1], device=kinds.device).expand(len(kinds), -1)
    return torch.where(kinds != PositionKind.PAD, index, torch.full_like(index, -1))


class SyntacticTransformerPreTrainedModel(SafetensorsOnlyLoading, SavesHubCode, PreTrainedModel):
    config_class = SyntacticTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["SyntacticTransformerLayer"]
    _supports_sdpa = True

    def hub_code_objects(self):
        """What a checkpoint needs the code of (hub_code.py): the model, its config and its grammar."""
        return [self, self.config, self.grammar]

    def _init_weights(self, module):
        init_backbone_weights(module, self.config)
        if isinstance(module, SyntacticTransformerForCausalLM):
            nn.init.zeros_(module.output_bias)


class SyntacticTransformerModel(SyntacticTransformerPreTrainedModel):
    """The backbone under the HF contract: hidden states [B, T, d], one per action (the output of the position
    that predicts the next action).

    forward(input_ids [B, T] action ids, attention_mask [B, T] padding (1 = real) or None (then the pad id
            marks padding), past_key_values / use_cache (causal grammars only: a TG's positions depend on
            the tree, so cached TG decoding goes through `forward_positions`), extra_embeddings [B, T', d]
            added to the positions' embeddings, output_hidden_states (per position), and the collator's
            precomputed structure:
              expansion_index [B, T'] the action each position comes from; position_mask [B, T', T'] bool;
              position_coordinates [B, T'] (R_ij = c_i - c_j); position_kinds [B, T'] PositionKind;
              prediction_index [B, T] the position whose output predicts action t + 1;
              position_indices (optional) [B, T'] long, each position's index in its own sentence, -1 on padding:
              the absolute position ids of a row packed with several sentences (hf_slm/data/packing.py; default: the
              slot in the row);
              num_coordinate_values (optional) a Python int, 1 + max - min(0, min) of position_coordinates (an upper
              bound gives the same numbers): the width of the factorized attention's one-hot key block, which the
              collator counts on the host; without it the model reads the count back from the device once per call
              (a sync off the CPU). Used by grammars whose coordinates are tree depths (TG, DTG arc-standard);
            and the family inputs of the grammar (`family_input_names(grammar)`, by name): what it reads beside
            the action ids (`grammar.action_inputs`: paper 003's Nb-Up constituent_starts [B, T], each `)`'s start, an
            action index with `<s>` = 0, -1 elsewhere: the tokenizer's field), and with the precomputed structure
            what the collator gives from its `batch` (`grammar.family_inputs`: DTG's head_token_index [B, T'];
            paper 003's Ex composition_children [B, T', T'] and composition_level [B, T']; Nb-Up's start_candidates
            [B, T', T']) and, optionally, counts on the host (`grammar.host_input_names`: Ex's composition_schedule
            [S] long and composition_schedule_levels, without which the composer reads its sizes back from the
            device, a sync off the CPU).)
    A family's own model class turns its inputs into embeddings and outputs through the hooks below
    (`build_family_modules`, `check_family_inputs`, `family_embeddings`, `family_outputs` and the search hooks);
    this class has none. With family outputs (Nb-Up's start_log_probs) the output is the family's
    `family_output_class`.
    """

    family_output_class = None  # the output class of a family whose hooks add outputs (a BaseModelOutputWithPast)

    def __init__(self, config):
        super().__init__(config)
        self.grammar = grammar_for_config(config)
        self.layout = self.grammar.layout
        self.decoder = SyntacticTransformerDecoder(config, compose_kinds=self.grammar.compose_kinds)
        self.build_family_modules(config)
        self.post_init()

    # ---- the family hooks: a family's model class overrides them (this class has no family inputs) ---------
    def build_family_modules(self, config):
        """Build the family's own modules (after the decoder, before the weights are initialized)."""

    def check_family_inputs(self, input_ids, family_inputs, precomputed):
        """Raise ValueError naming what is missing when the family's inputs cannot expand these action ids."""

    def family_embeddings(self, expanded):
        """(added, replacing) for the positions of `expanded` (an ExpandedActions): [B, T', d] embeddings added to the
        positions' token embeddings, and [B, T', d] input embeddings that replace them, or None each."""
        return None, None

    def added_token_embeddings(self, position_ids, token_ids):
        """[B, T', d] what a position adds for another token it names (token_ids [B, T'], -1 for none), or None.
        Segment recurrence and the search decoder come here too."""

    def family_outputs(self, expanded):
        """{field: tensor} the family adds to the output, after the decoder ran (its hooks may read what it
        computed); the fields of `family_output_class`."""
        return {}

    def search_embeddings(self, pool, input_ids, new_slots, references, order):
        """(added, replacing) [N, 1, d] or None each, for the beam-search decoder's N new positions (one per row):
        input_ids [N, 1]; new_slots [N] their slots in the decoder's pool (search_decoders._KeyValuePool: token ids,
        and any per-slot values the family keeps); references [N, C] the pool slots of the earlier positions each
        reads (NewPosition.extra_inputs; -1 after), None for a grammar without them; order [N] each position's index
        among its hypothesis's new positions."""
        return None, None

    def after_search_forward(self, pool, structure, new_slots):
        """What the family keeps in the decoder's pool after its forward call (Nb-Up: the pointer's states)."""

    def search_pointer_log_probs(self, pool, query_slots, candidate_slots, candidates):
        """[H, C] log p(start) of the candidates at `candidate_slots` of a `)` predicted at `query_slots` (a grammar
        that `takes_start`)."""
        raise ValueError(f"a {self.config.grammar} model has no start pointer")

    def get_input_embeddings(self):
        return self.decoder.embed_tokens

    def set_input_embeddings(self, value):
        self.decoder.embed_tokens = value

    # ---- from actions to positions ------------------------------------------------------------------
    def _structure(self, mask, coordinates, positions, kinds, relative_positions=None, coordinate_bound=None):
        """The PositionStructure of these tensors. Every caller's positions are slot indices, below the slot count
        S, which bounds them without reading the device; `coordinate_bound` bounds the coordinates where the caller
        knows one (a causal grammar's coordinates are its positions; the host grammar's came from the host)."""
        return PositionStructure(mask, coordinates, positions, kinds, self.config.min_relative_position,
                                 self.config.relative_attention, relative_positions,
                                 relative_affine=self._relative_affine(kinds), coordinate_bound=coordinate_bound,
                                 position_bound=max(1, positions.shape[1]))

    def _relative_affine(self, kinds):
        """(scale, offset) [B, T'] of each position, for grammars whose R is scale (c_i - c_j) + offset per
        position kind (grammar.relative_affine_by_kind); else None."""
        by_kind = self.grammar.relative_affine_by_kind
        if by_kind is None or kinds is None:
            return None
        tables = self.__dict__.setdefault("_affine_tables", {})
        if kinds.device not in tables:  # built on the host and copied once per device, not every forward call
            table = torch.tensor([[1, 0]] * (max(PositionKind) + 1))
            for kind, values in by_kind.items():
                table[kind] = torch.tensor(values)
            tables[kinds.device] = table.to(kinds.device)
        scale_offset = tables[kinds.device][kinds.long()]
        return scale_offset[..., 0], scale_offset[..., 1]

    def positions_of_actions(self, input_ids, attention_mask=None, past_length=0, precomputed=None, family_inputs=None):
        """ExpandedActions of action ids [B, T]: position ids [B, T'], their PositionStructure, prediction_index
        [B, T], each position's action, and the family inputs: those given (`family_inputs`: the grammar's action
        inputs, and with `precomputed` the collator's family and host inputs) and those the grammar's `batch` gives
        when it runs here."""
        family_inputs = dict(family_inputs or {})
        self._check_action_inputs(input_ids, family_inputs)
        self.check_family_inputs(input_ids, family_inputs, precomputed)
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; expected the [B, T] padding mask a tokenizer "
                "returns (the grammar builds the structural mask itself)"
            )
        if precomputed is not None:
            if past_length:
                raise ValueError("the collator's precomputed structure covers whole sequences; it cannot follow a cache")
            self._check_precomputed_family_inputs(family_inputs)
            kinds = precomputed["position_kinds"]
            explicit = self.grammar.needs_explicit_relative_positions
            if explicit and precomputed.get("position_relative_positions") is None:
                raise ValueError(f"a {self.config.grammar} model needs position_relative_positions with the precomputed "
                                 "structure (SyntacticDataCollator gives them for a dependency grammar)")
            # A causal grammar's coordinates are its positions, below T'; other grammars' (TG's, DTG's depths) are
            # the collator's count (num_coordinate_values, from the host) or, without it, counted from the device
            # once per forward call when attention needs the count (backbone.PositionStructure; a sync off the CPU).
            if self.grammar.causal:
                bound = max(1, kinds.shape[1])
            else:
                count = precomputed.get("num_coordinate_values")
                bound = None if count is None else self._check_coordinate_count(count)
            structure = self._structure(precomputed["position_mask"].bool(), precomputed["position_coordinates"],
                                        self._precomputed_positions(precomputed, kinds), kinds,
                                        precomputed.get("position_relative_positions") if explicit else None,
                                        coordinate_bound=bound)
            expansion = precomputed["expansion_index"]
            return ExpandedActions(input_ids.gather(1, expansion), structure, precomputed["prediction_index"], expansion,
                                   family_inputs)
        padding = attention_mask.bool() if attention_mask is not None else None
        if self.grammar.causal:
            return self._causal_positions(input_ids, padding, past_length, family_inputs)
        if past_length:
            raise ValueError(
                f"a {self.config.grammar} model's positions depend on the whole tree, so it cannot extend a cache from "
                "action ids; cached decoding goes through model.generate / word_synchronous_beam_search"
            )
        if padding is None:
            padding = input_ids != self.layout.pad_token_id
        device = input_ids.device
        batch, length = input_ids.shape
        ids = input_ids.cpu().numpy()
        keep = padding.cpu().numpy()
        check_padding_at_the_ends(keep, self.layout.pad_token_id, attention_mask is not None)
        real = [np.flatnonzero(row) for row in keep]
        for index, where in enumerate(real):
            if len(where) == 0:
                raise ValueError(f"input_ids row {index} is all padding")
        # A grammar whose relative positions are neither c_i - c_j nor affine in it (DTG-eager, -swift) gives them
        # explicitly.
        explicit = self.grammar.needs_explicit_relative_positions
        grammar_batch = self.grammar.batch([ids[b, where] for b, where in enumerate(real)], require_complete=False,
                                           with_relative_positions=explicit,
                                           **self._action_arguments(family_inputs, real))
        prediction_index = np.zeros((batch, length), dtype=np.int64)
        for b, where in enumerate(real):
            prediction_index[b, where] = grammar_batch["prediction_index"][b, : len(where)]
        kinds = torch.from_numpy(grammar_batch["position_kinds"].astype(np.int64)).to(device)
        coordinates = grammar_batch["position_coordinates"]
        structure = self._structure(
            torch.from_numpy(grammar_batch["attention_mask"]).to(device),
            torch.from_numpy(coordinates).to(device), _slot_positions(kinds), kinds,
            torch.from_numpy(grammar_batch["relative_positions"]).to(device) if explicit else None,
            # counted on the host, where the grammar ran (the coordinates' shift for relative_affine keeps it a bound)
            coordinate_bound=coordinate_count(coordinates),
        )
        family_inputs.update({name: torch.from_numpy(grammar_batch[name]).to(device) for name in self.grammar.family_inputs})
        return ExpandedActions(torch.from_numpy(grammar_batch["input_ids"]).to(device), structure,
                               torch.from_numpy(prediction_index).to(device),
                               torch.from_numpy(grammar_batch["expansion_index"]).to(device), family_inputs)

    def _precomputed_positions(self, precomputed, kinds):
        """[B, T'] each position's index in its own sequence, -1 for padding: the collator's position_indices (a
        packed row of several sentences, each from 0: hf_slm/data/packing.py), else its slot in the row."""
        indices = precomputed.get("position_indices")
        if indices is None:
            return _slot_positions(kinds)
        if self.config.num_unrestricted_heads or self.config.num_unrestricted_layers:
            raise ValueError("position_indices (a packed row of several sentences) with unrestricted heads: their causal "
                             "mask would cross from one sentence into the next; train this model on unpacked rows")
        if tuple(indices.shape) != tuple(kinds.shape):
            raise ValueError(f"position_indices has shape {tuple(indices.shape)}; expected that of position_kinds "
                             f"{tuple(kinds.shape)} (one index per position, -1 on padding)")
        return indices

    def _check_action_inputs(self, input_ids, family_inputs):
        """Each action input given is one value per action: the shape of input_ids."""
        for name in self.grammar.action_inputs:
            given = family_inputs.get(name)
            if given is not None and tuple(given.shape) != tuple(input_ids.shape):
                raise ValueError(f"{name} has shape {tuple(given.shape)}; expected that of input_ids "
                                 f"{tuple(input_ids.shape)} (one value per action, -1 where there is none)")

    def _check_precomputed_family_inputs(self, family_inputs):
        """With the collator's structure, the grammar's family inputs come from the collator too (all of them), and
        its host inputs all or none."""
        missing = [name for name in self.grammar.family_inputs if family_inputs.get(name) is None]
        if missing:
            raise ValueError(f"a {self.config.grammar} model needs {missing} with the precomputed structure "
                             "(SyntacticDataCollator gives them: the grammar's family_inputs)")
        host = [name for name in self.grammar.host_input_names if family_inputs.get(name) is not None]
        if host and len(host) != len(self.grammar.host_input_names):
            raise ValueError(f"the host inputs {list(self.grammar.host_input_names)} come together (SyntacticDataCollator "
                             f"gives them all with host_counts); got only {host}")

    def _action_arguments(self, family_inputs, real):
        """grammar.batch's keyword arguments for its action inputs, the real actions of each row (`real`: the indices
        of each row's real actions); an action input not given is None."""
        arguments = {}
        for name, keyword in self.grammar.action_inputs.items():
            given = family_inputs.get(name)
            values = None if given is None else given.cpu().numpy()
            arguments[keyword] = None if values is None else [values[b, where] for b, where in enumerate(real)]
        return arguments

    @staticmethod
    def _check_coordinate_count(count):
        """A given num_coordinate_values is a positive Python int (PositionStructure checks, on the CPU, that it
        covers the coordinates: a smaller one would drop one-hot columns silently)."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
            raise ValueError(f"num_coordinate_values is {count!r}; expected a positive Python int (the collator's count, "
                             "kept on the host: a tensor would be read back from the device)")
        return int(count)

    def _causal_positions(self, input_ids, padding, past_length, family_inputs):
        """Causal grammars have one position per action: the structure follows the batch's own layout (left or
        right padding, a cache), with each slot's index among the real tokens of its row as coordinate, and so do the
        family inputs the grammar's batch gives (paper 003's Ex + Nm: compositions; Nb-Up: start candidates)."""
        batch, length = input_ids.shape
        total = past_length + length
        mask_given = padding is not None
        if padding is None:
            padding = torch.ones((batch, total), dtype=torch.bool, device=input_ids.device)
            if not past_length:
                padding = input_ids != self.layout.pad_token_id
        if padding.shape[1] != total:
            raise ValueError(f"attention_mask covers {padding.shape[1]} positions; expected {total} (cached + new)")
        reads = self.grammar.family_inputs or self.grammar.action_inputs
        if past_length and reads:
            raise ValueError(
                f"a {self.config.grammar} model's positions read {list(family_input_names(self.grammar))} of earlier "
                "positions, which a key/value cache does not keep, so it cannot extend a cache from action ids; cached "
                "decoding goes through model.generate / word_synchronous_beam_search")
        if not past_length:
            ids = input_ids.cpu().numpy()
            keep = padding.cpu().numpy()
            check_padding_at_the_ends(keep, self.layout.pad_token_id, mask_given)
            rows = [row[where] for row, where in zip(ids, keep)]
            if any(len(row) == 0 for row in rows):
                raise ValueError("an input_ids row is all padding")
            if not reads:
                self.grammar.validate_batch(rows, require_complete=False)
            else:  # grammar.batch validates, and numbers each row's positions from 0: one per action, in order
                grammar_batch = self.grammar.batch(rows, require_complete=False, with_relative_positions=False,
                                                   **self._action_arguments(family_inputs,
                                                                            [np.flatnonzero(k) for k in keep]))
                family_inputs.update({name: torch.from_numpy(_in_slots(grammar_batch[name], keep)).to(input_ids.device)
                                      for name in self.grammar.family_inputs})
        positions = padding.long().cumsum(-1) - 1
        positions = positions.masked_fill(~padding, -1)
        structure = self._structure(None, positions.clamp(min=0), positions, None, coordinate_bound=max(1, total))
        structure.mask = structure.causal_mask(length)
        if self.config.segment_length:
            # A segment model reads as it was trained, through a memory: for a causal grammar that is a window,
            # the same in one pass, through a cache, and segment by segment (segment_recurrence.py); any length.
            segment_length, memory_length, _ = check_segment_options(
                self.grammar, self.config.segment_length, self.config.memory_length, self.config.memory_update)
            structure.mask = structure.mask & causal_segment_window(
                positions[:, -length:], positions, segment_length, memory_length)
            structure.segmented = True
        # one position per action: its index among the row's real ones
        return ExpandedActions(input_ids, structure, torch.arange(length, device=input_ids.device).expand(batch, -1),
                               positions[:, -length:].clamp(min=0), family_inputs)

    # ---- forward ----------------------------------------------------------------------------------------
    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, use_cache=None, inputs_embeds=None,
                output_hidden_states=None, return_dict=True, extra_embeddings=None, expansion_index=None,
                position_mask=None, position_coordinates=None, position_kinds=None, prediction_index=None, cache=None,
                position_relative_positions=None, num_coordinate_values=None, position_indices=None, **inputs):
        family_inputs = _family_inputs(self, inputs)
        past_key_values = _one_cache(cache, past_key_values)
        if input_ids is None:
            raise ValueError("input_ids (action ids [B, T]) are required: the grammar expands actions, not embeddings")
        if inputs_embeds is not None:
            raise ValueError("inputs_embeds is not supported: positions come from the grammar; use extra_embeddings")
        if use_cache and past_key_values is None:
            from transformers import DynamicCache

            past_key_values = DynamicCache()
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        given = dict(expansion_index=expansion_index, position_mask=position_mask, position_coordinates=position_coordinates,
                     position_kinds=position_kinds, prediction_index=prediction_index)
        present = [name for name, value in given.items() if value is not None]
        if present and len(present) != len(given):
            raise ValueError(f"the precomputed structure needs all of {list(given)}; got only {present}")
        if present:
            given.update(position_relative_positions=position_relative_positions,
                         num_coordinate_values=num_coordinate_values, position_indices=position_indices)
        elif position_indices is not None:
            raise ValueError("position_indices number the positions of the collator's precomputed structure (a packed "
                             "row); pass them with it")
        expanded = self.positions_of_actions(input_ids, attention_mask, past_length, given if present else None,
                                             family_inputs)
        added, replacing = self.family_embeddings(expanded)
        if added is not None:
            extra_embeddings = added if extra_embeddings is None else extra_embeddings + added
        hidden, all_hidden = self.decoder(expanded.position_ids, expanded.structure,
                                          past_key_values if use_cache or past_length else None,
                                          extra_embeddings=extra_embeddings, inputs_embeds=replacing,
                                          output_hidden_states=bool(output_hidden_states))
        prediction_index = expanded.prediction_index
        per_action = hidden.gather(1, prediction_index[:, :, None].expand(-1, -1, hidden.shape[-1]))
        cache_output = {CACHE_FIELD: past_key_values if use_cache else None}
        outputs = self.family_outputs(expanded)
        if not outputs:
            return BaseModelOutputWithPast(last_hidden_state=per_action, hidden_states=all_hidden, **cache_output)
        return self.family_output_class(last_hidden_state=per_action, hidden_states=all_hidden, **cache_output, **outputs)


class SyntacticTransformerForCausalLM(SyntacticTransformerPreTrainedModel, SyntacticGenerationMixin):
    """The backbone with the tied output layer (embedding transpose + bias); HF causal-LM contract.

    forward(...) takes the inputs of SyntacticTransformerModel and `labels` [B, T]: action ids, shifted inside
    (labels=input_ids is the usual choice); the loss is the mean NLL of the predicted actions. Labels equal to
    the pad id or under a 0 of the attention mask are ignored, as are -100s.
    A family whose base model adds outputs (paper 003's Nb-Up: start_log_probs) returns them in its
    `family_output_class`, with lm_loss (the actions') and the losses of its `family_losses` hook; loss is their sum.
    A family class names its action inputs in its forward's signature, so that transformers.Trainer keeps a
    dataset's columns of them.
    """

    base_model_class = SyntacticTransformerModel
    family_output_class = None  # the output class of a family with outputs of its own (a CausalLMOutputWithPast)
    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.model = self.base_model_class(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.name_tree_pipeline(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.decoder.embed_tokens

    def set_input_embeddings(self, value):
        self.model.decoder.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def _logits(self, hidden):
        hidden = F.dropout(hidden, self.config.final_dropout, self.training)
        return self.lm_head(hidden) + self.output_bias

    def forward(self, input_ids=None, attention_mask=None, labels=None, past_key_values=None, use_cache=None,
                output_hidden_states=None, return_dict=True, cache=None, **inputs):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             past_key_values=_one_cache(cache, past_key_values), use_cache=use_cache,
                             output_hidden_states=output_hidden_states, **inputs)
        logits = self._logits(outputs.last_hidden_state)
        loss = targets = None
        if labels is not None:
            loss, targets = shifted_action_loss(logits, labels, attention_mask, self.config.pad_token_id, IGNORE_INDEX)
        family_outputs = {name: value for name, value in outputs.items() if name not in BaseModelOutputWithPast.__dataclass_fields__}
        if not family_outputs:
            return CausalLMOutputWithPast(
                loss=loss, logits=logits, hidden_states=outputs.hidden_states, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}
            )
        losses = self.family_losses(family_outputs, inputs, targets) if labels is not None else {}
        total = loss
        for term in losses.values():
            total = total + term
        return self.family_output_class(
            loss=total, logits=logits, hidden_states=outputs.hidden_states, lm_loss=loss, **losses, **family_outputs,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )

    def family_losses(self, family_outputs, inputs, targets):
        """{name: loss} of the family's own outputs, added to the LM loss (targets [B, T]: the labels, IGNORE_INDEX
        where ignored; inputs: forward's family inputs); the base family has none."""
        return {}

    def search_decoder(self, use_cache=True):
        """The beam search's decoder (SyntacticGenerationMixin's hook): the key/value-pool decoder, or with
        use_cache=False one that runs every hypothesis's whole prefix again (search_decoders.py)."""
        return TransformerSearchDecoder(self) if use_cache else ReencodingSearchDecoder(self)

    def forward_positions(self, position_ids, structure, past_key_values=None, extra_embeddings=None, output_index=None,
                          inputs_embeds=None):
        """Logits [B, T', V] of given positions (ids [B, T'] and a PositionStructure covering the cache too),
        appending their keys and values to `past_key_values`; with `output_index` = (rows [K], columns [K]),
        only the logits [K, V] of those positions; `inputs_embeds` [B, T', d] replace the token embeddings (Ex:
        the compositions of `)` positions). The beam-search decoder (search_decoders.py) calls it."""
        hidden, _ = self.model.decoder(position_ids, structure, past_key_values, extra_embeddings=extra_embeddings,
                                       inputs_embeds=inputs_embeds)
        if output_index is not None:
            hidden = hidden[output_index]
        return self._logits(hidden)
