"""Configurations of the Transformer syntactic LMs: one backbone config, one thin subclass per family, presets.

- `SyntacticTransformerConfig`: every field of the shared backbone (modeling/backbone.py) and the grammar.
- `TransformerGrammarConfig`: Transformer Grammars (paper 000), grammar "tg".
- `TransformerXLConfig`: the Transformer-XL baselines of paper 000 over the same actions ("choe_charniak",
  TXL (CC)) or over words only ("terminals", TXL (terminals)).
- `DependencyTransformerGrammarConfig`, `DependencyTransformerXLConfig`: DTG and TXL (trans) (paper 002).
- `CompositionalSLMConfig`: paper 003's compositional variants ("bi-dn-in-m", ...) and its GPT-2 baselines.
Defaults that depend on the grammar (the clipping range of relative positions) come from the grammar class.

Hub code: copied into every checkpoint; imports nothing from hf_slm.
"""

import difflib
import inspect

from transformers import PreTrainedConfig

from .compositional_grammars import BASELINE_GRAMMARS, COMPOSITIONAL_GRAMMAR_NAMES, COMPOSITIONAL_SLM_GRAMMARS
from .dependency_grammars import DTG_GRAMMARS, TXL_TRANS_GRAMMARS
from .grammars import TRANSFORMER_GRAMMAR_GRAMMARS, TRANSFORMER_XL_GRAMMARS
from .segments import MEMORY_UPDATES

RELATIVE_ATTENTION_CHOICES = ("auto", "reference")
POSITION_ENCODINGS = ("relative", "absolute")
ARC_REPRESENTATIONS = ("w+arc", "arc", "w")  # paper 002, Table 4
DEPENDENCY_VARIANTS = ("paper", "reference")


