"""The Transformer backbone shared by every Transformer syntactic LM family.

A decoder over *positions*: the grammar has already turned actions into positions (TG duplicates each
closing nonterminal) and said, for each new position, what it attends (a mask row) and where it sits (a
coordinate c, with relative position R_ij = c_i - c_j). The backbone knows no grammar. It offers:
- relative attention, Transformer-XL style:

      s_ij = (q_i + u) . k_j + (q_i + v) . W_R r(R_ij)

  (u, v, W_R per layer, r fixed sinusoids, R clipped to the configured range), or absolute positions
  (GPT-2: learned embeddings of each position's index added to the input, no relative term);
- restricted heads that follow the grammar's mask and, optionally, unrestricted heads or layers with a
  causal mask and R_ij = i - j (paper 000's hybrids);
- optional separate attention parameters for COMPOSE positions;
- an input hook: `extra_embeddings` [B, T, d] added to the token embeddings (families whose positions carry
  more than a token, such as DTG's arcs), or `inputs_embeds` [B, T, d] instead of them (paper 003's Ex
  variants, whose `)` positions input the external composer's output: modeling/composer.py);
- a KV cache (`past_key_values`) whose rows may hold padding (beam search reads only attended positions),
  described by `positions`.

Fast paths (all exact; tests hold them equal to the reference, gradients included):
- when every attended pair has R = (query slot) - (key slot) (causal grammars, unrestricted heads), the
  Transformer-XL way: (q_i + v) times the projected sinusoids of each distance, then the relative shift;
- otherwise, since R_ij = c_i - c_j,

      (q_i + v) . W_R r(clip(c_i - c_j)) = sum_d  B_i[clip(c_i - d)] * [c_j == d]

  where B_i[R] = (q_i + v) . W_R r(R) is a small [T, K] table per head: the relative term is the product of
  an extra query block (B_i gathered at c_i - d for each coordinate value d) with an extra key block (the
  one-hot of c_j), riding in the q k^T product. The same holds when R_ij = s_i (c_i - c_j) + o_i with a scale
  and offset per query (`relative_affine`: DTG arc-standard's COMPOSE rows): B_i is gathered at that R.
On CPU both run in chunked_attention.py (see why there); elsewhere the factorized form is one fused SDPA call
with a boolean mask. A few queries over a long cache (decoding), or coordinates spanning too many values,
use the gathered bias. `config.relative_attention = "reference"` computes everything explicitly (einsum,
gather, masked softmax) for tests.

Hub code: imports only torch and its sibling files.
"""

import math
from dataclasses import dataclass
from functools import cached_property, partial

import torch
import torch.nn.functional as F
from torch import nn

from .chunked_attention import ChunkedAttention, chunk_plan

# Above this many distinct coordinate values, the gathered bias is cheaper than the one-hot key block.
MAX_FACTORIZED_COORDINATES = 128


def on_host(tensor):
    """Whether `tensor` lives in host memory (the CPU), where reading its values costs no device sync. Only there
    does attention take the CPU kernel (chunked_attention.py, which plans its chunks from the mask on the host) or
    count the explicit relative positions' span (elsewhere the configured range serves). Off the CPU a training
    step on the collator's batch reads nothing back from the device (without the collator's counts, TG's and DTG's
    depth count, PositionStructure.num_coordinate_values, is read; tests/test_training_step.py sets this to False to
    run the device paths on the CPU and checks for reads)."""
    return tensor.device.type == "cpu"


class SequenceTooLong(ValueError):
    """A sequence has more positions than config.max_sequence_length: a ValueError that callers which can give up
    on one sequence (free generation: hf_slm/summarization/summaries.py) recognize by its type."""


