"""The external composition function f of paper 003 (section 2.3, Figure 2; GPST's composer, Hu et al. 2024).

When a constituent closes (Ex variants: one `)` position), f reads the representations of its direct children,
in order (a token's input embedding, or the composition an earlier `)` position holds), and returns one vector,
the input embedding of the `)` position:

    S_{p0,pm} = f(S_{p0,p1}, ..., S_{p(m-1),pm})

f is a small bidirectional Transformer with its own width (the paper: 256-d, 4 layers, "as GPST"): the children
are down-projected from the main model's width, each gets the position embedding of its rank among the
children (Figure 2), a learned summary vector is put in front of them, and after the layers the summary's
output is up-projected back to the main model's width. Compositions live in the main model's embedding space,
so an earlier composition is read exactly like a token embedding (and the beam-search decoder only keeps each
position's input embedding).

Three entry points, one computation (`compose_packed`), and a host function elsewhere:
- `compose(children, child_mask)`: a batch of constituents [N, K, d] (K the most children, `child_mask` [N, K]
  which are real) -> [N, d]. The beam-search decoder calls it once per round for every `)` chosen.
- `compose_by_level(embeddings, children, level)`: training. Every constituent of a batch's trees, bottom-up,
  one `compose_packed` call per tree level (all constituents whose children are done, across the batch), not
  one constituent at a time; returns the input embeddings with each `)` position's replaced by its composition.
- `compose_packed(children, which, rank, count)`: the constituents' children as one list of rows [M, d], each
  with its constituent and its rank among that constituent's children.
- `composition_schedule(children, level)` (numpy, compositional_grammars.py: the Ex grammars' `host_inputs`): what
  compose_by_level reads from its inputs before composing (the order, the pairs, how many per level), computed
  where the grammar ran; given to compose_by_level, it spares reading those sizes back from the device in a
  training step (the collator adds it).

Packed, not padded: constituents of one level have from 1 to tens of children (a training batch of GUM trees:
277 constituents of up to 23 children at level 1), so padding every one to the widest would run the layers'
linear maps (nearly all of f's cost) on about 3.5x more rows than there are children. The linear maps, layer
norms and feed-forward layers run on the real rows only (summaries + children); only the attention, which is
per constituent, scatters its queries, keys and values into the padded [N, 1 + K] layout (padding masked as
keys, so it changes nothing) and reads the real rows back. The last layer computes only the summaries'
outputs (no other row of it is read), so its children get keys and values but no queries. The result is the
padded computation's, to float rounding.

The choice of a summary vector (rather than, say, pooling the children's outputs) and the sizes of the heads
and feed-forward layer are this library's: the paper gives the width and the depth only.

Hub code: imports only torch.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ComposerLayer(nn.Module):
    """A pre-LN Transformer encoder layer over a constituent's children (bidirectional: a constituent is
    composed once it is complete). hidden [N, K, c], key_mask [N, 1, 1, K] bool -> [N, K, c]."""

    def __init__(self, width, heads, intermediate, dropout, eps):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.ffn_in = nn.Linear(width, intermediate)
        self.ffn_out = nn.Linear(intermediate, width)
        self.ln_attention = nn.LayerNorm(width, eps=eps)
        self.ln_ffn = nn.LayerNorm(width, eps=eps)
        self.dropout = dropout

    def forward(self, hidden, key_mask):
        count, length, width = hidden.shape
        q, k, v = self.qkv(self.ln_attention(hidden)).view(count, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask,
                                                  dropout_p=self.dropout if self.training else 0.0)
        attended = self.out(attended.transpose(1, 2).reshape(count, length, width))
        hidden = hidden + F.dropout(attended, self.dropout, self.training)
        inner = F.dropout(F.gelu(self.ffn_in(self.ln_ffn(hidden))), self.dropout, self.training)
        return hidden + F.dropout(self.ffn_out(inner), self.dropout, self.training)

    def forward_packed(self, hidden, slots, key_mask, count, summaries_only=False):
        """The same layer over packed rows (ExternalComposer.compose_packed): hidden [R, c], the first `count`
        rows the constituents' summaries; slots [R] each row's index in the padded [count * (1 + K)] layout;
        key_mask [count, 1, 1, 1 + K] bool. -> [R, c], or only the summaries' rows [count, c] with
        `summaries_only` (the last layer: nothing else is read)."""
        width = hidden.shape[-1]
        padded_length = key_mask.shape[-1]
        normed = self.ln_attention(hidden)
        if summaries_only:  # the children are only keys and values: no queries for them
            summaries = self.qkv(normed[:count])
            children = F.linear(normed[count:], self.qkv.weight[width:], self.qkv.bias[width:])
            # The padded slots stay zero; as keys they are masked.
            padded = summaries.new_zeros(count * padded_length, 2 * width).index_copy(
                0, slots, torch.cat([summaries[:, width:], children]))
            k, v = padded.view(count, padded_length, 2, self.heads, -1).permute(2, 0, 3, 1, 4)
            q = summaries[:, :width].view(count, 1, self.heads, -1).transpose(1, 2)
            hidden = hidden[:count]
        else:
            qkv = self.qkv(normed)
            # The padded slots stay zero; as keys they are masked, and their outputs as queries are never read.
            padded = qkv.new_zeros(count * padded_length, 3 * width).index_copy(0, slots, qkv)
            q, k, v = padded.view(count, padded_length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask,
                                                  dropout_p=self.dropout if self.training else 0.0)
        attended = attended.transpose(1, 2).reshape(-1, width)
        if not summaries_only:
            attended = attended.index_select(0, slots)
        hidden = hidden + F.dropout(self.out(attended), self.dropout, self.training)
        inner = F.dropout(F.gelu(self.ffn_in(self.ln_ffn(hidden))), self.dropout, self.training)
        return hidden + F.dropout(self.ffn_out(inner), self.dropout, self.training)


class ExternalComposer(nn.Module):
    """f: children's representations -> the constituent's (module docstring). Sizes from the config:
    composer_hidden_size, composer_num_layers, composer_num_heads, composer_intermediate_size,
    composer_max_children (the position embeddings' table), and the main model's hidden_size; dropout is the
    main model's core_dropout."""

    def __init__(self, config):
        super().__init__()
        width = config.composer_hidden_size
        if width % config.composer_num_heads:
            raise ValueError(f"composer_hidden_size {width} is not a multiple of composer_num_heads "
                             f"{config.composer_num_heads}")
        self.max_children = config.composer_max_children
        self.down = nn.Linear(config.hidden_size, width)  # the main model's embeddings, down-projected
        self.up = nn.Linear(width, config.hidden_size)  # the composition, up-projected to an input embedding
        self.child_positions = nn.Embedding(config.composer_max_children, width)
        self.summary = nn.Parameter(torch.zeros(width))  # the slot whose output is the composition
        self.layers = nn.ModuleList([
            ComposerLayer(width, config.composer_num_heads, config.composer_intermediate_size, config.core_dropout,
                          config.layer_norm_eps) for _ in range(config.composer_num_layers)])
        self.final_layer_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)

    def compose(self, children, child_mask):
        """children [N, K, d] (the main model's width), child_mask [N, K] bool (real children; a child's
        position embedding is that of its column) -> the compositions [N, d]."""
        count, most, _ = children.shape
        self._check_children(most)
        which, rank = child_mask.nonzero(as_tuple=True)
        return self.compose_packed(children[which, rank], which, rank, count)

    def _check_children(self, most):
        if most > self.max_children:
            raise ValueError(f"a constituent has {most} children; the composer's position embeddings cover "
                             f"composer_max_children={self.max_children} (set a larger value in the config)")

    def compose_packed(self, children, which, rank, count, widest=None):
        """children [M, d]: every child of `count` constituents, one row each; which [M] long: its constituent
        (0 .. count - 1); rank [M] long: its rank among that constituent's children (its position embedding)
        -> the compositions [count, d]. A constituent f reads as [summary, child of rank 0, rank 1, ...].
        `widest`, the most children of a constituent (1 + the largest rank), where the caller knows it on the
        host; without it it is read from `rank` (a device sync off the CPU)."""
        if widest is None:
            widest = int(rank.max()) + 1 if len(rank) else 0
        padded_length = 1 + widest
        self._check_children(widest)
        summaries = self.summary.expand(count, -1).to(children.dtype)
        hidden = torch.cat([summaries, self.down(children) + self.child_positions(rank)])
        # Row r's slot in the padded [count, 1 + K] layout: a summary in front of its constituent's children.
        constituents = torch.arange(count, device=children.device)
        slots = torch.cat([constituents * padded_length, which * padded_length + rank + 1])
        keep = torch.zeros(count * padded_length, dtype=torch.bool, device=children.device)
        keep[slots] = True
        keep = keep.view(count, 1, 1, padded_length)
        for index, layer in enumerate(self.layers):
            hidden = layer.forward_packed(hidden, slots, keep, count, summaries_only=index == len(self.layers) - 1)
        if not len(self.layers):
            hidden = hidden[:count]
        return self.up(self.final_layer_norm(hidden))

    def compose_by_level(self, embeddings, children, level, schedule=None):
        """All compositions of a batch, bottom-up and batched by tree level.

        embeddings [B, T', d]: each position's token embedding; children [B, T', T'] bool: row t of a `)`
        position marks its direct children; level [B, T'] long: 0 for a token, 1 + its highest child's for a
        `)`, -1 for positions that are neither (grammar.batch's composition_children / composition_level).
        Returns [B, T', d]: `embeddings` with every `)` position's row replaced by f(its children's rows), its
        children's rows being earlier compositions where they are constituents (hence the order by level).

        `schedule` = (indices, levels), compositional_grammars.composition_schedule's, computed on the host from the same children and
        levels (the collator does), spares every read back from the device (how many constituents and children
        each level has are data); without it they are read here from the device tensors (syncs off the CPU),
        with the same numbers.

        The dense children tensor is read once (one nonzero) into (parent, child) pairs; the compositions are
        kept in a table of their own, in level order, and written into the embeddings once at the end, so that
        a level reads its children with two gathers instead of copying the whole [B, T', d] tensor per level.
        """
        if schedule is None:
            schedule = self._device_schedule(children, level)
        indices, levels = schedule
        return self.compose_scheduled(embeddings, indices, levels)

    def compose_scheduled(self, embeddings, indices, levels):
        """compose_by_level's computation from its schedule (composition_schedule's, or _device_schedule's):
        embeddings [B, T', d]; indices [N + 2 P + P] long on their device; levels [[constituents, pairs, token
        pairs, widest], ...] host ints, one entry per tree level from 1 (widest may be None: read then)."""
        count, length, width = embeddings.shape
        if not levels:
            return embeddings
        flat = embeddings.reshape(count * length, width)
        sizes = [sum(entry[index] for entry in levels) for index in range(3)]  # constituents, pairs, token pairs
        constituents, parents, ranks, token_children, composed_children = indices.split(
            [sizes[0], sizes[1], sizes[1], sizes[2], sizes[1] - sizes[2]])
        pair_counts = [entry[1] for entry in levels]
        token_counts = [entry[2] for entry in levels]
        # Every token child of the batch read with one gather (one scatter in the backward pass, not one
        # [B * T', d] gradient buffer per level), split by level.
        token_rows = flat.index_select(0, token_children).split(token_counts)
        composed_rows = composed_children.split([p - t for p, t in zip(pair_counts, token_counts)])
        parents, ranks = parents.split(pair_counts), ranks.split(pair_counts)
        table = flat.new_zeros(0, width)
        for current, (constituent_count, _, _, widest) in enumerate(levels):
            if not constituent_count:
                continue
            kids = torch.cat([token_rows[current], table.index_select(0, composed_rows[current])])
            table = torch.cat([table, self.compose_packed(kids, parents[current], ranks[current], constituent_count,
                                                          widest)])
        return flat.index_put((constituents,), table).view(count, length, width)

    def _device_schedule(self, children, level):
        """composition_schedule of device tensors, read back from the device (syncs off the CPU): the pairs of the
        dense children tensor (one nonzero), their ranks, and the counts per level. Checks its inputs."""
        length = level.shape[1]
        flat_level = level.reshape(-1)
        constituents = (flat_level > 0).nonzero(as_tuple=True)[0]  # flat positions of the `)`s
        if not len(constituents):
            return constituents, []
        # The composition table's order: by level, then position (each level one contiguous block).
        constituent_level = flat_level[constituents]
        constituents = constituents[torch.argsort(constituent_level, stable=True)]
        constituent_level = flat_level[constituents]
        per_level = torch.bincount(constituent_level).tolist()
        table_index = torch.full_like(flat_level, -1)
        table_index[constituents] = torch.arange(len(constituents), device=level.device)
        rows, parents, kids = children.nonzero(as_tuple=True)  # ordered by row, parent, then child position
        parent_flat, child_flat = rows * length + parents, rows * length + kids
        parent_index = table_index[parent_flat]
        read = parent_index >= 0  # the children of positions that are not `)`s are never read
        parent_flat, child_flat, parent_index = parent_flat[read], child_flat[read], parent_index[read]
        counts = torch.bincount(parent_index, minlength=len(constituents))
        if bool((counts == 0).any()):
            bad = int(constituents[int((counts == 0).nonzero()[0])])
            raise ValueError(f"composition_children: the `)` at row {bad // length}, position {bad % length} "
                             f"(composition_level {int(flat_level[bad])}) has no children; expected its direct "
                             "children's positions (grammar.batch gives them)")
        self._check_children(int(counts.max()))
        # Rank among the parent's children: pairs of one parent are consecutive, its children in position order.
        order = torch.arange(len(parent_flat), device=level.device)
        starts = torch.ones(len(parent_flat), dtype=torch.bool, device=level.device)
        starts[1:] = parent_flat[1:] != parent_flat[:-1]
        rank = order - torch.cummax(torch.where(starts, order, torch.zeros_like(order)), 0).values
        child_index = table_index[child_flat]  # -1: a token (or any non-`)`), read from the embeddings
        parent_level = flat_level[parent_flat]
        if bool((flat_level[child_flat] >= parent_level).any()):
            raise ValueError("composition_level: a `)` has a child `)` of the same or a higher level; expected 1 + "
                             "the highest child's level (grammar.batch gives them)")
        # Order the pairs by level and, within a level, tokens before composed children: a level's pairs are one
        # contiguous range, and its token children come first.
        composed = child_index >= 0
        by_level = torch.argsort(parent_level * 2 + composed, stable=True)
        parent_level, parent_index, child_flat, child_index, rank, composed = (
            parent_level[by_level], parent_index[by_level], child_flat[by_level], child_index[by_level],
            rank[by_level], composed[by_level])
        levels = len(per_level)
        pair_counts = torch.bincount(parent_level, minlength=levels).tolist()
        token_counts = torch.bincount(parent_level[~composed], minlength=levels).tolist()
        first = torch.tensor(per_level, device=level.device).cumsum(0) - torch.tensor(per_level, device=level.device)
        indices = torch.cat([constituents, parent_index - first[parent_level], rank, child_flat[~composed],
                             child_index[composed]])
        return indices, [[per_level[current], pair_counts[current], token_counts[current], None]
                         for current in range(1, levels)]