class SyntacticTransformerConfig(PreTrainedConfig):
    """Configuration of the shared Transformer backbone; use a family's subclass.

    Args:
        vocab_size: number of action ids (word pieces, nonterminals, specials).
        hidden_size: d_model.
        num_hidden_layers: K, the number of layers.
        num_attention_heads: heads per layer; head size is hidden_size / num_attention_heads.
        intermediate_size: d_FF, the hidden size of the GELU feed-forward block.
        grammar: the grammar that expands actions into positions and rules attention (modeling/grammars.py);
            each family accepts its own (`grammars`).
        pad_token_id, bos_token_id, eos_token_id, unk_token_id, open_nt_start, open_nt_stop, close_nt_start,
            close_nt_stop: the id ranges of each action kind (see grammars.ActionLayout); the model needs no
            tokenizer.
        vocabulary_fingerprint: the `vocabulary_fingerprint` of the tokenizer the model was trained with
            (None: unknown); a tokenizer with another vocabulary is refused even if its id ranges agree.
        position_encoding: "relative" (Transformer-XL: s_ij = (q_i+u)k_j + (q_i+v) W_R r(R_ij), R from the
            grammar) or "absolute" (GPT-2: learned embeddings of each position's index, added to the input).
        min_relative_position, max_relative_position: relative positions are clipped to this range before
            their sinusoid embedding. None: the grammar's default (TG: [-1, 62], 64 values as the reference;
            the causal grammars: [0, max_sequence_length - 1], never clipped).
        max_sequence_length: the longest expanded sequence the model accepts (longer inputs raise).
        document_level: one sequence is a whole document, its sentences' trees after a single `<s>`
            (paper 000, section 3.1; build them with `tokenizer.encode_document`). Under TG each new
            sentence sees the earlier ones through their composed roots. Sentence-level models (False)
            read one tree per sequence. A document must fit in max_sequence_length, unless the model reads
            it in segments through a memory (segment_length).
        segment_length: None (the default): the model reads each sequence whole. An int L >= 1: the model was
            trained with Transformer-XL segment recurrence (paper 000, section 2.2 and Appendix A; modeling/
            segments.py and segment_recurrence.py): it reads a sequence in segments of L positions, each
            attending a memory that the segments before it filled, so a sequence may be longer than
            max_sequence_length; scoring and the beam search read it the same way. Needs relative positions and
            a grammar that supports segments (grammar.supports_segments: not paper 003's Ex variants).
        memory_length: the memory's slots M >= 0 with segment_length (None: M = L, as the reference).
        memory_update: how the memory is filled after a segment, with segment_length: "structure" (the most
            recent positions still on the grammar's stack; a grammar with a stack or a causal one) or "shift" (the
            M positions right before the next segment, Transformer-XL's); None: the grammar's
            default_memory_update ("structure" for TG and DTG, "shift" for the others).
        embedding_dropout: dropout on the input embeddings.
        core_dropout: dropout inside every layer: attention weights, the relative position encodings,
            the attention output, the feed-forward hidden layer and its output.
        attention_dropout: dropout on the attention weights and relative position encodings when it should
            differ from core_dropout (None: core_dropout, as the reference). On CPUs, attention-weight
            dropout forces PyTorch's unfused attention kernel, so it is costly.
        final_dropout: dropout on the last hidden states, before the output softmax layer.
        pre_layer_norm: pre-LN layers (LayerNorm before each sub-layer and a final LayerNorm) instead of the
            reference's post-LN.
        num_unrestricted_heads: per layer, the last heads use a plain causal mask with relative position
            i - j (head-level hybrid, paper 000 section 2.4).
        num_unrestricted_layers: the top layers use a plain causal mask with relative position i - j
            (layer-level hybrid).
        distinct_compose_attention: separate attention parameters for COMPOSE positions ("TG (distinct
            MHA)", paper 000 Table 2).
        relative_attention: how the relative term is computed: "auto" (the fastest exact kernel for the
            input) or "reference" (explicit scores, gather and masked softmax; slow, for tests).
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: standard deviation of the normal initialization of embeddings.
        init_scale: variance scale of the fan-in initialization of linear layers (the reference uses
            2 / num_hidden_layers when None).
    """

    model_type = "syntactic_transformer"
    # The grammars a family accepts, by name (its config's `grammar`), its default first. Hub code finds a
    # config's grammar here (grammars.grammar_for_config); hf_slm's family registry finds them here too.
    grammar_classes = {**TRANSFORMER_GRAMMAR_GRAMMARS, **TRANSFORMER_XL_GRAMMARS}
    auto_classes = {}  # Auto class -> "file.Class", filled by each family

    def __init__(
        self,
        vocab_size=32768,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        intermediate_size=1024,
        grammar=None,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        unk_token_id=None,
        open_nt_start=4,
        open_nt_stop=4,
        close_nt_start=4,
        close_nt_stop=4,
        min_relative_position=None,
        max_relative_position=None,
        max_sequence_length=1024,
        document_level=False,
        embedding_dropout=0.1,
        core_dropout=0.1,
        final_dropout=0.1,
        attention_dropout=None,
        pre_layer_norm=False,
        num_unrestricted_heads=0,
        num_unrestricted_layers=0,
        distinct_compose_attention=False,
        position_encoding="relative",
        relative_attention="auto",
        layer_norm_eps=1e-5,
        initializer_range=0.02,
        init_scale=None,
        tie_word_embeddings=True,
        vocabulary_fingerprint=None,
        segment_length=None,
        memory_length=None,
        memory_update=None,
        **kwargs,
    ):
        grammar = self.default_grammar_name() if grammar is None else grammar
        if grammar not in self.grammar_classes:
            takers = [config.__name__ for config in _family_configs() if grammar in config.grammar_classes]
            hint = f"use {' or '.join(takers)}" if takers else "another family's grammar needs that family's config"
            raise ValueError(f"{type(self).__name__} does not take grammar {grammar!r}; expected one of "
                             f"{list(self.grammar_classes)} ({hint}: hf_slm.config_for_grammar picks it)")
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got {position_encoding!r}")
        if relative_attention not in RELATIVE_ATTENTION_CHOICES:
            raise ValueError(f"relative_attention must be one of {RELATIVE_ATTENTION_CHOICES}, got {relative_attention!r}")
        if distinct_compose_attention and not self.grammar_classes[grammar].duplicates_closing:
            raise ValueError(f"distinct_compose_attention needs COMPOSE positions; the {grammar!r} grammar has none")
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_attention_heads {num_attention_heads}")
        if not 0 <= num_unrestricted_heads <= num_attention_heads:
            raise ValueError(f"num_unrestricted_heads must be in [0, {num_attention_heads}], got {num_unrestricted_heads}")
        if not 0 <= num_unrestricted_layers <= num_hidden_layers:
            raise ValueError(f"num_unrestricted_layers must be in [0, {num_hidden_layers}], got {num_unrestricted_layers}")
        _check_segment_fields(self.grammar_classes[grammar], segment_length, memory_length, memory_update,
                              position_encoding)
        self.vocab_size = vocab_size
        self.vocabulary_fingerprint = vocabulary_fingerprint
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.grammar = grammar
        self.open_nt_start = open_nt_start
        self.open_nt_stop = open_nt_stop
        self.close_nt_start = close_nt_start
        self.close_nt_stop = close_nt_stop
        default_min, default_max = self.grammar_classes[grammar].relative_position_range
        if min_relative_position is None:
            min_relative_position = default_min
        if max_relative_position is None:
            max_relative_position = max_sequence_length - 1 if default_max is None else default_max
        if min_relative_position > max_relative_position:
            raise ValueError(f"min_relative_position {min_relative_position} > max_relative_position {max_relative_position}")
        self.min_relative_position = min_relative_position
        self.max_relative_position = max_relative_position
        self.max_sequence_length = max_sequence_length
        self.document_level = bool(document_level)
        self.embedding_dropout = embedding_dropout
        self.core_dropout = core_dropout
        self.final_dropout = final_dropout
        self.attention_dropout = attention_dropout
        self.pre_layer_norm = pre_layer_norm
        self.num_unrestricted_heads = num_unrestricted_heads
        self.num_unrestricted_layers = num_unrestricted_layers
        self.distinct_compose_attention = distinct_compose_attention
        self.position_encoding = position_encoding
        self.relative_attention = relative_attention
        self.unk_token_id = unk_token_id
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.init_scale = init_scale
        self.segment_length, self.memory_length, self.memory_update = segment_length, memory_length, memory_update
        # Every Auto class a checkpoint serves, for trust_remote_code loading without hf_slm installed
        # (transformers records only the saved class by itself).
        kwargs.setdefault("auto_map", dict(self.auto_classes))
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def default_grammar_name(cls):
        return next(iter(cls.grammar_classes))

    @classmethod
    def check_fields(cls, fields):
        """Raise ValueError for a field this config does not know, or a value of another type (check_config_fields)."""
        check_config_fields(fields, cls)


