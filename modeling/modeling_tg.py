"""Transformer Grammars (paper 000) and their TXL (CC) / TXL (terminals) baselines as transformers models.

One backbone serves the three: a Transformer-XL-style decoder with relative attention

    s_ij = (q_i + u) . k_j + (q_i + v) . W_R r(R_ij)

(u, v, W_R per layer, r fixed sinusoids, R clipped to the configured range). The grammar decides the mask
and R: TG uses STACK/COMPOSE masks and R_ij = depth(i) - depth(j); TXL (CC) and TXL (terminals) use a
causal mask and R_ij = i - j. In both cases R_ij = c_i - c_j for a per-position coordinate c (the depth,
or the position), which is what makes the fast path possible:

    (q_i + v) . W_R r(clip(c_i - c_j)) = sum_d  B_i[clip(c_i - d)] * [c_j == d]

where B_i[R] = (q_i + v) . W_R r(R) is a small [T, 64] table per head. So the relative term is the dot
product of an extra query block (B_i gathered at c_i - d, one column per coordinate value d) with an extra
key block (the one-hot of c_j), and attention stays one scaled_dot_product_attention call with a boolean
mask: no [B, H, T, T] float bias is materialized or back-propagated. When coordinates span too many values
(long causal sequences) the gathered bias is cheaper and is used instead. `relative_attention="reference"`
computes everything explicitly (einsum, gather, masked softmax) for tests.

Hub code: imports only torch, transformers and its sibling files.
"""

import math
import os
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_tg import TransformerGrammarConfig
from .generation_tg import BeamSearchOptions, WordSynchronousBeamSearch, syntactic_generate
from .grammars import ActionKind, ActionLayout, PositionKind, grammar_for_config

IGNORE_INDEX = -100
# Above this many distinct coordinate values, the gathered bias is cheaper than the one-hot key block.
MAX_FACTORIZED_COORDINATES = 128