class HeadStructure:
    """What one group of heads attends in one forward call: mask [B, T, S] bool, coordinates [B, T] / [B, S]
    (R_ij = c_i - c_j) and `count_values`, which gives how many coordinate values there are (1 + the largest; an
    upper bound is as good); or, for grammars whose relative positions are not all differences of coordinates
    (DTG's COMPOSE rows), the explicit `relative` [B, T, S] (then the count is 1 + the largest |R|, asked on the
    CPU only: elsewhere the whole configured range serves). Everything derived from them is computed at most once per forward call, on first use, and
    shared by every layer (the count may cost a device sync: PositionStructure).
    """

    def __init__(self, mask, coordinates_q, coordinates_k, count_values, relative=None, affine=None):
        self.mask, self.coordinates_q, self.coordinates_k = mask, coordinates_q, coordinates_k
        self._count_values = count_values
        self.relative, self.affine = relative, affine

    @cached_property
    def num_values(self):
        """How many coordinate values there are (an upper bound where only that is known without reading the
        device: the numbers are the same, padded with zero one-hot columns and unused table rows)."""
        return self._count_values()

    def relative_to(self, key_coordinates):
        """R [B, T, K] of every query to keys at `key_coordinates` ([B, K], or [K] for the same in every row):
        c_i - c_j, or, with `affine` = (scale, offset) [B, T], scale_i (c_i - c_j) + offset_i."""
        if key_coordinates.dim() == 1:
            key_coordinates = key_coordinates[None]
        relative = self.coordinates_q[:, :, None] - key_coordinates[:, None, :]
        if self.affine is not None:
            scale, offset = self.affine
            relative = scale[:, :, None] * relative + offset[:, :, None]
        return relative

    @cached_property
    def additive(self):
        """The mask as 0 / -inf, [B, 1, T, S]."""
        zeros = torch.zeros(self.mask.shape, device=self.mask.device)
        return zeros.masked_fill_(~self.mask, float("-inf"))[:, None]

    @cached_property
    def relative_shift_applies(self):
        """Whether every attended pair has R = (query slot) - (key slot) and no attended key lies two or more
        slots after its query: then the relative term is one product per distance and a relative shift
        (causal grammars, unrestricted heads; left or right padding). One check per forward call, read on the
        host: only the CPU kernel asks (on_host)."""
        if self.affine is not None:
            return False  # some rows' R are no distances (DTG's COMPOSE rows)
        length, keys = self.mask.shape[1:]
        query_slot = torch.arange(keys - length, keys, device=self.mask.device)
        key_slot = torch.arange(keys, device=self.mask.device)
        offset_q = (self.coordinates_q - query_slot)[:, :, None]
        offset_k = (self.coordinates_k - key_slot)[:, None, :]
        breaks = (offset_q != offset_k) | (key_slot[None, None, :] > query_slot[None, :, None] + 1)
        return not bool((self.mask & breaks).any())

    def plan(self, heads, itemsize):
        """The chunks of the chunked kernel (which key window each block of queries visits)."""
        key = (heads, itemsize)
        plans = self.__dict__.setdefault("_plans", {})
        if key not in plans:
            plans[key] = chunk_plan(self.mask, heads, itemsize)
        return plans[key]