def _check_segment_fields(rules, segment_length, memory_length, memory_update, position_encoding):
    """ValueError naming the field unless the segment options are ones a model of the grammar class `rules` reads
    (SyntacticTransformerConfig's docstring)."""
    if segment_length is None:
        for name, value in (("memory_length", memory_length), ("memory_update", memory_update)):
            if value is not None:
                raise ValueError(f"{name}={value!r} needs segment_length (the memory of segment recurrence)")
        return
    if isinstance(segment_length, bool) or not isinstance(segment_length, int) or segment_length < 1:
        raise ValueError(f"segment_length must be None or a whole number of positions >= 1, got {segment_length!r}")
    if memory_length is not None and (isinstance(memory_length, bool) or not isinstance(memory_length, int)
                                      or memory_length < 0):
        raise ValueError(f"memory_length must be None or a whole number of slots >= 0, got {memory_length!r}")
    if memory_update not in (None, *MEMORY_UPDATES):
        raise ValueError(f"memory_update must be None or one of {MEMORY_UPDATES}, got {memory_update!r}")
    if not rules.supports_segments:
        raise ValueError(f"segment_length: the {rules.name} grammar has no segment recurrence (grammar.supports_segments)")
    if position_encoding != "relative":
        raise ValueError(f"segment_length needs position_encoding='relative' (absolute position embeddings index the "
                         f"whole sequence), got {position_encoding!r}")
    if memory_update == "structure" and not (rules.has_stack or rules.causal):
        raise ValueError(f"memory_update='structure' needs the grammar's stack, and the {rules.name} grammar has none "
                         "(has_stack); expected 'shift'")


