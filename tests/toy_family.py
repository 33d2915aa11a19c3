"""A toy model family, written as a package outside hf-slm would write one (tests/test_families.py registers it).

The toy grammar, "toy-depth", reads Transformer Grammars' actions (labelled bracketed trees, top-down) with the
plain causal attention of TXL (CC), but with TG's relative positions: the tree-depth difference
depth(i) - depth(j) (`<s>` 0, a root 1, its children 2, a closing bracket at its opening bracket's depth). Neither
TG (its attention follows the stack) nor TXL (CC) (its relative positions are sequence distances) is this model,
so nothing of hf-slm serves it unchanged: it needs its own step rule, its own vectorized depths and its own
relative positions, the pieces every family supplies.

This file is hub code of its own: a checkpoint of the toy family carries it beside hf-slm's hub files
(modeling/hub_code.py), where the relative imports below find them; with hf-slm installed (the tests) the
absolute ones do. transformers' import check skips `try:` blocks, so a checkpoint loads without hf-slm.
"""

import numpy as np

try:  # inside a checkpoint: hf-slm's hub files lie beside this one
    from .configuration_slm import SyntacticTransformerConfig
    from .grammar_protocol import ActionKind, NewPosition, PositionKind
    from .grammars import CausalRules
    from .modeling_slm import SyntacticTransformerForCausalLM, SyntacticTransformerModel
except ImportError:  # imported by the tests, with hf-slm installed
    from hf_slm.modeling.configuration_slm import SyntacticTransformerConfig
    from hf_slm.modeling.grammar_protocol import ActionKind, NewPosition, PositionKind
    from hf_slm.modeling.grammars import CausalRules
    from hf_slm.modeling.modeling_slm import SyntacticTransformerForCausalLM, SyntacticTransformerModel

# Same kinds of positions as the actions (no duplication), by ActionKind
_POSITION_KIND = {ActionKind.BOS: PositionKind.BOS, ActionKind.OPEN_NT: PositionKind.OPEN_NT,
                  ActionKind.TERMINAL: PositionKind.TERMINAL, ActionKind.CLOSE_NT: PositionKind.CLOSE_STACK}


class DepthCausalRules(CausalRules):
    """Causal attention over bracketed trees, relative position = depth(i) - depth(j) (module docstring).

    Its legality is that of bracketed trees (inherited); what it adds is where each position sits."""

    name = "toy-depth"
    causal = False  # coordinates are depths, not sequence indices: the model asks the grammar for its structure
    relative_position_range = (-62, 62)
    relative_position_meaning = "tree-depth differences depth(i) - depth(j), under a causal mask"
    supports_segments = False  # not worked out for this toy

    def _positions_for(self, state, action_id, kind):
        # The innermost open constituent's depth is the number of open ones; a closing bracket takes its depth.
        depth = 0 if kind == ActionKind.BOS else len(state.open_ids) + (kind != ActionKind.CLOSE_NT)
        position = state.length
        state.length += 1
        state.stack_depths.append(depth)  # every position's depth, in order (the causal mask attends them all)
        attended = np.arange(position + 1, dtype=np.int64)
        return [NewPosition(action_id, _POSITION_KIND[kind], attended,
                            depth - np.array(state.stack_depths, dtype=np.int64), True, depth)]

    def _expanded_vectors(self, flat):
        expanded = super()._expanded_vectors(flat)
        opens = expanded.kinds == PositionKind.OPEN_NT
        change = opens.astype(np.int64) - (expanded.kinds == PositionKind.CLOSE_STACK)
        total = np.cumsum(change)
        starts = np.flatnonzero(expanded.local_position == 0)
        level = total - (total[starts] - change[starts])[expanded.sequence_index]  # open constituents after each
        # an opening bracket sits at the level it opens; a word, or a closing bracket (after which the level has
        # dropped to its parent's), one below
        expanded.depth = np.where(opens, level, level + 1)
        expanded.depth[expanded.kinds == PositionKind.BOS] = 0
        return expanded

    def _attention(self, vectors):
        mask, _ = super()._attention(vectors)
        depth = vectors["depth"].astype(np.int16)
        return mask, depth[:, :, None] - depth[:, None, :]

    def _coordinates(self, vectors):
        return vectors["depth"]


TOY_GRAMMARS = {"toy-depth": DepthCausalRules}


class ToyConfig(SyntacticTransformerConfig):
    """The toy family's config: the shared backbone's fields, grammar "toy-depth"."""

    model_type = "toy_depth_causal"
    grammar_classes = TOY_GRAMMARS
    auto_classes = {"AutoConfig": "toy_family.ToyConfig", "AutoModel": "toy_family.ToyModel",
                    "AutoModelForCausalLM": "toy_family.ToyForCausalLM"}

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


class ToyModel(SyntacticTransformerModel):
    config_class = ToyConfig


class ToyForCausalLM(SyntacticTransformerForCausalLM):
    config_class = ToyConfig
    base_model_class = ToyModel