@dataclass
class PositionStructure:
    """What the grammar says about the positions of one forward call (shared by all layers). A family's own inputs
    (DTG's head tokens, paper 003's compositions and starts) are not here: the model's family hooks turn them into
    the embeddings the decoder takes (modeling_slm.py).

    S = cached slots + T new positions; cached rows may hold padding (slots with position -1).
        mask: [B, T, S] bool, new position t attends slot s (restricted heads);
        coordinates: [B, S] long, R_ij = c_i - c_j on restricted heads (TG: depth; causal grammars: position);
        positions: [B, S] long, each slot's index in its own sequence, -1 for a hole or padding (unrestricted
            heads: causal mask and R = i - j; absolute position embeddings);
        kinds: [B, T] PositionKind of the new positions, or None (needed by distinct COMPOSE attention);
        relative_positions: [B, T, S] long, explicit R on restricted heads for grammars whose R is not always
            c_i - c_j (DTG: an RA's COMPOSE row gives 0 to the head below and -1 to the dependent above), or
            None. With it, attention takes the gathered-bias path.
        relative_affine: (scale, offset), each [B, T] long, for grammars whose R on restricted heads is
            scale_i (c_i - c_j) + offset_i (DTG arc-standard: 1, 0 on STACK rows; an LA's COMPOSE row 1, -1;
            an RA's -1, 0), or None. Unlike explicit values it keeps the fast paths. Coordinates are then
            shifted to start at 0 (only their differences count).
    """

    mask: torch.Tensor
    coordinates: torch.Tensor
    positions: torch.Tensor
    kinds: torch.Tensor | None
    min_position: int
    implementation: str = "auto"
    relative_positions: torch.Tensor | None = None
    relative_affine: tuple | None = None
    # A model with segment recurrence reading through its memory (segment_recurrence.py, search_decoders.py): its
    # positions may run past max_sequence_length (only relative positions are read, clipped to their range).
    segmented: bool = False
    # Upper bounds of 1 + the largest coordinate and 1 + the largest position that the caller knows on the host (a
    # causal grammar's coordinates are its positions, each below the slot count S), or None. Given, they spare
    # reading the maxima back from the device (a sync); an upper bound gives the same numbers. (With explicit
    # relative_positions the coordinates' bound is not the span of R: num_coordinate_values ignores it.)
    coordinate_bound: int | None = None
    position_bound: int | None = None

    def __post_init__(self):
        if self.relative_affine is not None and self.coordinates.numel():
            self.coordinates = self.coordinates - self.coordinates.min()  # the one-hot key block needs c >= 0
        check = self.coordinate_bound is not None and self.relative_positions is None and self.coordinates.numel()
        if check and on_host(self.coordinates):  # (elsewhere reading the values would cost a sync)
            needed = int(self.coordinates.max()) + 1
            if self.coordinate_bound < needed:
                raise ValueError(f"coordinate_bound (a batch's num_coordinate_values) is {self.coordinate_bound}; the "
                                 f"coordinates take {needed} values (1 + the largest): a smaller bound would drop some")

    @cached_property
    def num_coordinate_values(self):
        """1 + the largest coordinate (or an upper bound): the width of the factorized kernel's one-hot key block.
        Without a bound from the caller it is read from the data, once per forward call, not per layer: a device
        sync off the CPU (TG's and DTG's depths are known only to the data; the collator counts them on the host and
        the model passes its num_coordinate_values here)."""
        if self.relative_positions is not None:  # the span of the explicit values instead (asked on the CPU only)
            return int(self.relative_positions.abs().max()) + 1 if self.relative_positions.numel() else 1
        if self.coordinate_bound is not None:
            return self.coordinate_bound
        return int(self.coordinates.max()) + 1 if self.coordinates.numel() else 1

    @cached_property
    def num_position_values(self):
        """1 + the largest position, or the caller's upper bound: the width of the unrestricted heads' tables.
        Without a bound it is read from the data (a device sync off the CPU)."""
        if self.position_bound is not None:
            return self.position_bound
        return self.exact_position_values()

    def exact_position_values(self):
        """1 + the largest position, read from the data (a device sync off the CPU)."""
        return int(self.positions.max()) + 1 if self.positions.numel() else 1

    @cached_property
    def restricted(self):
        """The grammar's heads: its mask and coordinates (or explicit relative positions)."""
        length = self.mask.shape[1]
        return HeadStructure(self.mask, self.coordinates[:, -length:], self.coordinates,
                             lambda: self.num_coordinate_values, self.relative_positions, self.relative_affine)

    @cached_property
    def unrestricted(self):
        """Hybrid heads: causal over each row's own positions, R = i - j."""
        positions = self.positions.clamp(min=0)
        length = self.mask.shape[1]
        return HeadStructure(self.causal_mask(), positions[:, -length:], positions, lambda: self.num_position_values)

    def causal_mask(self, length=None):
        """[B, T, S]: the T new positions (default: as many as the mask's rows) attend every earlier or equal
        position of their own sequence."""
        length = self.mask.shape[1] if length is None else length
        query = self.positions[:, -length:]
        mask = (self.positions[:, None, :] >= 0) & (self.positions[:, None, :] <= query[:, :, None])
        # A hole or padding query attends itself only, so that no softmax row is empty.
        eye = torch.eye(self.positions.shape[1], dtype=torch.bool, device=mask.device)[-length:]
        return mask | eye[None]