def _family_configs():
    """Every config class defined over the backbone (this module's and any other family's that is imported), for
    messages: the subclasses of SyntacticTransformerConfig, depth first."""
    found, pending = [], list(SyntacticTransformerConfig.__subclasses__())
    while pending:
        config = pending.pop(0)
        found.append(config)
        pending[:0] = config.__subclasses__()
    return found


def position_limit(config):
    """(the most positions the model reads in one sequence, the config field that says so):
    config.max_sequence_length, or max_position_embeddings for a config that has only transformers' name; (None,
    None) for a model with segment recurrence (config.segment_length), which reads any length through its memory.
    The search's constraints and the evaluations' length checks both read it, for any model's config: one of another
    kind (SyntacticOrderedMemoryConfig's, transformers') may lack these fields, hence getattr."""
    if getattr(config, "segment_length", None):
        return None, None
    for name in ("max_sequence_length", "max_position_embeddings"):
        if getattr(config, name, None):
            return int(getattr(config, name)), name
    return None, None


def family_auto_classes(prefix):
    """The auto_map of a family whose classes are {prefix}Config, {prefix}Model and {prefix}ForCausalLM."""
    return {
        "AutoConfig": f"configuration_slm.{prefix}Config",
        "AutoModel": f"modeling_slm.{prefix}Model",
        "AutoModelForCausalLM": f"modeling_slm.{prefix}ForCausalLM",
    }


class TransformerGrammarConfig(SyntacticTransformerConfig):
    """Transformer Grammars (paper 000): grammar "tg", STACK/COMPOSE attention, depth relative positions."""

    model_type = "transformer_grammar"
    grammar_classes = TRANSFORMER_GRAMMAR_GRAMMARS
    auto_classes = family_auto_classes("TransformerGrammar")

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


class TransformerXLConfig(SyntacticTransformerConfig):
    """Transformer-XL language models, paper 000's baselines: causal attention with relative position i - j
    over the TG actions ("choe_charniak": TXL (CC)) or over words only ("terminals": TXL (terminals))."""

    model_type = "slm_transformer_xl"
    grammar_classes = TRANSFORMER_XL_GRAMMARS
    auto_classes = family_auto_classes("TransformerXL")

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


