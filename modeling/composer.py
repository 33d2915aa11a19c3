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

Two entry points, one computation:
- `compose(children, child_mask)`: a batch of constituents [N, K, d] (K the most children, `child_mask` [N, K]
  which are real) -> [N, d]. The beam-search decoder calls it once per round for every `)` chosen.
- `compose_by_level(embeddings, children, level)`: training. Every constituent of a batch's trees, bottom-up,
  one `compose` call per tree level (all constituents whose children are done, across the batch), not one
  constituent at a time; returns the input embeddings with each `)` position's replaced by its composition.

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
        """children [N, K, d] (the main model's width), child_mask [N, K] bool (real children, a prefix of each
        row) -> the compositions [N, d]."""
        count, most, _ = children.shape
        if most > self.max_children:
            raise ValueError(f"a constituent has {most} children; the composer's position embeddings cover "
                             f"composer_max_children={self.max_children} (set a larger value in the config)")
        ranks = torch.arange(most, device=children.device)
        hidden = self.down(children) + self.child_positions(ranks)[None]
        hidden = torch.cat([self.summary.expand(count, 1, -1).to(hidden.dtype), hidden], dim=1)
        keep = torch.cat([child_mask.new_ones(count, 1), child_mask], dim=1)[:, None, None, :]
        for layer in self.layers:
            hidden = layer(hidden, keep)
        return self.up(self.final_layer_norm(hidden[:, 0]))

    def compose_by_level(self, embeddings, children, level):
        """All compositions of a batch, bottom-up and batched by tree level.

        embeddings [B, T', d]: each position's token embedding; children [B, T', T'] bool: row t of a `)`
        position marks its direct children; level [B, T'] long: 0 for a token, 1 + its highest child's for a
        `)`, -1 for positions that are neither (grammar.batch's composition_children / composition_level).
        Returns [B, T', d]: `embeddings` with every `)` position's row replaced by f(its children's rows), its
        children's rows being earlier compositions where they are constituents (hence the order by level).
        """
        highest = int(level.max()) if level.numel() else 0
        for current in range(1, highest + 1):
            rows, columns = (level == current).nonzero(as_tuple=True)  # the constituents of this level
            if not len(rows):
                continue
            which, child = children[rows, columns].nonzero(as_tuple=True)  # ordered by constituent, then position
            counts = torch.bincount(which, minlength=len(rows))
            if bool((counts == 0).any()):
                bad = int((counts == 0).nonzero()[0])
                raise ValueError(f"composition_children: the `)` at row {int(rows[bad])}, position "
                                 f"{int(columns[bad])} (composition_level {current}) has no children; expected its "
                                 "direct children's positions (grammar.batch gives them)")
            rank = torch.arange(len(which), device=which.device) - (torch.cumsum(counts, 0) - counts)[which]
            most = int(counts.max())
            gathered = embeddings.new_zeros(len(rows), most, embeddings.shape[-1])
            gathered = gathered.index_put((which, rank), embeddings[rows[which], child])
            mask = torch.zeros(len(rows), most, dtype=torch.bool, device=embeddings.device)
            mask[which, rank] = True
            embeddings = embeddings.index_put((rows, columns), self.compose(gathered, mask))
        return embeddings
