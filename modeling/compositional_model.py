"""Paper 003's model hooks: the external composer (Ex variants) and the start pointer (Nb-Up variants).

The compositional family's grammars (compositional_grammars.py) give, besides the generic structure:
- Ex: `composition_children` [B, T', T'] and `composition_level` [B, T'] (family inputs of `batch`), and on the
  host the composer's schedule (`composition_schedule`, `composition_schedule_levels`: `grammar.host_inputs`);
  before the layers, every `)` position's input embedding becomes the composer's output over its children
  (composer.py), all of a batch's compositions bottom-up, one composer call per tree level;
- Nb-Up: each `)` comes with its start (the action input `constituent_starts` [B, T]), and `start_candidates`
  [B, T', T'] (per predicting position, the positions of the feasible starts C_k); the start pointer
  (start_pointer.py) scores them from the final layer's first two heads, and its loss joins the LM loss.

`CompositionalInputs` is mixed into the family's model class and `StartPointerLoss` into its causal LM class
(`CompositionalSLMModel`, `CompositionalSLMForCausalLM`, below); the generic model (modeling_slm.py) calls these
hooks and knows neither.

Hub code: imports only numpy, torch, transformers and its sibling files.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .composer import ExternalComposer
from .compositional_config import CompositionalSLMConfig
from .modeling_slm import SyntacticTransformerForCausalLM, SyntacticTransformerModel
from .start_pointer import FinalLayerHeads, StartPointer

IGNORE_INDEX = -100


@dataclass
class StartPointerOutput(BaseModelOutputWithPast):
    """BaseModelOutputWithPast plus, for a model with the start pointer (paper 003's Nb-Up), start_log_probs
    [B, T, T] float32: [b, t, j] = log p(the constituent of a `)` at action t + 1 starts with action j | `)`), -inf
    where action j is not a feasible start (start_pointer.py)."""

    start_log_probs: torch.FloatTensor | None = None


@dataclass
class StartPointerCausalLMOutput(CausalLMOutputWithPast):
    """CausalLMOutputWithPast plus, for a model with the start pointer (paper 003's Nb-Up): start_log_probs (as in
    StartPointerOutput), and with labels lm_loss (the mean NLL of the actions), start_loss (the mean NLL of the gold
    starts of the `)` among their feasible starts); loss is their sum."""

    lm_loss: torch.FloatTensor | None = None
    start_loss: torch.FloatTensor | None = None
    start_log_probs: torch.FloatTensor | None = None


class CompositionalInputs:
    """The family hooks of the compositional model class (see SyntacticTransformerModel for their contract).
    `self.composer` is the Ex variants' composer and `self.start_pointer` the Nb-Up variants' Θ; None for the
    others (a composer set to None composes nothing: each `)` inputs its token)."""

    family_output_class = StartPointerOutput

    def build_family_modules(self, config):
        self.composer = ExternalComposer(config) if self.grammar.external_composition else None
        # Nb-Up (paper 003, section 2.2): Θ of the start pointer, over the final layer's first two heads.
        self.start_pointer = StartPointer(config.head_dim) if self.grammar.takes_start else None
        self.final_heads = FinalLayerHeads(self.decoder) if self.start_pointer is not None else None

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, ExternalComposer):
            nn.init.normal_(module.summary, std=self.config.initializer_range)
        if isinstance(module, StartPointer):
            module.reset_parameters()

    def check_family_inputs(self, input_ids, family_inputs, precomputed):
        """A Nb-Up `)` cannot be expanded without its start: without the collator's structure, action ids that hold
        a `)` need constituent_starts (a ValueError naming what to pass)."""
        if self.start_pointer is None or precomputed is not None or family_inputs.get("constituent_starts") is not None:
            return
        if bool((input_ids == self.grammar.layout.close_nt_start).any()):
            raise ValueError(f"a {self.config.grammar} model needs constituent_starts [B, T] with action ids that hold a "
                             "`)`: where each constituent starts (paper 003, section 2.2); the tokenizer returns them "
                             "(model(**tokenizer(trees)))")

    def family_embeddings(self, expanded):
        """Ex: every `)` position's input embedding is the composer's output over its children."""
        if self.composer is None:
            return None, None
        inputs = expanded.family_inputs
        if inputs.get("composition_children") is None:
            raise ValueError(f"a {self.config.grammar} model composes every `)` from its children: it needs "
                             "composition_children and composition_level (grammar.batch gives them)")
        schedule = None
        if inputs.get("composition_schedule") is not None:
            schedule = (inputs["composition_schedule"], inputs["composition_schedule_levels"])
        tokens = self.decoder.embed_tokens(expanded.position_ids)
        return None, self.composer.compose_by_level(tokens, inputs["composition_children"].bool(),
                                                    inputs["composition_level"], schedule)

    def family_outputs(self, expanded):
        """Nb-Up: start_log_probs, from the final layer's heads of this forward call."""
        if self.start_pointer is None:
            return {}
        return {"start_log_probs": self.start_log_probs(expanded)}

    def start_log_probs(self, expanded):
        """[B, T, A] float32 (A: the actions): [b, t, j] = log p(start = action j of its sequence (`<s>` = 0) | the
        action after column t is a `)`), from the final layer's heads of the last forward call (start_pointer.py);
        -inf where action j is no feasible start."""
        structure, prediction_index = expanded.structure, expanded.prediction_index
        num_actions = prediction_index.shape[1]
        heads = self.final_heads.take(structure.kinds)  # [B, T', D]
        rows = prediction_index[:, :, None].expand(-1, -1, heads.shape[-1])
        query = heads.gather(1, rows)  # [B, T, D] h_{k-1}: the output that predicts the `)`
        candidates = expanded.family_inputs["start_candidates"].bool()
        candidates = candidates.gather(1, prediction_index[:, :, None].expand(-1, -1, candidates.shape[-1]))
        by_position = self.start_pointer.log_probs(query, heads, candidates)  # [B, T, T']
        # Each item is one position (a token; a `)`'s COMPOSE copy under In): move it to its action's column.
        columns = expanded.position_actions[:, None, :].expand_as(by_position)
        by_action = by_position.new_full(by_position.shape[:2] + (num_actions,), float("-inf"))
        return by_action.scatter_reduce(2, columns.clamp(max=num_actions - 1), by_position, "amax")

    # ---- the beam-search decoder (search_decoders.TransformerSearchDecoder) ----
    def search_embeddings(self, pool, input_ids, new_slots, references, order):
        """Ex: the input embeddings [N, 1, d] of the decoder's new positions, kept in the cache's pool (a later `)`
        composes from them): their tokens' embeddings, and at each position that composes (`references` [N, C], its
        children's slots, -1 after) the composer's output over its children's. One composer call per `order` (a
        position's index among its hypothesis's new positions): a round makes one; a prefix of many positions
        composes its `)` in order, each after the children it reads."""
        if self.composer is None:
            return None, None
        device = input_ids.device
        to_device = lambda array: torch.from_numpy(array).to(device)  # noqa: E731
        # Each round's children as packed rows (compose_packed's), counted on the host and sent to the device before
        # the first kernel: the host waits for nothing until the decoder's transfer back.
        rounds = []
        if references is not None:
            composing = np.flatnonzero((references >= 0).any(1))
            for index in np.unique(order[composing]):
                which = composing[order[composing] == index]
                children = references[which]
                constituent, rank = np.nonzero(children >= 0)  # row by row, as compose's nonzero
                rounds.append((to_device(new_slots[which]), to_device(children[constituent, rank]),
                               to_device(constituent), to_device(rank), len(which), int(rank.max()) + 1))
        new = to_device(new_slots)
        pool.write_values("inputs", new, self.decoder.embed_tokens(input_ids[:, 0]))
        for slots, child_slots, constituent, rank, count, widest in rounds:
            composed = self.composer.compose_packed(pool.read_values("inputs", child_slots), constituent, rank, count,
                                                    widest=widest)
            pool.write_values("inputs", slots, composed)
        return None, pool.read_values("inputs", new)[:, None]

    def after_search_forward(self, pool, structure, new_slots):
        """Nb-Up: keep every new position's h, which later `)` read (as candidates or queries)."""
        if self.start_pointer is None:
            return
        new = torch.from_numpy(new_slots).to(structure.kinds.device)  # before the kernels (a copy waits for them)
        heads = self.final_heads.take(structure.kinds)[:, 0]
        pool.write_values("pointer_states", new, heads)

    def search_pointer_log_probs(self, pool, query_slots, candidate_slots, candidates):
        """[H, C] log p(s = i) (start_pointer.py) of the candidates at `candidate_slots` [H, C] (where `candidates`
        [H, C] bool), the query being the position at `query_slots` [H] (the one that predicts the `)`)."""
        if self.start_pointer is None:
            return super().search_pointer_log_probs(pool, query_slots, candidate_slots, candidates)
        device = self.start_pointer.theta.device
        # every input before the first kernel (a copy from the host waits for the work queued before it)
        query_slots, candidate_slots, candidates = (torch.from_numpy(array).to(device) for array in
                                                    (query_slots, candidate_slots, candidates))
        query = pool.read_values("pointer_states", query_slots)[:, None]  # [H, 1, D]
        keys = pool.read_values("pointer_states", candidate_slots)  # [H, C, D]
        return self.start_pointer.log_probs(query, keys, candidates[:, None])[:, 0]


class StartPointerLoss:
    """The family hooks of the compositional causal LM class: a Nb-Up model's start loss joins the LM loss, and its
    forward names the action input constituent_starts."""

    family_output_class = StartPointerCausalLMOutput

    def forward(self, input_ids=None, attention_mask=None, labels=None, past_key_values=None, use_cache=None,
                output_hidden_states=None, return_dict=True, cache=None, constituent_starts=None, **inputs):
        # constituent_starts (Nb-Up's action input) is named here so that transformers.Trainer keeps a dataset's
        # column of them.
        if constituent_starts is not None:
            inputs["constituent_starts"] = constituent_starts
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                               past_key_values=past_key_values, use_cache=use_cache,
                               output_hidden_states=output_hidden_states, return_dict=return_dict, cache=cache, **inputs)

    def family_losses(self, family_outputs, inputs, targets):
        """{"start_loss": ...}: paper 003, section 2.2, the mean NLL of the gold start of every `)` that is trained
        (its label not ignored) among its feasible starts; 0 when there is none. constituent_starts [B, T] (-1 where
        an action has none), targets [B, T] the labels, IGNORE_INDEX where ignored."""
        start_log_probs, starts = family_outputs["start_log_probs"], inputs.get("constituent_starts")
        if starts is None:
            raise ValueError("the start pointer's loss needs constituent_starts [B, T] with labels (the tokenizer "
                             "and SyntacticDataCollator give them for a Nb-Up grammar)")
        gold = starts[:, 1:].to(start_log_probs.device)
        trained = (gold >= 0) & (targets[:, 1:] != IGNORE_INDEX)
        picked = start_log_probs[:, :-1].gather(2, gold.clamp(min=0)[:, :, None])[:, :, 0]
        # sum / count rather than picked[trained].mean(): nothing read back from the device (no sync); where
        # rather than a product, since an untrained row may pick -inf
        total = torch.where(trained, picked, torch.zeros_like(picked)).sum()
        return {"start_loss": -total / trained.sum().clamp(min=1)}