class DependencyTransformerGrammarConfig(SyntacticTransformerConfig):
    """Dependency Transformer Grammars (paper 002): grammars "dtg" (arc-standard), "dtg_eager", "dtg_swift"
    (modeling/dependency_grammars.py), over a DependencyTokenizer's vocabulary.

    Args (besides SyntacticTransformerConfig's; its nonterminal ranges are unused):
        root_token_id, left_arc_start, left_arc_stop, right_arc_start, right_arc_stop, pop_token_id,
            continuation_ids: the id layout (dependency_grammars.DependencyLayout, a DependencyTokenizer's
            `action_layout`): `<root>`, LA[1..K], RA[1..K], POP, and the pieces that continue a word.
        dependency_variant: "paper", or "reference" (arc-standard as in the authors' released code).
        arc_representation: what an arc position reads (paper 002, section 3.3 and Table 4): "w+arc" (the arc's
            embedding plus that of the head word's last piece), "arc" (the arc's only) or "w" (the head's only).
    """

    model_type = "dependency_transformer_grammar"
    grammar_classes = DTG_GRAMMARS
    auto_classes = family_auto_classes("DependencyTransformerGrammar")

    def __init__(self, root_token_id=4, left_arc_start=5, left_arc_stop=6, right_arc_start=6, right_arc_stop=7,
                 pop_token_id=7, continuation_ids=None, dependency_variant="paper", arc_representation="w+arc",
                 **kwargs):
        if dependency_variant not in DEPENDENCY_VARIANTS:
            raise ValueError(f"dependency_variant must be one of {DEPENDENCY_VARIANTS}, got {dependency_variant!r}")
        if arc_representation not in ARC_REPRESENTATIONS:
            raise ValueError(f"arc_representation must be one of {ARC_REPRESENTATIONS}, got {arc_representation!r}")
        if kwargs.get("document_level"):
            rules = self.grammar_classes.get(kwargs.get("grammar") or self.default_grammar_name())
            if rules is not None:
                rules.check_document_level(dependency_variant)
        self.root_token_id, self.pop_token_id = root_token_id, pop_token_id
        self.left_arc_start, self.left_arc_stop = left_arc_start, left_arc_stop
        self.right_arc_start, self.right_arc_stop = right_arc_start, right_arc_stop
        self.continuation_ids = list(continuation_ids or [])
        self.dependency_variant, self.arc_representation = dependency_variant, arc_representation
        super().__init__(**kwargs)


class DependencyTransformerXLConfig(DependencyTransformerGrammarConfig):
    """TXL (trans), paper 002's baseline: a Transformer-XL over DTG's arc-standard transition sequences (grammar
    "txl_trans": causal attention, relative positions i - j, no head embeddings, so arc_representation is
    unused), over a DependencyTokenizer's vocabulary."""

    model_type = "dependency_transformer_xl"
    grammar_classes = TXL_TRANS_GRAMMARS
    auto_classes = family_auto_classes("DependencyTransformerXL")

    def __init__(self, **kwargs):  # an explicit __init__: transformers would otherwise generate a dataclass one
        super().__init__(**kwargs)


# The compositional variants that are models: all sixteen (Nb-Up's with the start pointer, modeling/start_pointer.py).
COMPOSITIONAL_MODEL_VARIANTS = COMPOSITIONAL_GRAMMAR_NAMES


class CompositionalSLMConfig(SyntacticTransformerConfig):
    """Compositional syntactic LMs of paper 003 on a GPT-2-style backbone (absolute positions): grammar = one of
    the sixteen variants `{bi,nb}-{dn,up}-{in,ex}-{m,nm}` (modeling/compositional_grammars.py) or one of the
    two baselines "gpt2-token" (words) and "gpt2-tree" (Nb-Dn trees, plain causal), over a
    CompositionalTokenizer's vocabulary (one `(` and one `)` id).

    Args (besides SyntacticTransformerConfig's):
        position_encoding: "absolute" by default, as the paper's GPT-2 backbone ("relative" is allowed, for
            comparisons).
        composer_hidden_size: width of the external composer f of the Ex variants (modeling/composer.py); the
            paper's is 256, "following GPST". The main model's embeddings are down-projected to it and f's output
            up-projected back. Unused by the other variants.
        composer_num_layers: f's Transformer layers (the paper: 4).
        composer_num_heads: f's attention heads (the paper does not say; 4 heads of 64 here).
        composer_intermediate_size: f's feed-forward width (the paper does not say; 4 x its width here).
        composer_max_children: the most children a constituent may have: f's table of child position embeddings
            (Figure 2) has this many rows. A Bi constituent has two; a longer Nb constituent is a ValueError.
    Nb-Up variants add the start pointer of section 2.2 (modeling/start_pointer.py): a learned Θ of
    [2 head_dim, 2 head_dim] over the outputs of the final layer's first two attention heads, so they need
    num_attention_heads >= 2; its loss is added to the LM loss.
    """

    model_type = "compositional_slm"
    grammar_classes = COMPOSITIONAL_SLM_GRAMMARS
    auto_classes = family_auto_classes("CompositionalSLM")

    def __init__(self, position_encoding="absolute", composer_hidden_size=256, composer_num_layers=4,
                 composer_num_heads=4, composer_intermediate_size=1024, composer_max_children=128, **kwargs):
        if composer_hidden_size % composer_num_heads:
            raise ValueError(f"composer_hidden_size {composer_hidden_size} is not a multiple of composer_num_heads "
                             f"{composer_num_heads}")
        if composer_max_children < 2:
            raise ValueError(f"composer_max_children must be at least 2 (a binary constituent), got "
                             f"{composer_max_children}")
        self.composer_hidden_size = composer_hidden_size
        self.composer_num_layers = composer_num_layers
        self.composer_num_heads = composer_num_heads
        self.composer_intermediate_size = composer_intermediate_size
        self.composer_max_children = composer_max_children
        super().__init__(position_encoding=position_encoding, **kwargs)
        if self.grammar_classes[self.grammar].takes_start and self.num_attention_heads < 2:
            raise ValueError(f"grammar {self.grammar!r} points at each constituent's start from the outputs of the final "
                             "layer's first two attention heads (paper 003, section 2.2): num_attention_heads must be "
                             f"at least 2, got {self.num_attention_heads}")


