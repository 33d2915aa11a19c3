"""Paper 002's families as transformers models: DTG (its model hooks, paper 002 section 3.3) and TXL (trans).

An arc position adds the embedding of its head word's last piece. The grammar (dependency_grammars.py) names, for
each arc position, the position of its head word's last piece: `head_token_index` [B, T'] in `batch` (a family
input, -1 for none), `NewPosition.extra_inputs` in `step`. The hooks of `HeadTokenEmbeddings`, mixed into DTG's
model class, turn it into what `config.arc_representation` says (Table 4): "w+arc" adds the head's embedding to the
arc's, "w" puts it instead of the arc's, "arc" adds nothing. The batch forward, the beam-search decoder and
segment recurrence all come through `added_token_embeddings`. TXL (trans) reads the same transitions causally,
with no hook.

Hub code: imports only numpy, torch, transformers and its sibling files.
"""

import numpy as np
import torch

from .dependency_config import (
    DependencyTransformerGrammarConfig,
    DependencyTransformerXLConfig,
)
from .modeling_slm import SyntacticTransformerForCausalLM, SyntacticTransformerModel


class HeadTokenEmbeddings:
    """The family hooks of DTG's model class (see SyntacticTransformerModel for the hooks' contract)."""

    def family_embeddings(self, expanded):
        """Each arc position adds its head word's last piece (`head_token_index`, a position of its own row)."""
        slots = expanded.family_inputs.get("head_token_index")
        if slots is None:
            return None, None
        position_ids = expanded.position_ids
        head_ids = torch.where(slots >= 0, position_ids.gather(1, slots.clamp(min=0)), torch.full_like(slots, -1))
        return self.added_token_embeddings(position_ids, head_ids), None

    def added_token_embeddings(self, position_ids, token_ids):
        """[B, T', d]: where `token_ids` [B, T'] names a token (an arc's head word's last piece; -1 for none), that
        token's embedding as config.arc_representation says ("w+arc": added; "w": instead of the position's own;
        "arc": nothing, None)."""
        representation = self.config.arc_representation
        if token_ids is None or representation == "arc":
            return None
        embed = self.decoder.embed_tokens
        has_head = (token_ids >= 0)[..., None]
        added = embed(token_ids.clamp(min=0)) * has_head
        if representation == "w":
            added = added - embed(position_ids) * has_head
        return added

    def search_embeddings(self, pool, input_ids, new_slots, references, order):
        """The beam-search decoder's new positions [N, 1]: an arc's head token is the token the cache keeps at its
        head's slot (`references[:, 0]`, -1 for none)."""
        if references is None:
            return None, None
        head_slots = references[:, 0]
        with_head = np.flatnonzero(head_slots >= 0)
        if not len(with_head):
            return None, None
        head_ids = np.full((len(head_slots), 1), -1, dtype=np.int64)
        head_ids[with_head, 0] = pool.token_ids[head_slots[with_head]]
        return self.added_token_embeddings(input_ids, torch.from_numpy(head_ids).to(input_ids.device)), None


class DependencyTransformerGrammarModel(HeadTokenEmbeddings, SyntacticTransformerModel):
    """Dependency Transformer Grammar (paper 002) backbone: see SyntacticTransformerModel. Its grammar gives
    COMPOSE rows explicit relative positions and each arc position its head word's last piece, whose embedding the
    family hooks add (HeadTokenEmbeddings)."""

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


# save_pretrained copies this file, its sibling imports and its config's file into every checkpoint (hub_code.py),
# and config.auto_map names all the Auto classes (configuration_slm.family_auto_classes), so that
# AutoModel / AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True) work without hf_slm.
for _model, _causal_lm in ((DependencyTransformerGrammarModel, DependencyTransformerGrammarForCausalLM),
                          (DependencyTransformerXLModel, DependencyTransformerXLForCausalLM)):
    _model._auto_class = "AutoModel"
    _causal_lm._auto_class = "AutoModelForCausalLM"