class CompositionalSLMModel(CompositionalInputs, SyntacticTransformerModel):
    """Paper 003's compositional SLMs (In variants: COMPOSE and STACK copies of every `)`; Ex variants: one `)`
    position whose input is the external composer's output over its children; M or Nm masking, Ex + Nm plain
    causal) and its GPT2-token / GPT2-tree baselines (plain causal), with absolute positions: see
    SyntacticTransformerModel. Its family hooks (CompositionalInputs) run the Ex composer (`self.composer`) and
    the Nb-Up start pointer (`self.start_pointer`)."""

    config_class = CompositionalSLMConfig


class CompositionalSLMForCausalLM(StartPointerLoss, SyntacticTransformerForCausalLM):
    """Paper 003's compositional SLM language model: see SyntacticTransformerForCausalLM. Bottom-up variants end
    each tree with `</s>`, which the last `)` predicts. A Nb-Up model also takes `constituent_starts` [B, T] (each
    `)`'s start, the tokenizer's field) and returns a StartPointerCausalLMOutput: with labels, loss = lm_loss +
    start_loss."""

    config_class = CompositionalSLMConfig
    base_model_class = CompositionalSLMModel


# save_pretrained copies this file, its sibling imports and its config's file into every checkpoint (hub_code.py),
# and config.auto_map names all the Auto classes (configuration_slm.family_auto_classes), so that
# AutoModel / AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True) work without hf_slm.
CompositionalSLMModel._auto_class = "AutoModel"
CompositionalSLMForCausalLM._auto_class = "AutoModelForCausalLM"
