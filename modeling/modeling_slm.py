"""Transformer syntactic LMs as transformers models: thin family classes over the shared backbone.

Families: Transformer Grammars (paper 000; `TransformerGrammar*`), the Transformer-XL baselines over the
same actions or over words (`TransformerXL*`), DTG and TXL (trans) (paper 002; `DependencyTransformer*`) and
paper 003's compositional SLMs with its GPT-2 baselines (`CompositionalSLM*`). A family is a config class
(which grammars it takes) and two thin model classes; everything else is shared:

- `SyntacticTransformerModel` (AutoModel) and `SyntacticTransformerForCausalLM` (AutoModelForCausalLM) follow
  the HuggingFace causal-LM contract. `input_ids` [B, T] are the tokenizer's action ids (`<s>` first) with
  its [B, T] padding `attention_mask`; the model asks its grammar to expand them into positions (TG: each
  closing NT becomes a COMPOSE and a STACK copy), runs the backbone over the positions, and returns one
  output per action: `logits[:, t]` is the distribution of action t + 1. So `labels=input_ids` gives
  transformers' usual shifted mean NLL of the actions (labels equal to the pad id, or under a 0 of the
  attention mask, are ignored), and log p(x, y) is the sum of the shifted log-probs, as for GPT-2.
- The data collator's precomputed structure (`expansion_index`, `position_mask`, `position_coordinates`,
  `position_kinds`, `prediction_index`) is the fast training path: the same numbers without computing
  the grammar inside forward; with the sizes it counted on the host (`num_coordinate_values`; an Ex grammar's
  `composition_schedule`), a training step reads nothing back from the device.
- `forward_positions` runs given positions and structure (with a KV cache of the attended positions): the
  beam-search decoder of search_decoders.py uses it.

Hub code: imports only torch, transformers and its sibling files.
"""

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .backbone import PositionStructure, SyntacticTransformerDecoder, init_backbone_weights
from .composer import ExternalComposer
from .configuration_slm import (
    CompositionalSLMConfig, DependencyTransformerGrammarConfig, DependencyTransformerXLConfig, SyntacticTransformerConfig,
    TransformerGrammarConfig, TransformerXLConfig,
)
from .generation_slm import BeamSearchOptions, WordSynchronousBeamSearch, syntactic_generate
from .grammars import ActionLayout, PositionKind, grammar_for_config
from .safe_loading import SafetensorsOnlyLoading
from .segments import causal_segment_window, check_segment_options
from .start_pointer import FinalLayerHeads, StartPointer

IGNORE_INDEX = -100
# What transformers' generate passes to forward and this model does not need: positions come from the
# grammar and the attention mask, and every output is computed.
IGNORED_GENERATION_INPUTS = ("position_ids", "cache_position", "output_attentions", "logits_to_keep")
# transformers 5.24 renamed the key/value cache from `past_key_values` to `cache` (input and output field);
# forward takes either name, and outputs fill the field the installed transformers defines.
CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
STRUCTURE_INPUTS = ("expansion_index", "position_mask", "position_coordinates", "position_kinds", "prediction_index")
# What the collator adds for grammars with explicit relative positions and head tokens (DTG).
DEPENDENCY_STRUCTURE_INPUTS = ("position_relative_positions", "head_token_index")
# What the collator adds for grammars with external composition (paper 003's Ex variants).
COMPOSITION_STRUCTURE_INPUTS = ("composition_children", "composition_level")
# And, optionally, what spares the composer reading its sizes back from the device (composer.composition_schedule).
COMPOSITION_SCHEDULE_INPUTS = ("composition_schedule", "composition_schedule_levels")


@dataclass
class SyntacticModelOutput(BaseModelOutputWithPast):
    """BaseModelOutputWithPast plus, for a model with the start pointer (paper 003's Nb-Up), start_log_probs
    [B, T, T] float32: [b, t, j] = log p(the constituent of a `)` at action t + 1 starts with action j | `)`), -inf
    where action j is not a feasible start (modeling/start_pointer.py)."""

    start_log_probs: torch.FloatTensor | None = None