def check_config_fields(fields, config_class=SyntacticTransformerConfig):
    """Raise ValueError for a field `config_class` (a family's config) does not know, naming the closest ones,
    or a value whose type differs from the field's default (ints are accepted where floats are)."""
    parameters = {}
    for cls in reversed(config_class.__mro__):  # a family's fields, its parent families' and the backbone's
        if issubclass(cls, SyntacticTransformerConfig):
            parameters.update(inspect.signature(cls.__init__).parameters)
    known = [name for name in parameters if name not in ("self", "kwargs")]
    for name, value in fields.items():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else f"; known fields: {', '.join(known)}"
            raise ValueError(f"unknown config field {name!r}{hint}")
        default = parameters[name].default
        if default is None or value is None:
            continue
        expected = (int, float) if type(default) is float else type(default)
        if not isinstance(value, expected) or (type(default) is not bool and isinstance(value, bool)):
            raise ValueError(f"config field {name}={value!r}: expected {type(default).__name__} "
                             f"(like the default {default!r})")


# Paper 000, Appendix B (Figure 9). In the PTB column the figure gives two settings: one for TXL (terminals)
# and one shared by TXL (CC) and TG (vocabulary 23,888 vs 23,835, for instance). Training settings
# (batch size in sequences, segment length, steps, warm-up, learning rates) go with each preset for
# `hf-slm train`; gradients are clipped to norm 3 and Adam uses betas (0.9, 0.999), as the reference.
_PTB_SYNTACTIC = dict(
    model=dict(vocab_size=23888, hidden_size=192, intermediate_size=768, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.34, core_dropout=0.19, final_dropout=0.45),
    training=dict(batch_size=64, sequence_length=192, max_steps=50_000, warmup_steps=6_000,
                  initial_learning_rate=1e-7, learning_rate=7.1e-4, final_learning_rate=3e-7),
)
_PTB_TERMINALS = dict(
    model=dict(vocab_size=23835, hidden_size=192, intermediate_size=768, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.25, core_dropout=0.24, final_dropout=0.49),
    training=dict(batch_size=64, sequence_length=80, max_steps=50_000, warmup_steps=6_000,
                  initial_learning_rate=1e-7, learning_rate=6.4e-4, final_learning_rate=3e-7),
)
_BLLIP = dict(
    model=dict(vocab_size=32768, hidden_size=1024, intermediate_size=4096, num_hidden_layers=16,
               num_attention_heads=8, embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.1),
    training=dict(batch_size=64, sequence_length=256, max_steps=100_000, warmup_steps=8_000,
                  initial_learning_rate=1e-7, learning_rate=1.5e-4, final_learning_rate=3e-7),
)