def sinusoid_table(min_position, max_position, dim):
    """r(R) for R in [min_position, max_position]: [sin(R w), cos(R w)], w_k = 10000^(-2k/dim). [K, dim]"""
    positions = torch.arange(min_position, max_position + 1, dtype=torch.float32)
    inverse_frequency = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = positions[:, None] * inverse_frequency[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class RelativeAttention(nn.Module):
    """Multi-head attention with Transformer-XL relative positions over arbitrary masks.

    Shapes: hidden [B, T, d]; mask [B, h, T, S] bool (h = 1 or the heads of this module);
    coordinates_q [B, T] and coordinates_k [B, S] (R_ij = c_i - c_j); num_coordinate_values: 1 + the
    largest coordinate (computed once per forward call, not per layer, since it costs a device sync).
    With `relative=False` (absolute positions, GPT-2) there is no relative term at all.
    Returns the per-head outputs [B, T, h, d_head] (the output projection is applied by the layer, so
    that restricted and unrestricted heads share it as in the reference).
    """

    def __init__(self, config, num_heads, relative=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = config.head_dim
        self.relative = relative
        inner = num_heads * self.head_dim
        self.q_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, inner, bias=False)
        if relative:
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

    def forward(self, hidden, keys, values, heads, encodings, min_position, implementation="auto"):
        """hidden [B, T, d]; keys, values [B, h, S, d_head]; heads: a HeadStructure; encodings r(R) for R in
        [min_position, min_position + K). Returns [B, T, h, d_head]."""
        batch, length, _ = hidden.shape
        q = self.q_proj(hidden).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # [B,h,T,dh]
        dropout = self.dropout if self.training else 0.0
        scale = self.head_dim ** -0.5
        mask = heads.mask[:, None]
        if not self.relative:  # absolute positions: plain masked attention (fused kernel)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=dropout, scale=scale)
            return out.transpose(1, 2)
        # Only relative positions that can occur: |R| < the number of coordinate values (T for a causal model),
        # not the whole configured range (max_sequence_length rows for the causal grammars).
        max_position = min_position + encodings.shape[0] - 1
        if heads.relative is not None and not on_host(hidden):
            # Explicit R off the CPU: the whole configured range (counting |R| would cost a sync; same numbers)
            low, high = min_position, max_position
        else:
            lowest = -heads.num_values if heads.affine is not None else 1 - heads.num_values  # an offset of -1
            low, high = max(min_position, lowest), min(max_position, heads.num_values - 1)
            high = max(low, high)
        encodings = F.dropout(encodings[low - min_position : high - min_position + 1], self.dropout, self.training)
        min_position, max_position = low, high

        def relative_index(values_k):  # [B, T, S'] indices into the table; built only on the paths that need it
            relative = heads.relative if heads.relative is not None else heads.relative_to(values_k)
            return (relative.clamp(min_position, max_position) - min_position).long()

        def table():  # B_i[R] = (q_i + v) . W_R r(R), scaled: [B, h, T, K]
            r = self.r_proj(encodings).view(-1, self.num_heads, self.head_dim).permute(1, 2, 0)  # [h, dh, K]
            if length > 4:
                return torch.matmul(position_q, r)
            # Few queries over many rows (beam search): one GEMM per head over all rows, not B * h tiny
            # products (measured 38x faster at 460 rows, T = 1).
            rows = position_q.transpose(0, 1).reshape(self.num_heads, batch * length, self.head_dim)
            return torch.matmul(rows, r).view(self.num_heads, batch, length, -1).transpose(0, 1)

        if implementation == "reference":
            r = self.r_proj(encodings).view(-1, self.num_heads, self.head_dim)
            positional = torch.einsum("bhtd,khd->bhtk", q + self.v[None, :, None], r)
            return self._reference(q, keys, values, positional, relative_index(heads.coordinates_k), mask)
        # (q + u) * scale and (q + v) * scale: the scale is folded into q, never applied to [T, S] scores
        content_q = torch.add((self.u * scale)[None, :, None], q, alpha=scale)
        position_q = torch.add((self.v * scale)[None, :, None], q, alpha=scale)
        keys_length = keys.shape[2]
        few_queries = length <= 4 and keys_length > length  # incremental decoding: a small bias is cheapest
        explicit = heads.relative is not None  # R not from coordinates: only the gathered bias serves
        if on_host(hidden) and not few_queries and not explicit:
            if heads.relative_shift_applies:
                # Transformer-XL: r for distances S-1, S-2, ... down past -1 (clipped to the table), ~S rows and
                # not max_sequence_length; a multiple of 16 rows keeps the GEMM widths aligned.
                width = -(-(keys_length + 2) // 16) * 16
                distances = torch.arange(keys_length - 1, keys_length - 1 - width, -1, device=hidden.device)
                rows = encodings[distances.clamp(min_position, max_position) - min_position]
                r = self.r_proj(rows).view(-1, self.num_heads, self.head_dim).transpose(0, 1).contiguous()  # [h, W, dh]
                plan = heads.plan(self.num_heads, q.element_size())
                out = ChunkedAttention.apply(content_q, keys.detach(), keys, values, position_q, r, heads.additive,
                                             plan, dropout)
                return out.transpose(1, 2)
            if heads.num_values <= MAX_FACTORIZED_COORDINATES:
                # (q_i + v) . W_R r(clip(c_i - c_j)) = extra_q[i] . one_hot(c_j), extra_q[i, d] = B_i[clip(c_i - d)]:
                # the one-hot columns ride in the q k^T product.
                extra_q, extra_k = self._factorized_blocks(table(), heads, min_position, max_position)
                kx = torch.cat([keys.detach(), extra_k.expand(-1, self.num_heads, -1, -1)], dim=-1)
                plan = heads.plan(self.num_heads, q.element_size())
                out = ChunkedAttention.apply(torch.cat([content_q, extra_q], -1), kx, keys, values, None, None,
                                             heads.additive, plan, dropout)
                return out.transpose(1, 2)
        elif not few_queries and not explicit and heads.num_values <= MAX_FACTORIZED_COORDINATES:
            # Other devices: the same factorization inside one fused SDPA call with a boolean mask (values padded
            # to the query/key width, as SDPA's fused kernels need equal widths; padding columns are sliced off).
            extra_q, extra_k = self._factorized_blocks(table(), heads, min_position, max_position)
            out = F.scaled_dot_product_attention(
                torch.cat([content_q, extra_q], dim=-1), torch.cat([keys, extra_k.expand(-1, self.num_heads, -1, -1)], dim=-1),
                F.pad(values, (0, heads.num_values)), attn_mask=mask, dropout_p=dropout, scale=1.0,
            )
            return out[..., : self.head_dim].transpose(1, 2)
        # The gathered bias [B, h, T, S] inside SDPA (few queries, or coordinates spanning many values).
        bias = torch.gather(table(), 3, relative_index(heads.coordinates_k)[:, None].expand(-1, self.num_heads, -1, -1))
        bias = bias.masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(content_q, keys, values, attn_mask=bias, dropout_p=dropout, scale=1.0)
        return out.transpose(1, 2)

    def _factorized_blocks(self, table, heads, min_position, max_position):
        """Extra query block [B, h, T, D] (B_i at clip(c_i - d) for every coordinate value d) and extra key block
        [B, 1, S, D] (one-hot of c_j): their product is the relative term."""
        values_range = torch.arange(heads.num_values, device=table.device)
        rel_index = (heads.relative_to(values_range).clamp(min_position, max_position) - min_position).long()
        extra_q = torch.gather(table, 3, rel_index[:, None].expand(-1, self.num_heads, -1, -1))
        # the one-hot by comparison: F.one_hot checks the values' range on the host (a sync)
        extra_k = (heads.coordinates_k[:, :, None] == values_range).to(table.dtype)[:, None]
        return extra_q, extra_k

    def _reference(self, q, keys, values, table, index, mask):
        """The textbook computation, for tests: scores, masked softmax, dropout, weighted values."""
        content = torch.einsum("bhtd,bhsd->bhts", q + self.u[None, :, None], keys)
        position = torch.gather(table, 3, index[:, None].expand(-1, self.num_heads, -1, -1))
        scores = (content + position) * self.head_dim ** -0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return torch.einsum("bhts,bhsd->bhtd", weights, values).transpose(1, 2)


# config.hidden_act -> the feed-forward activation (configuration_slm.FEED_FORWARD_ACTIVATIONS says whose each is)
FEED_FORWARD_ACTIVATION = {"gelu": F.gelu, "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"), "relu": F.relu}


class SyntacticTransformerLayer(nn.Module):
    """Attention (restricted and, optionally, unrestricted heads) then a feed-forward block (config.hidden_act)."""

    def __init__(self, config, unrestricted_layer):
        super().__init__()
        heads = config.num_attention_heads
        self.num_unrestricted = heads if unrestricted_layer else config.num_unrestricted_heads
        self.num_restricted = heads - self.num_unrestricted
        num_attentions = 2 if config.distinct_compose_attention and self.num_restricted else 1
        # attentions[0] serves STACK positions (and everything in a non-TG model); attentions[1] COMPOSE.
        relative = config.position_encoding == "relative"
        self.attentions = nn.ModuleList(
            [RelativeAttention(config, self.num_restricted, relative) for _ in range(num_attentions)]
            if self.num_restricted else []
        )
        self.unrestricted_attention = (
            RelativeAttention(config, self.num_unrestricted, relative) if self.num_unrestricted else None
        )
        self.o_projs = nn.ModuleList([nn.Linear(config.hidden_size, config.hidden_size) for _ in range(num_attentions)])
        self.ffn_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.ln_attention = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ln_ffn = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.pre_layer_norm = config.pre_layer_norm
        self.dropout = config.core_dropout
        self.activation = FEED_FORWARD_ACTIVATION[config.hidden_act]

    def attention_modules(self):
        """(module, cache slot) of every attention that keeps keys/values."""
        modules = list(self.attentions)
        if self.unrestricted_attention is not None:
            modules.append(self.unrestricted_attention)
        return modules

    def forward(self, hidden, structure, encodings, cache_kv, is_compose=None):
        """hidden [B, T, d]; `is_compose(kinds)` [B, T] bool: which positions compose (needed with distinct COMPOSE
        attention: the decoder's)."""
        x = self.ln_attention(hidden) if self.pre_layer_norm else hidden
        batch, length, _ = x.shape
        outputs = []
        for slot, attention in enumerate(self.attentions):
            keys, values = cache_kv(slot, attention, x)
            heads = attention(x, keys, values, structure.restricted, encodings["restricted"], structure.min_position,
                              structure.implementation)
            outputs.append(heads)
        unrestricted = None
        if self.unrestricted_attention is not None:
            keys, values = cache_kv(len(self.attentions), self.unrestricted_attention, x)
            unrestricted = self.unrestricted_attention(x, keys, values, structure.unrestricted, encodings["unrestricted"],
                                                       0, structure.implementation)
        projected = []
        for index, o_proj in enumerate(self.o_projs):
            parts = ([outputs[index]] if outputs else []) + ([unrestricted] if unrestricted is not None else [])
            projected.append(o_proj(torch.cat(parts, dim=2).reshape(batch, length, -1)))
        attended = projected[0]
        if len(projected) == 2 and structure.kinds is not None:  # distinct STACK / COMPOSE parameters: COMPOSE rows take the second
            attended = torch.where(is_compose(structure.kinds)[:, :, None], projected[1], projected[0])
        attended = F.dropout(attended, self.dropout, self.training)
        if self.pre_layer_norm:
            hidden = hidden + attended
            return hidden + self.feed_forward(self.ln_ffn(hidden))
        hidden = self.ln_attention(hidden + attended)
        return self.ln_ffn(hidden + self.feed_forward(hidden))

    def feed_forward(self, hidden):
        """The feed-forward block's output (before its residual): W2 dropout(act(W1 h + b1)) + b2, dropped out."""
        inner = F.dropout(self.activation(self.ffn_in(hidden)), self.dropout, self.training)
        return F.dropout(self.ffn_out(inner), self.dropout, self.training)


class SyntacticTransformerDecoder(nn.Module):
    """Embeddings, layers and (pre-LN) the final LayerNorm: hidden states of the given positions.

    forward(position_ids [B, T] ids of the positions, structure PositionStructure, past_key_values=None,
            extra_embeddings=None [B, T, d], inputs_embeds=None [B, T, d], output_hidden_states=False)
        -> (hidden [B, T, d], all hidden states or None)

    `compose_kinds`: the PositionKinds whose positions compose (the grammar's `compose_kinds`: TG's closing NT copy,
    DTG's arc copies); distinct COMPOSE attention serves them.
    """

    def __init__(self, config, compose_kinds=()):
        super().__init__()
        self.config = config
        self.compose_kinds = tuple(sorted(int(kind) for kind in compose_kinds))
        self._compose_kinds_on = {}
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = (
            nn.Embedding(config.max_sequence_length, config.hidden_size) if config.position_encoding == "absolute" else None
        )
        first_unrestricted = config.num_hidden_layers - config.num_unrestricted_layers
        self.layers = nn.ModuleList(
            [SyntacticTransformerLayer(config, unrestricted_layer=i >= first_unrestricted) for i in range(config.num_hidden_layers)]
        )
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        # Fixed sinusoids, computed on first use: not parameters, and not buffers either (a loader that builds
        # the model on the meta device would leave non-persistent buffers uninitialized).
        self._encodings = {}

    def is_compose(self, kinds):
        """[B, T] bool: which positions of `kinds` [B, T] (PositionKind) compose. The kinds are copied to the device
        once (a copy from the host every call would wait for the device)."""
        if kinds.device not in self._compose_kinds_on:
            self._compose_kinds_on[kinds.device] = torch.tensor(self.compose_kinds, dtype=torch.long, device=kinds.device)
        return torch.isin(kinds, self._compose_kinds_on[kinds.device])

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

    def forward(self, position_ids, structure, past_key_values=None, extra_embeddings=None, inputs_embeds=None,
                output_hidden_states=False):
        hidden, all_hidden, _ = self._run(position_ids, structure, past_key_values, None, extra_embeddings,
                                          inputs_embeds, output_hidden_states)
        return hidden, all_hidden

    def forward_segment(self, position_ids, structure, memory, extra_embeddings=None):
        """One segment of a Transformer-XL recurrence (modeling/segment_recurrence.py): the structure's S = M + L
        slots are the M memory slots, then the L positions of the segment; `memory` holds, per layer, the layer's
        inputs at the memory slots [B, M, d] (zeros where empty: the mask hides them). Keys and values of layer k
        read the memory through layer k's own input LayerNorm (pre-LN) and projections, as Transformer-XL's
        [SG(m); h]. Positions are not checked against max_sequence_length: only relative positions within the
        memory and the segment are read. Returns (hidden [B, L, d], the layer inputs of the segment: a tuple per
        layer of [B, L, d], from which the caller builds the next memory)."""
        hidden, _, layer_inputs = self._run(position_ids, structure, None, memory, extra_embeddings, None, False)
        return hidden, layer_inputs

    def _run(self, position_ids, structure, past_key_values, memory, extra_embeddings, inputs_embeds,
             output_hidden_states):
        maximum = self.config.max_sequence_length
        # A bound within the maximum needs no look at the data; over it, only the exact value tells (a sync).
        checked = memory is None and not structure.segmented and structure.num_position_values > maximum
        if checked and (longest := structure.exact_position_values()) > maximum:
            raise SequenceTooLong(
                f"input of {longest} positions is longer than the model's maximum of {self.config.max_sequence_length} "
                "(config.max_sequence_length)"
            )
        hidden = self.embed_tokens(position_ids) if inputs_embeds is None else inputs_embeds
        if extra_embeddings is not None:
            hidden = hidden + extra_embeddings
        if self.embed_positions is not None:
            hidden = hidden + self.embed_positions(structure.positions[:, -position_ids.shape[1]:].clamp(min=0))
        hidden = F.dropout(hidden, self.config.embedding_dropout, self.training)
        if self.config.core_dropout_on_embeddings:  # paper 000's reference: the core's dropout too, after it
            hidden = F.dropout(hidden, self.config.core_dropout, self.training)
        encodings = self.relative_encodings(hidden.device, hidden.dtype)
        all_hidden = [hidden] if output_hidden_states else None
        layer_inputs = []
        slots_per_layer = max(len(layer.attention_modules()) for layer in self.layers)
        for layer_index, layer in enumerate(self.layers):
            layer_inputs.append(hidden)
            remembered = None
            if memory is not None:  # the memory as the layer's attention reads its input (pre-LN: normalized)
                remembered = layer.ln_attention(memory[layer_index]) if layer.pre_layer_norm else memory[layer_index]

            def cache_kv(slot, attention, x, layer_index=layer_index, remembered=remembered):
                keys, values = attention.project(x if remembered is None else torch.cat([remembered, x], dim=1))
                if past_key_values is not None:
                    keys, values = past_key_values.update(keys, values, layer_index * slots_per_layer + slot)
                return keys, values

            hidden = layer(hidden, structure, encodings, cache_kv, self.is_compose)
            if output_hidden_states:
                all_hidden.append(hidden)
        if self.final_layer_norm is not None:
            hidden = self.final_layer_norm(hidden)
        return hidden, (tuple(all_hidden) if output_hidden_states else None), tuple(layer_inputs)


def init_backbone_weights(module, config):
    """The initialization of one module of the backbone (PreTrainedModel._init_weights): paper 000's reference's
    (Haiku's VarianceScaling) for the linear layers, LayerNorms at 1 and 0. Two differences, which the family pages
    and the cards name: the embeddings are N(0, initializer_range), where the reference draws U(+-sqrt(3 / d)); u and
    v take the linear layers' scale over a head's d_head values, where the reference's is 1 over d_model. (Changing
    them would change the weights every seeded model draws, which checkpoints saved before rely on in their tests.)"""
    scale = config.init_scale if config.init_scale is not None else 2.0 / config.num_hidden_layers
    truncated = 0.87962566103423978  # the std of a unit normal truncated at +-2, which VarianceScaling divides by
    if isinstance(module, nn.Linear):
        # Fan-in variance scaling (truncated normal), as the reference's VarianceScaling(scale).
        std = math.sqrt(scale / module.in_features) / truncated
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=config.initializer_range)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, RelativeAttention) and module.relative:
        std = math.sqrt(scale / module.head_dim)
        nn.init.trunc_normal_(module.u, std=std, a=-2 * std, b=2 * std)
        nn.init.trunc_normal_(module.v, std=std, a=-2 * std, b=2 * std)