def sinusoid_table(min_position, max_position, dim):
    """r(R) for R in [min_position, max_position]: [sin(R w), cos(R w)], w_k = 10000^(-2k/dim). [K, dim]"""
    positions = torch.arange(min_position, max_position + 1, dtype=torch.float32)
    inverse_frequency = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = positions[:, None] * inverse_frequency[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class RelativeAttention(nn.Module):
    """Multi-head attention with Transformer-XL relative positions over arbitrary masks.

    Shapes: hidden [B, T, d]; mask [B, h, T, S] bool (h = 1 or the heads of this module);
    coordinates_q [B, T] and coordinates_k [B, S] (R_ij = c_i - c_j), or relative_positions [B, T, S].
    Returns the per-head outputs [B, T, h, d_head] (the output projection is applied by the layer, so
    that restricted and unrestricted heads share it as in the reference).
    """

    def __init__(self, config, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = config.head_dim
        inner = num_heads * self.head_dim
        self.q_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.r_proj = nn.Linear(config.hidden_size, inner, bias=False)  # W_R
        self.u = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.v = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.dropout = config.core_dropout if config.attention_dropout is None else config.attention_dropout

    def project(self, hidden):
        """Keys and values of `hidden`: two [B, h, S, d_head] tensors (what a KV cache stores)."""
        batch, length, _ = hidden.shape
        k = self.k_proj(hidden).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        return k, v

    def forward(self, hidden, keys, values, mask, encodings, min_position, coordinates_q=None,
                coordinates_k=None, relative_positions=None, implementation="auto"):
        batch, length, _ = hidden.shape
        q = self.q_proj(hidden).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # [B,h,T,dh]
        encodings = F.dropout(encodings, self.dropout, self.training)
        r = self.r_proj(encodings).view(-1, self.num_heads, self.head_dim)  # [K, h, dh]
        # B_i[R] = (q_i + v) . W_R r(R), for every representable R: [B, h, T, K]
        table = torch.einsum("bhtd,khd->bhtk", q + self.v[None, :, None], r)
        num_positions = r.shape[0]
        if relative_positions is None:
            relative_positions = coordinates_q[:, :, None] - coordinates_k[:, None, :]
        index = (relative_positions.clamp(min_position, min_position + num_positions - 1) - min_position).long()
        if implementation == "reference":
            return self._reference(q, keys, values, table, index, mask)
        content_q = q + self.u[None, :, None]
        dropout = self.dropout if self.training else 0.0
        scale = self.head_dim ** -0.5
        # Few queries (incremental decoding): the [B, h, T, S] bias is small, and cheaper than padding every
        # cached value to the extended width.
        few_queries = length <= 4 and keys.shape[2] > length
        if coordinates_k is not None and coordinates_k.numel() and not few_queries:
            num_values = int(coordinates_k.max()) + 1
            if coordinates_k.min() >= 0 and num_values <= MAX_FACTORIZED_COORDINATES:
                # Extra query block: B_i at clip(c_i - d) for every coordinate value d; extra key block:
                # one-hot(c_j). Their product is exactly the gathered relative term.
                values_range = torch.arange(num_values, device=hidden.device)
                rel = coordinates_q[:, :, None] - values_range[None, None, :]
                rel_index = (rel.clamp(min_position, min_position + num_positions - 1) - min_position).long()
                extra_q = torch.gather(table, 3, rel_index[:, None].expand(-1, self.num_heads, -1, -1))
                extra_k = F.one_hot(coordinates_k.long(), num_values).to(q.dtype)
                extra_k = extra_k[:, None].expand(-1, self.num_heads, -1, -1)
                # Values padded to the query/key width keep SDPA on its fused kernel (it needs equal widths);
                # the padding columns come out zero and are sliced off.
                out = F.scaled_dot_product_attention(
                    torch.cat([content_q, extra_q], dim=-1), torch.cat([keys, extra_k], dim=-1),
                    F.pad(values, (0, num_values)), attn_mask=mask, dropout_p=dropout, scale=scale,
                )
                return out[..., : self.head_dim].transpose(1, 2)
        # Gathered bias: [B, h, T, S] float, added inside SDPA.
        bias = torch.gather(table, 3, index[:, None].expand(-1, self.num_heads, -1, -1)) * scale
        bias = bias.masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(content_q, keys, values, attn_mask=bias, dropout_p=dropout, scale=scale)
        return out.transpose(1, 2)

    def _reference(self, q, keys, values, table, index, mask):
        """The textbook computation, for tests: scores, masked softmax, dropout, weighted values."""
        content = torch.einsum("bhtd,bhsd->bhts", q + self.u[None, :, None], keys)
        position = torch.gather(table, 3, index[:, None].expand(-1, self.num_heads, -1, -1))
        scores = (content + position) * self.head_dim ** -0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return torch.einsum("bhts,bhsd->bhtd", weights, values).transpose(1, 2)


class TransformerGrammarLayer(nn.Module):
    """Attention (restricted and, optionally, unrestricted heads) then a GELU feed-forward block."""

    def __init__(self, config, unrestricted_layer):
        super().__init__()
        heads = config.num_attention_heads
        self.num_unrestricted = heads if unrestricted_layer else config.num_unrestricted_heads
        self.num_restricted = heads - self.num_unrestricted
        num_attentions = 2 if config.distinct_compose_attention and self.num_restricted else 1
        # attentions[0] serves STACK positions (and everything in a non-TG model); attentions[1] COMPOSE.
        self.attentions = nn.ModuleList(
            [RelativeAttention(config, self.num_restricted) for _ in range(num_attentions)] if self.num_restricted else []
        )
        self.unrestricted_attention = RelativeAttention(config, self.num_unrestricted) if self.num_unrestricted else None
        self.o_projs = nn.ModuleList([nn.Linear(config.hidden_size, config.hidden_size) for _ in range(num_attentions)])
        self.ffn_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.ln_attention = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ln_ffn = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.pre_layer_norm = config.pre_layer_norm
        self.dropout = config.core_dropout

    def attention_modules(self):
        """(module, cache slot) of every attention that keeps keys/values."""
        modules = list(self.attentions)
        if self.unrestricted_attention is not None:
            modules.append(self.unrestricted_attention)
        return modules

    def forward(self, hidden, structure, encodings, cache_kv):
        x = self.ln_attention(hidden) if self.pre_layer_norm else hidden
        outputs = []
        for slot, attention in enumerate(self.attentions):
            keys, values = cache_kv(slot, attention, x)
            heads = attention(
                x, keys, values, structure.restricted_mask, encodings["restricted"], structure.min_position,
                coordinates_q=structure.coordinates_q, coordinates_k=structure.coordinates_k,
                relative_positions=structure.relative_positions, implementation=structure.implementation,
            )
            outputs.append(heads)
        unrestricted = None
        if self.unrestricted_attention is not None:
            keys, values = cache_kv(len(self.attentions), self.unrestricted_attention, x)
            unrestricted = self.unrestricted_attention(
                x, keys, values, structure.causal_mask, encodings["unrestricted"], 0,
                coordinates_q=structure.positions_q, coordinates_k=structure.positions_k,
                implementation=structure.implementation,
            )
        batch, length, _ = x.shape
        projected = []
        for index, o_proj in enumerate(self.o_projs):
            parts = ([outputs[index]] if outputs else []) + ([unrestricted] if unrestricted is not None else [])
            projected.append(o_proj(torch.cat(parts, dim=2).reshape(batch, length, -1)))
        attended = projected[0]
        if len(projected) == 2:  # distinct STACK / COMPOSE parameters: COMPOSE rows take the second
            attended = torch.where(structure.is_compose[:, :, None], projected[1], projected[0])
        attended = F.dropout(attended, self.dropout, self.training)
        if self.pre_layer_norm:
            hidden = hidden + attended
            inner = F.dropout(F.gelu(self.ffn_in(self.ln_ffn(hidden))), self.dropout, self.training)
            return hidden + F.dropout(self.ffn_out(inner), self.dropout, self.training)
        hidden = self.ln_attention(hidden + attended)
        inner = F.dropout(F.gelu(self.ffn_in(hidden)), self.dropout, self.training)
        return self.ln_ffn(hidden + F.dropout(self.ffn_out(inner), self.dropout, self.training))


class _Structure:
    """Masks and relative coordinates of one forward call (shared by all layers)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class PickleWeightsRefusedError(ValueError, OSError):
    """A checkpoint offers no safetensors weights and `allow_pickle=True` was not passed to from_pretrained.

    Both a ValueError (bad input) and an OSError (what from_pretrained raises for unusable checkpoints)."""


# Weight files that are Python pickles; a checkpoint folder holding only these is refused by default.
PICKLE_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


def pickle_refusal_message(checkpoint):
    """Why a checkpoint without safetensors weights is refused, and what to do about it."""
    found = ""
    if checkpoint is not None and os.path.isdir(checkpoint):
        pickles = sorted(name for name in os.listdir(checkpoint) if name.endswith(PICKLE_WEIGHT_SUFFIXES))
        found = f"; it holds pickle files: {', '.join(pickles)}" if pickles else ""
    return (
        f"{checkpoint}: no safetensors weights (model.safetensors or model.safetensors.index.json){found}. "
        "Pickle weights (pytorch_model.bin) are not loaded by default, because unpickling a file can run any code "
        "it carries. If you trust this checkpoint, pass allow_pickle=True to from_pretrained (AutoModel... "
        "classes pass it through), then save_pretrained it to a new folder, which writes safetensors."
    )


class TransformerGrammarPreTrainedModel(PreTrainedModel):
    config_class = TransformerGrammarConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["TransformerGrammarLayer"]
    _supports_sdpa = True

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, allow_pickle=False, **kwargs):
        """PreTrainedModel.from_pretrained, reading safetensors weights only unless `allow_pickle=True`.

        allow_pickle: also accept pickle weights (pytorch_model.bin) when a checkpoint has no safetensors, as
            transformers does by default. Off by default: unpickling can run code, and these checkpoints are
            often someone else's. A checkpoint without safetensors weights raises PickleWeightsRefusedError.
        Every other argument is transformers'. save_pretrained writes safetensors only.
        """
        if allow_pickle:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if kwargs.get("use_safetensors") is False:
            raise PickleWeightsRefusedError(
                "use_safetensors=False asks for pickle weights; pass allow_pickle=True as well if you trust them"
            )
        kwargs["use_safetensors"] = True  # transformers then never falls back to pytorch_model.bin
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except OSError as error:
            # transformers' "no safetensors file" errors under use_safetensors=True (a folder; a hub repo).
            if not re.search(r"no file named \S*safetensors|cannot be loaded with `safetensors`", str(error)):
                raise
            raise PickleWeightsRefusedError(pickle_refusal_message(pretrained_model_name_or_path)) from error

    def _init_weights(self, module):
        config = self.config
        scale = config.init_scale if config.init_scale is not None else 2.0 / config.num_hidden_layers
        if isinstance(module, nn.Linear):
            # Fan-in variance scaling (truncated normal), as the reference's VarianceScaling(scale).
            std = math.sqrt(scale / module.in_features) / 0.87962566103423978
            nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, RelativeAttention):
            std = math.sqrt(scale / module.head_dim)
            nn.init.trunc_normal_(module.u, std=std, a=-2 * std, b=2 * std)
            nn.init.trunc_normal_(module.v, std=std, a=-2 * std, b=2 * std)
        elif isinstance(module, TransformerGrammarForCausalLM):
            nn.init.zeros_(module.output_bias)


class TransformerGrammarModel(TransformerGrammarPreTrainedModel):
    """The decoder: embeddings, layers; returns the last hidden states [B, T, d].

    forward(input_ids [B, T]: the grammar's expanded positions, as the data collator gives them (for TG,
    each closing NT twice);
            attention_mask: [B, T, T] or [B, 1, T, T] bool structural mask; or [B, T] (padding only) / None,
                in which case the grammar computes the mask from input_ids;
            position_coordinates: [B, T] long, R_ij = c_i - c_j (TG: depths; causal grammars: positions);
                computed by the grammar when absent;
            relative_positions: [B, T, T] long, an explicit R (used only when position_coordinates is
                absent; slower);
            position_kinds: [B, T] PositionKind, needed only with distinct_compose_attention (derived from
                input_ids when absent);
            past_key_values / use_cache: a transformers Cache; with a cache, attention_mask must be the
                [B, T_new, T_past + T_new] rows of the new positions and position_coordinates cover
                past and new positions;
            slot_positions: [B, T_past + T_new], each slot's position in its own sequence (-1 for a slot that
                holds nothing), for caches whose rows are not plain prefixes (beam search); the
                unrestricted heads' causal mask and i - j come from it.)
    """

    def __init__(self, config):
        super().__init__(config)
        self.layout = ActionLayout.from_config(config)
        self.grammar = grammar_for_config(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=None)
        first_unrestricted = config.num_hidden_layers - config.num_unrestricted_layers
        self.layers = nn.ModuleList(
            [TransformerGrammarLayer(config, unrestricted_layer=i >= first_unrestricted) for i in range(config.num_hidden_layers)]
        )
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        self.relative_attention = "auto"  # or "reference" (explicit scores, for tests)
        # Fixed sinusoids, computed on first use: not parameters, and not buffers either (a loader that builds
        # the model on the meta device would leave non-persistent buffers uninitialized).
        self._encodings = {}
        self.post_init()

    def relative_encodings(self, device, dtype):
        """r(R) for the restricted range [min, max] and for the causal range [0, max_sequence_length)."""
        key = (device, dtype)
        if key not in self._encodings:
            config = self.config
            self._encodings[key] = {
                "restricted": sinusoid_table(config.min_relative_position, config.max_relative_position, config.hidden_size).to(device, dtype),
                "unrestricted": sinusoid_table(0, config.max_sequence_length - 1, config.hidden_size).to(device, dtype),
            }
        return self._encodings[key]

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    # ---- structure ------------------------------------------------------------------------------
    def unexpand(self, ids):
        """Action ids of one expanded sequence (TG: drop the STACK copy of each closing pair)."""
        ids = [int(i) for i in ids if int(i) != self.layout.pad_token_id]
        if not self.grammar.duplicates_closing:
            return ids
        kinds = self.layout.kinds(np.array(ids, dtype=np.int64))
        actions, run = [], 0
        for action_id, kind in zip(ids, kinds):
            run = run + 1 if kind == ActionKind.CLOSE_NT else 0
            if run % 2 == 0 and kind == ActionKind.CLOSE_NT:
                if actions[-1] != action_id:
                    raise ValueError(
                        f"input_ids are not expanded {self.config.grammar} positions: closing id {action_id} "
                        "is not preceded by its COMPOSE copy"
                    )
                continue
            actions.append(action_id)
        return actions

    def grammar_inputs(self, input_ids):
        """Mask, coordinates and position kinds the grammar derives from expanded (right-padded) input_ids."""
        rows = [self.unexpand(row.tolist()) for row in input_ids.cpu()]
        for index, row in enumerate(rows):
            if not row:
                raise ValueError(f"input_ids row {index} is empty (all padding)")
        width = input_ids.shape[1]
        batch = self.grammar.batch(rows, require_complete=False, pad_to_multiple_of=width)
        if batch["input_ids"].shape[1] != width or not np.array_equal(
            batch["input_ids"], np.where(input_ids.cpu().numpy() == self.layout.pad_token_id, self.layout.pad_token_id, input_ids.cpu().numpy())
        ):
            raise ValueError("input_ids must be right-padded expanded positions (as SyntacticDataCollator returns them)")
        device = input_ids.device
        return (
            torch.from_numpy(batch["attention_mask"]).to(device),
            torch.from_numpy(batch["position_coordinates"]).to(device),
            torch.from_numpy(batch["position_kinds"].astype(np.int64)).to(device),
        )

    def _structure(self, input_ids, attention_mask, position_coordinates, relative_positions, position_kinds, past_length,
                   slot_positions=None):
        batch, length = input_ids.shape
        total = past_length + length
        # With position ids (a beam-search cache with holes), slots outnumber the positions they hold.
        longest = total if slot_positions is None else int(slot_positions.max()) + 1
        if longest > self.config.max_sequence_length:
            raise ValueError(
                f"input of {longest} positions is longer than the model's maximum of {self.config.max_sequence_length} "
                "(config.max_sequence_length)"
            )
        padding = None
        if attention_mask is not None and attention_mask.dim() == 2:
            padding, attention_mask = attention_mask.bool(), None
        if attention_mask is None:
            if past_length:
                if self.grammar.name == "tg":
                    raise ValueError("with past_key_values, a TG model needs the [B, T_new, T_total] attention_mask rows")
                rows = torch.arange(past_length, total, device=input_ids.device)
                attention_mask = (torch.arange(total, device=input_ids.device)[None, :] <= rows[:, None])[None].expand(batch, -1, -1)
                if padding is not None:
                    attention_mask = attention_mask & padding[:, None, :]
            else:
                attention_mask, coordinates, kinds = self.grammar_inputs(input_ids)
                if position_coordinates is None and relative_positions is None:
                    position_coordinates = coordinates
                if position_kinds is None:
                    position_kinds = kinds
        if attention_mask.dim() == 4:
            attention_mask = attention_mask[:, 0] if attention_mask.shape[1] == 1 else attention_mask
        if attention_mask.dim() != 3 or attention_mask.shape[-2:] != (length, total):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; expected [B, {length}, {total}] "
                f"(or [B, 1, {length}, {total}], or a [B, {total}] padding mask)"
            )
        attention_mask = attention_mask.bool()
        positions = torch.arange(total, device=input_ids.device)[None].expand(batch, -1)
        if position_coordinates is None and relative_positions is None:
            if self.grammar.name == "tg":
                position_coordinates = self.grammar_inputs(input_ids)[1]
            else:
                position_coordinates = positions
        coordinates_k = position_coordinates
        coordinates_q = None if position_coordinates is None else position_coordinates[:, past_length:]
        is_compose = None
        if self.config.distinct_compose_attention:
            if position_kinds is None:
                position_kinds = self.grammar_inputs(input_ids)[2]
            is_compose = position_kinds == PositionKind.CLOSE_COMPOSE
        # Unrestricted heads and layers: causal over the same positions, relative position i - j.
        if slot_positions is None:
            causal = torch.arange(total, device=input_ids.device)[None, :] <= torch.arange(past_length, total, device=input_ids.device)[:, None]
            # Right padding only: real rows never reach padding under a causal mask.
            causal_mask = causal[None].expand(batch, -1, -1)
        else:
            # A beam-search cache has holes (position id -1) and each row its own positions.
            query_ids = slot_positions[:, past_length:]
            causal_mask = (slot_positions[:, None, :] >= 0) & (slot_positions[:, None, :] <= query_ids[:, :, None])
            causal_mask |= torch.eye(total, dtype=torch.bool, device=input_ids.device)[past_length:][None]
            positions = slot_positions.clamp(min=0)
        return _Structure(
            restricted_mask=attention_mask[:, None],
            causal_mask=causal_mask[:, None],
            coordinates_q=coordinates_q,
            coordinates_k=coordinates_k,
            relative_positions=None if position_coordinates is not None else relative_positions,
            positions_q=positions[:, past_length:],
            positions_k=positions,
            min_position=self.config.min_relative_position,
            is_compose=is_compose,
            implementation=self.relative_attention,
        )

    # ---- forward --------------------------------------------------------------------------------
    def forward(self, input_ids=None, attention_mask=None, position_coordinates=None, relative_positions=None,
                position_kinds=None, past_key_values=None, use_cache=None, inputs_embeds=None,
                output_hidden_states=None, return_dict=True, slot_positions=None, **kwargs):
        if input_ids is None:
            raise ValueError("input_ids is required (expanded action ids [B, T])")
        use_cache = use_cache if use_cache is not None else False
        if use_cache and past_key_values is None:
            from transformers import DynamicCache

            past_key_values = DynamicCache()
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        structure = self._structure(input_ids, attention_mask, position_coordinates, relative_positions, position_kinds,
                                    past_length, slot_positions)
        hidden = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        hidden = F.dropout(hidden, self.config.embedding_dropout, self.training)
        encodings = self.relative_encodings(hidden.device, hidden.dtype)
        all_hidden = [hidden] if output_hidden_states else None
        slots_per_layer = max(len(layer.attention_modules()) for layer in self.layers)
        for layer_index, layer in enumerate(self.layers):

            def cache_kv(slot, attention, x, layer_index=layer_index):
                keys, values = attention.project(x)
                if past_key_values is not None:
                    keys, values = past_key_values.update(keys, values, layer_index * slots_per_layer + slot)
                return keys, values

            hidden = layer(hidden, structure, encodings, cache_kv)
            if output_hidden_states:
                all_hidden.append(hidden)
        if self.final_layer_norm is not None:
            hidden = self.final_layer_norm(hidden)
        return BaseModelOutputWithPast(
            last_hidden_state=hidden,
            past_key_values=past_key_values if use_cache else None,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
        )


class TransformerGrammarForCausalLM(TransformerGrammarPreTrainedModel, GenerationMixin):
    """TG / TXL (CC) / TXL (terminals) with the tied output layer (embedding transpose + bias).

    `labels` [B, T] are per-position targets, already aligned with the positions (labels[i] is the action
    position i predicts, -100 where nothing is predicted), exactly as SyntacticDataCollator returns them.
    They are NOT shifted inside the model: TG's COMPOSE copies make a plain shift wrong.
    The loss is the mean cross-entropy over the labelled positions.
    """

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.model = TransformerGrammarModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids=None, attention_mask=None, position_coordinates=None, relative_positions=None,
                position_kinds=None, labels=None, past_key_values=None, use_cache=None, output_hidden_states=None,
                return_dict=True, slot_positions=None, **kwargs):
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_coordinates=position_coordinates,
            relative_positions=relative_positions, position_kinds=position_kinds, past_key_values=past_key_values,
            use_cache=use_cache, output_hidden_states=output_hidden_states, slot_positions=slot_positions,
        )
        hidden = F.dropout(outputs.last_hidden_state, self.config.final_dropout, self.training)
        logits = self.lm_head(hidden) + self.output_bias
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)
        return CausalLMOutputWithPast(
            loss=loss, logits=logits, past_key_values=outputs.past_key_values, hidden_states=outputs.hidden_states
        )

    # ---- decoding -------------------------------------------------------------------------------
    def generate(self, inputs=None, generation_config=None, tokenizer=None, word_start_mask=None, beam_options=None,
                 **kwargs):
        """HF-style generation. TXL (terminals) uses transformers' own generate. TG and TXL (CC) complete each
        prompt (`<s>` + word pieces, as tokenizer(words, is_split_into_words=True) gives; None for no prompt)
        into a tree with word-synchronous beam search, or with top-k sampling (`do_sample=True`), and return
        action ids that `tokenizer.decode` turns into bracketed trees.

        Read from kwargs or `generation_config`: num_beams, do_sample, top_k, num_return_sequences and
        max_new_tokens (counted in words here). Pass `tokenizer=` (or `word_start_mask=`) so that words made
        of several pieces are told apart; `beam_options` (a dict) sets any BeamSearchOptions field.
        """
        if self.config.grammar == "terminals":
            return super().generate(inputs, generation_config=generation_config, **kwargs)
        input_ids = kwargs.pop("input_ids", inputs)
        settings = {}
        if generation_config is not None:
            for name in ("num_beams", "do_sample", "top_k", "num_return_sequences", "max_new_tokens"):
                value = getattr(generation_config, name, None)
                if value is not None:
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
            top_k=top_k if top_k not in (None, 50) else None,  # 50 is transformers' default, not a choice
            max_new_words=settings.get("max_new_tokens") or 20,
            num_return_sequences=settings.get("num_return_sequences", 1), word_start_mask=word_start_mask,
            incomplete_word_ids=incomplete, seed=settings.get("seed"), **(beam_options or {}),
        )

    def word_synchronous_beam_search(self, words, options=None, word_start_mask=None, **option_fields):
        """Forced-word beam search: `words[s]` = sentence s as words of piece ids. Returns SentenceResults
        (surprisals in nats, log p(x) lower bound, best trees). See generation_tg.BeamSearchOptions."""
        options = options or BeamSearchOptions(**option_fields)
        return WordSynchronousBeamSearch(self, options, word_start_mask=word_start_mask).search(words)


# save_pretrained copies this file, its sibling imports and the configuration into every checkpoint, and
# config.auto_map names all the Auto classes (see TransformerGrammarConfig), so that
# AutoModel / AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True) work without hf_slm.
TransformerGrammarModel._auto_class = "AutoModel"
TransformerGrammarForCausalLM._auto_class = "AutoModelForCausalLM"