# A CPU-sized setting for trying a pipeline end to end (e.g. DTG on UD English EWT). TG has no such preset; these
# are the sizes of its quickstart model (hf_slm/quickstart.py), with attention-weight dropout off because on CPUs
# it forces PyTorch's unfused attention kernel. 1024 positions: EWT's longest training tree expands to 608 under DTG.
_TINY = dict(
    model=dict(vocab_size=2000, hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
               embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.1, attention_dropout=0.0,
               max_sequence_length=1024),
    training=dict(batch_size=16, sequence_length=1024, max_steps=2_000, warmup_steps=200,
                  initial_learning_rate=1e-7, learning_rate=1e-3, final_learning_rate=3e-7),
)
# Paper 002, section 4: its models train with TG's hyper-parameters (16 layers, 252M parameters: the BLLIP
# setting) and "a multiplier of 2.0 to the learning rate of embedding weights" (hf_slm.training.make_optimizer;
# the embedding is tied to the output layer, so that one matrix gets it). The paper states it for the models it
# trains, baselines not excepted, so the TXL (trans) twins keep it: a twin differs in its grammar only. The
# other presets' multiplier is 1.0 (no separate embedding learning rate, as TG).
_DTG_TRAINING = dict(embedding_learning_rate_multiplier=2.0)


# Paper 003, section 3 and appendix A: GPT-2 small for every model (768-d, 12 layers, 12 heads, 3072-d feed-forward,
# pre-LN, dropout 0.1, absolute positions), a cutoff of 2048 positions for the SLMs and 1024 for GPT2-token, and
# "a fixed learning rate of 5e-5". The paper's vocabulary is GPT-2's BPE (50,257 tokens); here 50,257 is the number
# of SentencePiece pieces a new tokenizer is asked for. It gives no batch size ("modified to fit the GPU memory")
# nor step count: 16 sequences and 100,000 steps are this library's choice.
_GPT2_SMALL = dict(
    model=dict(vocab_size=50257, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
               embedding_dropout=0.1, core_dropout=0.1, final_dropout=0.0, pre_layer_norm=True,
               max_sequence_length=2048),
    training=dict(batch_size=16, sequence_length=2048, max_steps=100_000, warmup_steps=0,
                  initial_learning_rate=5e-5, learning_rate=5e-5, final_learning_rate=5e-5),
)
# The CPU-sized twins (tests, examples): _TINY's sizes, pre-LN and absolute positions as GPT-2.
_GPT2_TINY = dict(model=dict(_TINY["model"], pre_layer_norm=True), training=dict(_TINY["training"]))


# Paper 003, section 3: the Ex variants' composer is "a relatively small Transformer ... input dimension 256 and
# 4 layers, following (Hu et al., 2024)"; heads and feed-forward width are this library's choice. The tiny twin
# keeps the same ratio to its 128-d main model (half its width).
_COMPOSER_PAPER = dict(composer_hidden_size=256, composer_num_layers=4, composer_num_heads=4,
                       composer_intermediate_size=1024)
_COMPOSER_TINY = dict(composer_hidden_size=64, composer_num_layers=2, composer_num_heads=4,
                      composer_intermediate_size=256)