@dataclass
class SyntacticCausalLMOutput(CausalLMOutputWithPast):
    """CausalLMOutputWithPast plus, for a model with the start pointer (paper 003's Nb-Up): start_log_probs (as in
    SyntacticModelOutput), and with labels lm_loss (the mean NLL of the actions), start_loss (the mean NLL of the
    gold starts of the `)` among their feasible starts); loss is their sum."""

    lm_loss: torch.FloatTensor | None = None
    start_loss: torch.FloatTensor | None = None
    start_log_probs: torch.FloatTensor | None = None


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


def _reject_unknown_inputs(model, unused):
    unknown = sorted(name for name, value in unused.items() if name not in IGNORED_GENERATION_INPUTS and value is not None)
    if unknown:
        raise TypeError(f"{type(model).__name__}.forward() got unexpected inputs {unknown}")


def _slot_positions(kinds):
    """[B, T'] each position's index in its right-padded row, -1 for padding (from the PositionKinds)."""
    index = torch.arange(kinds.shape[1], device=kinds.device).expand(len(kinds), -1)
    return torch.where(kinds != PositionKind.PAD, index, torch.full_like(index, -1))


class SyntacticTransformerPreTrainedModel(SafetensorsOnlyLoading, PreTrainedModel):
    config_class = SyntacticTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["SyntacticTransformerLayer"]
    _supports_sdpa = True

    def _init_weights(self, module):
        init_backbone_weights(module, self.config)
        if isinstance(module, ExternalComposer):
            nn.init.normal_(module.summary, std=self.config.initializer_range)
        if isinstance(module, SyntacticTransformerForCausalLM):
            nn.init.zeros_(module.output_bias)
        if isinstance(module, StartPointer):
            module.reset_parameters()


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
              num_coordinate_values (optional) a Python int, 1 + max - min(0, min) of position_coordinates (an upper
              bound gives the same numbers): the width of the factorized attention's one-hot key block, which the
              collator counts on the host; without it the model reads the count back from the device once per call
              (a sync off the CPU). Used by grammars whose coordinates are tree depths (TG, DTG arc-standard);
            and, for grammars with external composition (paper 003's Ex), composition_children [B, T', T'] and
            composition_level [B, T'] (grammar.batch's fields), and optionally their composition_schedule [S] long
            and composition_schedule_levels (a list of [4] Python ints per tree level; composer.composition_schedule,
            which the collator computes on the host: without them the composer reads its sizes back from the
            device, a sync off the CPU); for Nb-Up, constituent_starts [B, T] (each `)`'s
            start, an action index with `<s>` = 0, -1 elsewhere: the tokenizer's field), or with the precomputed
            structure start_candidates [B, T', T'] (the collator's).)
    Nb-Up grammars: the output is a SyntacticModelOutput whose start_log_probs are the start pointer's
    (modeling/start_pointer.py); `self.start_pointer` holds its Θ (None for the other grammars).
    Ex grammars: before the layers, every `)` position's input embedding becomes the external composer's
    output over its children (modeling/composer.py), all of a batch's compositions bottom-up, one composer
    call per tree level; `self.composer` is that module (None for the other grammars).
    """

    def __init__(self, config):
        super().__init__(config)
        self.layout = ActionLayout.from_config(config)
        self.grammar = grammar_for_config(config)
        self.decoder = SyntacticTransformerDecoder(config, compose_kinds=self.grammar.compose_kinds)
        self.composer = ExternalComposer(config) if self.grammar.external_composition else None
        # Nb-Up (paper 003, section 2.2): Θ of the start pointer, over the final layer's first two heads.
        self.start_pointer = StartPointer(config.head_dim) if self.grammar.takes_start else None
        self.final_heads = FinalLayerHeads(self.decoder) if self.start_pointer is not None else None
        self.post_init()

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

    def positions_of_actions(self, input_ids, attention_mask=None, past_length=0, precomputed=None, starts=None):
        """(position ids [B, T'], PositionStructure, prediction_index [B, T]) for action ids [B, T]; `starts` [B, T]
        are the constituent starts of a Nb-Up grammar's `)` (the tokenizer's constituent_starts; -1 elsewhere).
        For a model with the start pointer the structure also has start_candidates and position_actions."""
        batch, length = input_ids.shape
        self._check_starts(input_ids, starts, precomputed)
        device = input_ids.device
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; expected the [B, T] padding mask a tokenizer "
                "returns (the grammar builds the structural mask itself)"
            )
        if precomputed is not None:
            if past_length:
                raise ValueError("the collator's precomputed structure covers whole sequences; it cannot follow a cache")
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
                                        _slot_positions(kinds), kinds,
                                        precomputed.get("position_relative_positions") if explicit else None,
                                        coordinate_bound=bound)
            structure.head_slots = precomputed.get("head_token_index")
            if self.composer is not None:
                missing = [name for name in COMPOSITION_STRUCTURE_INPUTS if precomputed.get(name) is None]
                if missing:
                    raise ValueError(f"a {self.config.grammar} model needs {missing} with the precomputed structure "
                                     "(SyntacticDataCollator gives them for an Ex grammar)")
                structure.composition_children = precomputed["composition_children"].bool()
                structure.composition_level = precomputed["composition_level"]
                schedule = [precomputed.get(name) for name in COMPOSITION_SCHEDULE_INPUTS]
                if (schedule[0] is None) != (schedule[1] is None):
                    raise ValueError(f"the composition schedule needs both {list(COMPOSITION_SCHEDULE_INPUTS)} "
                                     "(SyntacticDataCollator gives them for an Ex grammar)")
                if schedule[0] is not None:
                    structure.composition_schedule = tuple(schedule)
            if self.start_pointer is not None:
                structure.start_candidates = precomputed["start_candidates"].bool()
                structure.position_actions = precomputed["expansion_index"]
            return input_ids.gather(1, precomputed["expansion_index"]), structure, precomputed["prediction_index"]
        padding = attention_mask.bool() if attention_mask is not None else None
        if self.grammar.causal:
            return self._causal_positions(input_ids, padding, past_length, starts)
        if past_length:
            raise ValueError(
                f"a {self.config.grammar} model's positions depend on the whole tree, so it cannot extend a cache from "
                "action ids; cached decoding goes through model.generate / word_synchronous_beam_search"
            )
        if padding is None:
            padding = input_ids != self.layout.pad_token_id
        ids = input_ids.cpu().numpy()
        real = [np.flatnonzero(row) for row in padding.cpu().numpy()]
        for index, where in enumerate(real):
            if len(where) == 0:
                raise ValueError(f"input_ids row {index} is all padding")
        # A grammar whose relative positions are neither c_i - c_j nor affine in it (DTG-eager, -swift) gives them
        # explicitly.
        explicit = self.grammar.needs_explicit_relative_positions
        grammar_batch = self.grammar.batch([ids[b, where] for b, where in enumerate(real)], require_complete=False,
                                           with_relative_positions=explicit, **self._grammar_starts(starts, real))
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
        if "head_token_index" in grammar_batch:  # DTG: arc positions add their head word's last piece
            structure.head_slots = torch.from_numpy(grammar_batch["head_token_index"]).to(device)
        if "composition_children" in grammar_batch:  # Ex: the `)` positions' children and levels
            structure.composition_children = torch.from_numpy(grammar_batch["composition_children"]).to(device)
            structure.composition_level = torch.from_numpy(grammar_batch["composition_level"]).to(device)
        if self.start_pointer is not None:  # Nb-Up: C_k of every predicting row, and each position's action
            structure.start_candidates = torch.from_numpy(grammar_batch["start_candidates"]).to(device)
            structure.position_actions = torch.from_numpy(grammar_batch["expansion_index"]).to(device)
        return torch.from_numpy(grammar_batch["input_ids"]).to(device), structure, torch.from_numpy(prediction_index).to(device)

    @staticmethod
    def _check_coordinate_count(count):
        """A given num_coordinate_values is a positive Python int (PositionStructure checks, on the CPU, that it
        covers the coordinates: a smaller one would drop one-hot columns silently)."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
            raise ValueError(f"num_coordinate_values is {count!r}; expected a positive Python int (the collator's count, "
                             "kept on the host: a tensor would be read back from the device)")
        return int(count)

    def _check_starts(self, input_ids, starts, precomputed):
        """A model with the start pointer needs each `)`'s start (a ValueError naming what to pass); another model
        takes none."""
        if self.start_pointer is None:
            if starts is not None:
                raise ValueError(f"constituent_starts are for the Nb-Up grammars (paper 003's start pointer); a "
                                 f"{self.config.grammar} model takes none")
            return
        if precomputed is not None:
            if precomputed.get("start_candidates") is None:
                raise ValueError(f"a {self.config.grammar} model needs start_candidates with the precomputed structure "
                                 "(SyntacticDataCollator gives them for a Nb-Up grammar)")
            return
        if starts is None and bool((input_ids == self.layout.close_nt_start).any()):
            raise ValueError(f"a {self.config.grammar} model needs constituent_starts [B, T] with action ids that hold a "
                             "`)`: where each constituent starts (paper 003, section 2.2); the tokenizer returns them "
                             "(model(**tokenizer(trees)))")
        if starts is not None and tuple(starts.shape) != tuple(input_ids.shape):
            raise ValueError(f"constituent_starts has shape {tuple(starts.shape)}; expected that of input_ids "
                             f"{tuple(input_ids.shape)} (one start per action, -1 where there is none)")

    def _grammar_starts(self, starts, real):
        """The `starts=` argument of grammar.batch for the real actions of each row (none without the pointer)."""
        if self.start_pointer is None:
            return {}
        if starts is None:
            return {"starts": None}
        values = starts.cpu().numpy()
        return {"starts": [values[b, where] for b, where in enumerate(real)]}

    def input_additions(self, position_ids, head_ids, extra_embeddings=None):
        """What is added to the positions' token embeddings: `extra_embeddings`, plus, where `head_ids` [B, T']
        names a token (DTG's arcs: the head word's last piece; -1 for none), that token's embedding as
        config.arc_representation says ("w+arc": added; "w": instead of the position's own; "arc": nothing).
        The forward pass and the beam-search decoder both come here. [B, T', d] or None."""
        representation = getattr(self.config, "arc_representation", "w+arc")
        if head_ids is None or representation == "arc":
            return extra_embeddings
        embed = self.decoder.embed_tokens
        has_head = (head_ids >= 0)[..., None]
        added = embed(head_ids.clamp(min=0)) * has_head
        if representation == "w":
            added = added - embed(position_ids) * has_head
        return added if extra_embeddings is None else extra_embeddings + added

    def input_embeddings(self, position_ids, structure):
        """[B, T', d] the positions' input embeddings when they are more than their tokens' (Ex grammars: each
        `)` position's is the composition of its children, from `structure.composition_children` and
        `composition_level`), else None (the decoder embeds the tokens itself)."""
        if self.composer is None:
            return None
        if structure.composition_children is None:
            raise ValueError(f"a {self.config.grammar} model composes every `)` from its children: the structure "
                             "needs composition_children and composition_level (grammar.batch gives them)")
        return self.composer.compose_by_level(self.decoder.embed_tokens(position_ids), structure.composition_children,
                                              structure.composition_level, structure.composition_schedule)

    @staticmethod
    def head_ids(position_ids, structure):
        """[B, T'] the token at each position's head slot (`structure.head_slots`), -1 where it has none."""
        slots = structure.head_slots
        if slots is None:
            return None
        return torch.where(slots >= 0, position_ids.gather(1, slots.clamp(min=0)), torch.full_like(slots, -1))

    def _causal_positions(self, input_ids, padding, past_length, starts=None):
        """Causal grammars have one position per action: the structure follows the batch's own layout (left or
        right padding, a cache), with each slot's index among the real tokens of its row as coordinate."""
        batch, length = input_ids.shape
        total = past_length + length
        if padding is None:
            padding = torch.ones((batch, total), dtype=torch.bool, device=input_ids.device)
            if not past_length:
                padding = input_ids != self.layout.pad_token_id
        if padding.shape[1] != total:
            raise ValueError(f"attention_mask covers {padding.shape[1]} positions; expected {total} (cached + new)")
        if past_length and self.composer is not None:
            raise ValueError(
                f"a {self.config.grammar} model composes each `)` from earlier positions' input embeddings, which a "
                "key/value cache does not keep, so it cannot extend a cache from action ids; cached decoding goes "
                "through model.generate / word_synchronous_beam_search")
        composition = None
        if not past_length:
            ids = input_ids.cpu().numpy()
            keep = padding.cpu().numpy()
            rows = [row[where] for row, where in zip(ids, keep)]
            if any(len(row) == 0 for row in rows):
                raise ValueError("an input_ids row is all padding")
            if self.composer is None:
                self.grammar.validate_batch(rows, require_complete=False)
            else:  # Ex + Nm: causal, and the `)` positions compose (one position per action)
                composition = self._causal_composition(rows, keep, input_ids.device,
                                                       self._grammar_starts(starts, [np.flatnonzero(k) for k in keep]))
        positions = padding.long().cumsum(-1) - 1
        positions = positions.masked_fill(~padding, -1)
        structure = self._structure(None, positions.clamp(min=0), positions, None, coordinate_bound=max(1, total))
        structure.mask = structure.causal_mask(length)
        if getattr(self.config, "segment_length", None):
            # A segment model reads as it was trained, through a memory: for a causal grammar that is a window,
            # the same in one pass, through a cache, and segment by segment (segment_recurrence.py); any length.
            segment_length, memory_length, _ = check_segment_options(
                self.grammar, self.config.segment_length, getattr(self.config, "memory_length", None),
                getattr(self.config, "memory_update", None))
            structure.mask = structure.mask & causal_segment_window(
                positions[:, -length:], positions, segment_length, memory_length)
            structure.segmented = True
        if composition is not None:
            structure.composition_children, structure.composition_level, structure.start_candidates = composition
            if structure.start_candidates is not None:  # one position per action: its index among the real ones
                structure.position_actions = positions.clamp(min=0)
        return input_ids, structure, torch.arange(length, device=input_ids.device).expand(batch, -1)

    def _causal_composition(self, rows, keep, device, grammar_starts):
        """composition_children [B, T, T], composition_level [B, T] and (Nb-Up, else None) start_candidates
        [B, T, T] in the batch's own slots (left or right padding) for a causal grammar with external composition:
        grammar.batch (which validates) numbers each row's positions from 0, and a causal grammar has one position
        per action, in order."""
        grammar_batch = self.grammar.batch(rows, require_complete=False, with_relative_positions=False, **grammar_starts)
        count, width = keep.shape
        children = np.zeros((count, width, width), dtype=bool)
        level = np.full((count, width), -1, dtype=np.int64)
        candidates = np.zeros((count, width, width), dtype=bool) if "start_candidates" in grammar_batch else None
        for b, where in enumerate(keep):
            slots = np.flatnonzero(where)
            children[b][np.ix_(slots, slots)] = grammar_batch["composition_children"][b, : len(slots), : len(slots)]
            level[b, slots] = grammar_batch["composition_level"][b, : len(slots)]
            if candidates is not None:
                candidates[b][np.ix_(slots, slots)] = grammar_batch["start_candidates"][b, : len(slots), : len(slots)]
        return (torch.from_numpy(children).to(device), torch.from_numpy(level).to(device),
                None if candidates is None else torch.from_numpy(candidates).to(device))

    # ---- forward ----------------------------------------------------------------------------------------
    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, use_cache=None, inputs_embeds=None,
                output_hidden_states=None, return_dict=True, extra_embeddings=None, expansion_index=None,
                position_mask=None, position_coordinates=None, position_kinds=None, prediction_index=None, cache=None,
                position_relative_positions=None, head_token_index=None, composition_children=None,
                composition_level=None, constituent_starts=None, start_candidates=None, num_coordinate_values=None,
                composition_schedule=None, composition_schedule_levels=None, **unused):
        _reject_unknown_inputs(self, unused)
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
        if present:  # a dependency grammar's additions (DEPENDENCY_STRUCTURE_INPUTS), an Ex grammar's (COMPOSITION_...)
            given.update(position_relative_positions=position_relative_positions, head_token_index=head_token_index,
                         composition_children=composition_children, composition_level=composition_level,
                         start_candidates=start_candidates, num_coordinate_values=num_coordinate_values,
                         composition_schedule=composition_schedule,
                         composition_schedule_levels=composition_schedule_levels)
        position_ids, structure, prediction_index = self.positions_of_actions(
            input_ids, attention_mask, past_length, given if present else None,
            starts=None if present else constituent_starts)
        extra_embeddings = self.input_additions(position_ids, self.head_ids(position_ids, structure), extra_embeddings)
        hidden, all_hidden = self.decoder(position_ids, structure, past_key_values if use_cache or past_length else None,
                                          extra_embeddings=extra_embeddings,
                                          inputs_embeds=self.input_embeddings(position_ids, structure),
                                          output_hidden_states=bool(output_hidden_states))
        per_action = hidden.gather(1, prediction_index[:, :, None].expand(-1, -1, hidden.shape[-1]))
        cache_output = {CACHE_FIELD: past_key_values if use_cache else None}
        if self.start_pointer is None:
            return BaseModelOutputWithPast(last_hidden_state=per_action, hidden_states=all_hidden, **cache_output)
        return SyntacticModelOutput(last_hidden_state=per_action, hidden_states=all_hidden, **cache_output,
                                    start_log_probs=self.start_log_probs(structure, prediction_index, input_ids.shape[1]))

    def start_log_probs(self, structure, prediction_index, num_actions):
        """[B, T, A] float32 (A = num_actions): [b, t, j] = log p(start = action j of its sequence (`<s>` = 0) | the
        action after column t is a `)`), from the final layer's heads of the last forward call (start_pointer.py);
        -inf where action j is no feasible start."""
        heads = self.final_heads.take(structure.kinds)  # [B, T', D]
        rows = prediction_index[:, :, None].expand(-1, -1, heads.shape[-1])
        query = heads.gather(1, rows)  # [B, T, D] h_{k-1}: the output that predicts the `)`
        candidates = structure.start_candidates.gather(
            1, prediction_index[:, :, None].expand(-1, -1, structure.start_candidates.shape[-1]))
        by_position = self.start_pointer.log_probs(query, heads, candidates)  # [B, T, T']
        # Each item is one position (a token; a `)`'s COMPOSE copy under In): move it to its action's column.
        columns = structure.position_actions[:, None, :].expand_as(by_position)
        by_action = by_position.new_full(by_position.shape[:2] + (num_actions,), float("-inf"))
        return by_action.scatter_reduce(2, columns.clamp(max=num_actions - 1), by_position, "amax")


class SyntacticTransformerForCausalLM(SyntacticTransformerPreTrainedModel, GenerationMixin):
    """The backbone with the tied output layer (embedding transpose + bias); HF causal-LM contract.

    forward(...) takes the inputs of SyntacticTransformerModel and `labels` [B, T]: action ids, shifted inside
    (labels=input_ids is the usual choice); the loss is the mean NLL of the predicted actions. Labels equal to
    the pad id or under a 0 of the attention mask are ignored, as are -100s.
    A model with the start pointer (paper 003's Nb-Up) also takes `constituent_starts` [B, T] (each `)`'s start,
    the tokenizer's field) and returns a SyntacticCausalLMOutput: with labels, loss = lm_loss + start_loss.
    """

    base_model_class = SyntacticTransformerModel
    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.model = self.base_model_class(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    @property
    def grammar(self):
        return self.model.grammar

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
                output_hidden_states=None, return_dict=True, cache=None, constituent_starts=None, **inputs):
        # constituent_starts is named here so that Trainer keeps a dataset's column of them (Nb-Up).
        if constituent_starts is not None:
            inputs["constituent_starts"] = constituent_starts
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             past_key_values=_one_cache(cache, past_key_values), use_cache=use_cache,
                             output_hidden_states=output_hidden_states, **inputs)
        logits = self._logits(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            targets = labels.masked_fill(labels == self.config.pad_token_id, IGNORE_INDEX)
            if attention_mask is not None and attention_mask.shape == labels.shape:
                targets = targets.masked_fill(attention_mask == 0, IGNORE_INDEX)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets[:, 1:].flatten(), ignore_index=IGNORE_INDEX)
        start_log_probs = getattr(outputs, "start_log_probs", None)
        if start_log_probs is None:
            return CausalLMOutputWithPast(
                loss=loss, logits=logits, hidden_states=outputs.hidden_states, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}
            )
        start_loss = None
        if labels is not None:
            start_loss = self._start_loss(start_log_probs, inputs.get("constituent_starts"), targets)
        return SyntacticCausalLMOutput(
            loss=None if loss is None else loss + start_loss, logits=logits, hidden_states=outputs.hidden_states,
            lm_loss=loss, start_loss=start_loss, start_log_probs=start_log_probs,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )

    @staticmethod
    def _start_loss(start_log_probs, starts, targets):
        """Paper 003, section 2.2: the mean NLL of the gold start of every `)` that is trained (its label not
        ignored) among its feasible starts; 0 when there is none. starts [B, T] (constituent_starts, -1 where an
        action has none), targets [B, T] the labels, IGNORE_INDEX where ignored."""
        if starts is None:
            raise ValueError("the start pointer's loss needs constituent_starts [B, T] with labels (the tokenizer "
                             "and SyntacticDataCollator give them for a Nb-Up grammar)")
        gold = starts[:, 1:].to(start_log_probs.device)
        trained = (gold >= 0) & (targets[:, 1:] != IGNORE_INDEX)
        picked = start_log_probs[:, :-1].gather(2, gold.clamp(min=0)[:, :, None])[:, :, 0]
        # sum / count rather than picked[trained].mean(): nothing read back from the device (no sync); where
        # rather than a product, since an untrained row may pick -inf
        total = torch.where(trained, picked, torch.zeros_like(picked)).sum()
        return -total / trained.sum().clamp(min=1)

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

    # ---- decoding -------------------------------------------------------------------------------
    def generate(self, inputs=None, generation_config=None, tokenizer=None, word_start_mask=None, beam_options=None,
                 **kwargs):
        """HF-style generation. Words-only models (TXL (terminals)) use transformers' own generate. Tree models complete each
        prompt (`<s>` + word pieces, as tokenizer(words, is_split_into_words=True) gives; None for no prompt)
        into a tree with word-synchronous beam search, or with top-k sampling (`do_sample=True`), and return
        action ids that `tokenizer.decode` turns into bracketed trees.

        Read from kwargs or `generation_config`: num_beams, do_sample, top_k, num_return_sequences and
        max_new_tokens (counted in words here). Pass `tokenizer=` (or `word_start_mask=`) so that words made
        of several pieces are told apart; `beam_options` (a dict) sets any BeamSearchOptions field.
        """
        if self.grammar.words_only:  # TXL (terminals): transformers' own generate
            return super().generate(inputs, generation_config=generation_config, **kwargs)
        input_ids = kwargs.pop("input_ids", inputs)
        settings = {}
        if generation_config is not None:
            for name in ("num_beams", "do_sample", "top_k", "num_return_sequences", "max_new_tokens"):
                value = getattr(generation_config, name, None)
                # transformers' default top_k (50) in a generation config is no choice; an explicit top_k is
                if value is not None and not (name == "top_k" and value == GenerationConfig().top_k):
                    settings[name] = value
        for name in ("num_beams", "do_sample", "top_k", "num_return_sequences", "max_new_tokens", "seed"):
            if name in kwargs:
                settings[name] = kwargs.pop(name)
        kwargs.pop("attention_mask", None)  # the grammar derives structure; a padding mask adds nothing
        if kwargs:
            raise ValueError(f"generate() of a {self.config.grammar} model does not take {sorted(kwargs)}")
        incomplete = ()
        if tokenizer is not None:
            word_start_mask = tokenizer.word_start_mask
            incomplete = getattr(tokenizer, "incomplete_word_ids", ())
        top_k = settings.get("top_k")
        return syntactic_generate(
            self, input_ids, num_beams=settings.get("num_beams", 1), do_sample=settings.get("do_sample", False),
            top_k=top_k,
            max_new_words=settings.get("max_new_tokens") or 20,
            num_return_sequences=settings.get("num_return_sequences", 1), word_start_mask=word_start_mask,
            incomplete_word_ids=incomplete, seed=settings.get("seed"), **(beam_options or {}),
        )

    def word_synchronous_beam_search(self, words, options=None, word_start_mask=None, **option_fields):
        """Forced-word beam search: `words[s]` = sentence s as words of piece ids. Returns SentenceResults
        (surprisals in nats, log p(x) lower bound, best trees). See generation_slm.BeamSearchOptions."""
        options = options or BeamSearchOptions(**option_fields)
        return WordSynchronousBeamSearch(self, options, word_start_mask=word_start_mask).search(words)




class TransformerGrammarModel(SyntacticTransformerModel):
    """Transformer Grammar (paper 000) backbone: see SyntacticTransformerModel."""

    config_class = TransformerGrammarConfig


class TransformerGrammarForCausalLM(SyntacticTransformerForCausalLM):
    """Transformer Grammar (paper 000) language model: see SyntacticTransformerForCausalLM."""

    config_class = TransformerGrammarConfig
    base_model_class = TransformerGrammarModel


class DependencyTransformerGrammarModel(SyntacticTransformerModel):
    """Dependency Transformer Grammar (paper 002) backbone: see SyntacticTransformerModel. Its grammar gives
    COMPOSE rows explicit relative positions and each arc position its head word's last piece."""

    config_class = DependencyTransformerGrammarConfig


class DependencyTransformerGrammarForCausalLM(SyntacticTransformerForCausalLM):
    """Dependency Transformer Grammar (paper 002) language model: see SyntacticTransformerForCausalLM."""

    config_class = DependencyTransformerGrammarConfig
    base_model_class = DependencyTransformerGrammarModel


class DependencyTransformerXLModel(SyntacticTransformerModel):
    """TXL (trans), paper 002's baseline (grammar "txl_trans"): causal attention over DTG's transitions."""

    config_class = DependencyTransformerXLConfig


class DependencyTransformerXLForCausalLM(SyntacticTransformerForCausalLM):
    """TXL (trans) language model: see SyntacticTransformerForCausalLM."""

    config_class = DependencyTransformerXLConfig
    base_model_class = DependencyTransformerXLModel


class TransformerXLModel(SyntacticTransformerModel):
    """Transformer-XL baseline backbone (TXL (CC) / TXL (terminals)): see SyntacticTransformerModel."""

    config_class = TransformerXLConfig


class TransformerXLForCausalLM(SyntacticTransformerForCausalLM):
    """Transformer-XL baseline language model (TXL (CC) / TXL (terminals)): see SyntacticTransformerForCausalLM."""

    config_class = TransformerXLConfig
    base_model_class = TransformerXLModel


class CompositionalSLMModel(SyntacticTransformerModel):
    """Paper 003's compositional SLMs (In variants: COMPOSE and STACK copies of every `)`; Ex variants: one `)`
    position whose input is the external composer's output over its children; M or Nm masking, Ex + Nm plain
    causal) and its GPT2-token / GPT2-tree baselines (plain causal), with absolute positions: see
    SyntacticTransformerModel."""

    config_class = CompositionalSLMConfig


class CompositionalSLMForCausalLM(SyntacticTransformerForCausalLM):
    """Paper 003's compositional SLM language model: see SyntacticTransformerForCausalLM. Bottom-up variants end
    each tree with `</s>`, which the last `)` predicts."""

    config_class = CompositionalSLMConfig
    base_model_class = CompositionalSLMModel


# save_pretrained copies this file, its sibling imports and the configuration into every checkpoint, and
# config.auto_map names all the Auto classes (see SyntacticTransformerConfig), so that
# AutoModel / AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True) work without hf_slm.
for _model, _causal_lm in ((TransformerGrammarModel, TransformerGrammarForCausalLM), (TransformerXLModel, TransformerXLForCausalLM),
                          (DependencyTransformerGrammarModel, DependencyTransformerGrammarForCausalLM),
                          (DependencyTransformerXLModel, DependencyTransformerXLForCausalLM),
                          (CompositionalSLMModel, CompositionalSLMForCausalLM)):
    _model._auto_class = "AutoModel"
    _causal_lm._auto_class = "AutoModelForCausalLM"