def _compositional_presets():
    """`{variant}` (GPT-2 small) and `{variant}-tiny` for every compositional model and both baselines."""
    presets = {}
    for name in COMPOSITIONAL_MODEL_VARIANTS + tuple(sorted(BASELINE_GRAMMARS)):
        what = {"gpt2-token": "GPT2-token (words)", "gpt2-tree": "GPT2-tree (Nb-Dn trees, causal)"}.get(
            name, "-".join(part.capitalize() for part in name.split("-")))
        small = dict(_GPT2_SMALL["model"], max_sequence_length=1024) if name == "gpt2-token" else _GPT2_SMALL["model"]
        training = dict(_GPT2_SMALL["training"], sequence_length=small["max_sequence_length"])
        presets[name] = _preset(dict(model=small, training=training), name,
                                f"{what}, paper 003's GPT-2 small setting: 12 layers, d 768, 12 heads")
        presets[f"{name}-tiny"] = _preset(_GPT2_TINY, name, f"{what} for CPUs: 4 layers, d 128")
        if "-ex-" in name:  # the composer: the paper's (256-d, 4 layers) beside GPT-2 small, a small one beside tiny
            presets[name]["model"].update(_COMPOSER_PAPER)
            presets[name]["description"] += "; composer 256-d, 4 layers"
            presets[f"{name}-tiny"]["model"].update(_COMPOSER_TINY)
            presets[f"{name}-tiny"]["description"] += "; composer 64-d, 2 layers"
    return presets


def _preset(base, grammar, description, **training):
    return {"description": description, "model": dict(base["model"], grammar=grammar),
            "training": dict(base["training"], **training)}


# Presets by family (hf_slm/families records name them; hf_slm.all_presets() lists every family's).
TRANSFORMER_GRAMMAR_PRESETS = {
    "tg-ptb": _preset(_PTB_SYNTACTIC, "tg", "TG, PTB setting of paper 000 (Figure 9): 16 layers, d 192, ~12M parameters"),
    "tg-bllip": _preset(_BLLIP, "tg", "TG, BLLIP-LG setting of paper 000: 16 layers, d 1024, 251,887,616 parameters"),
}
TRANSFORMER_XL_PRESETS = {
    "txl-cc-ptb": _preset(_PTB_SYNTACTIC, "choe_charniak", "TXL (CC) twin of tg-ptb"),
    "txl-terminals-ptb": _preset(_PTB_TERMINALS, "terminals", "TXL (terminals) twin of tg-ptb (its own dropouts and LR)"),
    "txl-cc-bllip": _preset(_BLLIP, "choe_charniak", "TXL (CC) twin of tg-bllip"),
    "txl-terminals-bllip": _preset(_BLLIP, "terminals", "TXL (terminals) twin of tg-bllip"),
}
# DTG (paper 002); --set grammar=dtg_eager or dtg_swift for DTG-eager / DTG-swift with the same settings.
DEPENDENCY_TRANSFORMER_GRAMMAR_PRESETS = {
    "dtg-ptb": _preset(_PTB_SYNTACTIC, "dtg", "DTG, tg-ptb's setting, embedding LR x2 (paper 002, section 4)",
                       **_DTG_TRAINING),
    "dtg-bllip": _preset(_BLLIP, "dtg", "DTG, paper 002's setting: tg-bllip's (252M parameters), embedding LR x2",
                         **_DTG_TRAINING),
    "dtg-tiny": _preset(_TINY, "dtg", "DTG for CPUs: 4 layers, d 128 (the quickstart's sizes), embedding LR x2",
                        **_DTG_TRAINING),
}
DEPENDENCY_TRANSFORMER_XL_PRESETS = {
    "txl-trans-ptb": _preset(_PTB_SYNTACTIC, "txl_trans", "TXL (trans) twin of dtg-ptb", **_DTG_TRAINING),
    "txl-trans-bllip": _preset(_BLLIP, "txl_trans", "TXL (trans) twin of dtg-bllip (paper 002's baseline)",
                               **_DTG_TRAINING),
    "txl-trans-tiny": _preset(_TINY, "txl_trans", "TXL (trans) twin of dtg-tiny", **_DTG_TRAINING),
}
# Paper 003: the compositional variants, and the GPT2-token / GPT2-tree baselines.
COMPOSITIONAL_PRESETS = _compositional_presets()


TransformerGrammarConfig._auto_class = "AutoConfig"
TransformerXLConfig._auto_class = "AutoConfig"
DependencyTransformerGrammarConfig._auto_class = "AutoConfig"
DependencyTransformerXLConfig._auto_class = "AutoConfig"
CompositionalSLMConfig._auto_class = "AutoConfig"
