"""The configurations that every grammar family's config extends (configuration_base.SyntacticModelConfig beneath).

- `SyntacticGrammarConfig`: what any model over a grammar's actions configures, whatever computes its predictions:
  the grammar, the id layout its tokenizer fixes, where words begin, the longest sequence. A family that is not a
  Transformer (RNNG, hf_slm/families/recurrent_grammars) extends it with its own sizes.
- `SyntacticTransformerConfig`: the grammar config with every field of the shared backbone (modeling/backbone.py)
  and the segment options. A Transformer family's config (in the family's own file) subclasses it.
  Either way a family's config names the grammars it takes (`grammar_classes`), its `model_type` and its
  `auto_classes` (`family_auto_classes`); it may add fields.
- `check_config_fields`: a family config's fields by name, with the closest ones for a misspelling.
- `position_limit`: how many positions a model reads in one sequence, for any model's config.
Defaults that depend on the grammar (the clipping range of relative positions) come from the grammar class.

Hub code: copied into every checkpoint; imports nothing from hf_slm.
"""

import difflib
import inspect

from .configuration_base import SyntacticModelConfig
from .segments import MEMORY_UPDATES, check_segments_carry_inputs

RELATIVE_ATTENTION_CHOICES = ("auto", "reference")
POSITION_ENCODINGS = ("relative", "absolute")
# The feed-forward activation (transformers' names): "gelu", the exact erf form; "gelu_pytorch_tanh", the tanh
# approximation (jax.nn.gelu's default, which paper 000's reference uses; GPT-2's gelu_new, paper 003's); "relu"
# (paper 002's released code).
FEED_FORWARD_ACTIVATIONS = ("gelu", "gelu_pytorch_tanh", "relu")
# How hybrid (unrestricted) heads read a memory slot under segment recurrence: at its true distance, or at the
# reference's (its slots as the positions right before the segment). SyntacticTransformerConfig's docstring says which.
UNRESTRICTED_MEMORY_READINGS = ("distance", "shift")


class SyntacticGrammarConfig(SyntacticModelConfig):
    """What every model over a grammar's actions configures; use a family's subclass (module docstring).

    Args (besides SyntacticModelConfig's: vocab_size, the number of action ids (word pieces, nonterminals, specials),
    the special ids, the vocabulary's fingerprint, tied embeddings):
        grammar: the grammar of the model's actions (its legality; for a Transformer, its attention and positions);
            each family accepts its own (`grammar_classes`, the default first).
        open_nt_start, open_nt_stop, close_nt_start, close_nt_stop: with the special ids, the id ranges of each
            action kind (see grammars.ActionLayout); the model needs no tokenizer.
        max_sequence_length: the longest expanded sequence the model accepts (longer inputs raise).
        document_level: one sequence is a whole document, its sentences' trees after a single `<s>`
            (paper 000, section 3.1; build them with `tokenizer.encode_document`); False: one tree per sequence.
        word_start_ranges: where words begin in the vocabulary, so that `generate` tells a new word from the next
            piece of the current one without the tokenizer: [start, stop) id ranges of the pieces that begin a word
            (the runs of the tokenizer's `word_start_mask`; `word_boundary_fields` writes them). None: not recorded
            (checkpoints saved before the field), and `generate` then needs `tokenizer=`.
        incomplete_word_ids: the pieces that begin a word but spell none of it (the tokenizer's
            `incomplete_word_ids`: SentencePiece's bare word-boundary piece), which a generated word must not end on;
            recorded with word_start_ranges.
    """

    model_type = "syntactic_grammar_model"
    # The grammars a family accepts, by name (its config's `grammar`), its default first. Hub code finds a
    # config's grammar here (grammars.grammar_for_config); hf_slm's family registry finds them here too. The
    # base configs take none: a config is a family's.
    grammar_classes = {}
    # Whether `hf-slm train --pack-to` may put several sentences side by side in one sequence, each read alone: a
    # model whose attention the grammar's structure restricts (a Transformer's) can; a recurrent one reads a row
    # as one sequence.
    reads_packed_sentences = False
    segment_length = None  # a family without segment recurrence reads each sequence whole

    def __init__(
        self,
        vocab_size=32768,
        grammar=None,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        unk_token_id=None,
        open_nt_start=4,
        open_nt_stop=4,
        close_nt_start=4,
        close_nt_stop=4,
        max_sequence_length=1024,
        document_level=False,
        vocabulary_fingerprint=None,
        word_start_ranges=None,
        incomplete_word_ids=None,
        tie_word_embeddings=True,
        **kwargs,
    ):
        self.grammar = self.checked_grammar(grammar)
        self.word_start_ranges = _checked_ranges(word_start_ranges, vocab_size)
        self.incomplete_word_ids = None if incomplete_word_ids is None else [int(i) for i in incomplete_word_ids]
        self.open_nt_start = open_nt_start
        self.open_nt_stop = open_nt_stop
        self.close_nt_start = close_nt_start
        self.close_nt_stop = close_nt_stop
        self.max_sequence_length = max_sequence_length
        self.document_level = bool(document_level)
        super().__init__(vocab_size=vocab_size, pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id, unk_token_id=unk_token_id,
                         vocabulary_fingerprint=vocabulary_fingerprint, tie_word_embeddings=tie_word_embeddings,
                         **kwargs)

    @classmethod
    def checked_grammar(cls, grammar):
        """`grammar` (None: the family's default) if the family takes it; ValueError naming the family that does."""
        grammar = cls.default_grammar_name() if grammar is None else grammar
        if grammar not in cls.grammar_classes:
            takers = [config.__name__ for config in _family_configs() if grammar in config.grammar_classes]
            hint = f"use {' or '.join(takers)}" if takers else "another family's grammar needs that family's config"
            raise ValueError(f"{cls.__name__} does not take grammar {grammar!r}; expected one of "
                             f"{list(cls.grammar_classes)} ({hint}: hf_slm.config_for_grammar picks it)")
        return grammar

    @classmethod
    def default_grammar_name(cls):
        """The family's default grammar (the first of grammar_classes)."""
        if not cls.grammar_classes:
            raise ValueError(f"{cls.__name__} takes no grammar: a base config is extended by each family's "
                             "(hf_slm.config_for_grammar picks it)")
        return next(iter(cls.grammar_classes))

    @classmethod
    def check_fields(cls, fields):
        """Raise ValueError for a field this config does not know, or a value of another type (check_config_fields)."""
        check_config_fields(fields, cls)


class SyntacticTransformerConfig(SyntacticGrammarConfig):
    """Configuration of the shared Transformer backbone; use a family's subclass.

    Args (besides SyntacticGrammarConfig's: the grammar, which here also rules attention and positions, the id
    layout, the vocabulary's fingerprint and word boundaries, max_sequence_length and document_level; under TG
    each new sentence of a document sees the earlier ones through their composed roots, and a document must fit in
    max_sequence_length unless the model reads it in segments through a memory, segment_length):
        hidden_size: d_model.
        num_hidden_layers: K, the number of layers.
        num_attention_heads: heads per layer; head size is hidden_size / num_attention_heads.
        intermediate_size: d_FF, the hidden size of the GELU feed-forward block.
        position_encoding: "relative" (Transformer-XL: s_ij = (q_i+u)k_j + (q_i+v) W_R r(R_ij), R from the
            grammar) or "absolute" (GPT-2: learned embeddings of each position's index, added to the input).
        min_relative_position, max_relative_position: relative positions are clipped to this range before
            their sinusoid embedding. None: the grammar's default (TG: [-1, 62], 64 values as the reference;
            the causal grammars: [0, max_sequence_length - 1], never clipped: with segments, a config whose
            segment + memory (L + M positions) exceed it is refused, check_segment_position_range).
        segment_length: None (the default): the model reads each sequence whole. An int L >= 1: the model was
            trained with Transformer-XL segment recurrence (paper 000, section 2.2 and Appendix A; modeling/
            segments.py and segment_recurrence.py): it reads a sequence in segments of L positions, each
            attending a memory that the segments before it filled, so a sequence may be longer than
            max_sequence_length; scoring and the beam search read it the same way. Needs relative positions and
            a grammar that supports segments (grammar.supports_segments: not paper 003's Ex variants) and reads
            nothing beside the action ids (grammar.action_inputs: not paper 003's Nb-Up variants, whose start
            pointer a segment's data does not carry).
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
        core_dropout_on_embeddings: apply core_dropout to the embeddings after embedding_dropout, as paper 000's
            reference does (a rate of e + c - e c in all: 0.19 at BLLIP's 0.1 and 0.1); its presets set it.
        hidden_act: the feed-forward block's activation: "gelu" (exact, erf; the default, which configs saved
            before the field computed), "gelu_pytorch_tanh" (the tanh approximation: paper 000's reference, whose
            jax.nn.gelu approximates by default, and paper 003's GPT-2, gelu_new) or "relu" (paper 002's released
            code). Each family's presets take its paper's.
        pre_layer_norm: pre-LN layers (LayerNorm before each sub-layer and a final LayerNorm) instead of the
            reference's post-LN.
        num_unrestricted_heads: per layer, the last heads use a plain causal mask with relative position
            i - j (head-level hybrid, paper 000 section 2.4).
        num_unrestricted_layers: the top layers use a plain causal mask with relative position i - j
            (layer-level hybrid).
        unrestricted_memory_reading: with segment_length, the relative position at which hybrid heads and layers
            read a memory slot. "distance" (the default): its true distance i - j in the document, the linear
            distance hybrid heads exist to see. "shift": paper 000's reference's reading, its relative shift over the
            memory, which reads the memory's real slots, most recent last, as the positions right before the
            segment (under the structure memory, the most recent stack element is then at distance i + 1 wherever
            it lies). The two agree under the "shift" memory update, whose slots are those positions. (The beam
            search continues a document prefix read through the memory at true distances either way: its own
            positions are not cut into segments.)
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
    reads_packed_sentences = True  # its grammar's structure reads each packed sentence alone (hf_slm/data/packing.py)

    def __init__(
        self,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=8,
        intermediate_size=1024,
        grammar=None,
        min_relative_position=None,
        max_relative_position=None,
        max_sequence_length=1024,
        embedding_dropout=0.1,
        core_dropout=0.1,
        final_dropout=0.1,
        attention_dropout=None,
        hidden_act="gelu",
        core_dropout_on_embeddings=False,
        pre_layer_norm=False,
        num_unrestricted_heads=0,
        num_unrestricted_layers=0,
        unrestricted_memory_reading="distance",
        distinct_compose_attention=False,
        position_encoding="relative",
        relative_attention="auto",
        layer_norm_eps=1e-5,
        initializer_range=0.02,
        init_scale=None,
        segment_length=None,
        memory_length=None,
        memory_update=None,
        **kwargs,  # SyntacticGrammarConfig's fields (vocabulary, id layout, word boundaries, document_level) and more
    ):
        grammar = self.checked_grammar(grammar)
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got {position_encoding!r}")
        if unrestricted_memory_reading not in UNRESTRICTED_MEMORY_READINGS:
            raise ValueError(f"unrestricted_memory_reading must be one of {UNRESTRICTED_MEMORY_READINGS}, got "
                             f"{unrestricted_memory_reading!r}")
        if hidden_act not in FEED_FORWARD_ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {FEED_FORWARD_ACTIVATIONS}, got {hidden_act!r}")
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
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        default_min, default_max = self.grammar_classes[grammar].relative_position_range
        if min_relative_position is None:
            min_relative_position = default_min
        if max_relative_position is None:
            max_relative_position = max_sequence_length - 1 if default_max is None else default_max
        if min_relative_position > max_relative_position:
            raise ValueError(f"min_relative_position {min_relative_position} > max_relative_position {max_relative_position}")
        self.min_relative_position = min_relative_position
        self.max_relative_position = max_relative_position
        self.embedding_dropout = embedding_dropout
        self.core_dropout = core_dropout
        self.final_dropout = final_dropout
        self.attention_dropout = attention_dropout
        self.hidden_act = hidden_act
        self.core_dropout_on_embeddings = core_dropout_on_embeddings
        self.pre_layer_norm = pre_layer_norm
        self.num_unrestricted_heads = num_unrestricted_heads
        self.num_unrestricted_layers = num_unrestricted_layers
        self.unrestricted_memory_reading = unrestricted_memory_reading
        self.distinct_compose_attention = distinct_compose_attention
        self.position_encoding = position_encoding
        self.relative_attention = relative_attention
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.init_scale = init_scale
        self.segment_length, self.memory_length, self.memory_update = segment_length, memory_length, memory_update
        super().__init__(grammar=grammar, max_sequence_length=max_sequence_length, **kwargs)
        check_segment_position_range(self)

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


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
    try:
        check_segments_carry_inputs(rules)
    except ValueError as error:
        raise ValueError(f"segment_length: {error}") from None
    if position_encoding != "relative":
        raise ValueError(f"segment_length needs position_encoding='relative' (absolute position embeddings index the "
                         f"whole sequence), got {position_encoding!r}")
    if memory_update == "structure" and not (rules.has_stack or rules.causal):
        raise ValueError(f"memory_update='structure' needs the grammar's stack, and the {rules.name} grammar has none "
                         "(has_stack); expected 'shift'")


def check_segment_position_range(config):
    """ValueError when segment recurrence would clip a relative position i - j that the reference reads unclipped.
    A position of a segment attends the memory's M slots and up to L positions of its segment, so the causal
    distances run to L + M - 1 (the reference builds its sinusoids for that range); the clip range of heads that read
    i - j must hold it: a causal grammar's (max_relative_position) and the unrestricted heads' (max_sequence_length).
    The config checks itself, and so do the segment options `hf-slm train` records (a config set up otherwise
    would compute something else, silently)."""
    if config.segment_length is None:
        return
    memory = config.segment_length if config.memory_length is None else config.memory_length
    longest = config.segment_length + memory - 1
    limits = []
    if type(config).grammar_classes[config.grammar].relative_position_range[1] is None:  # its positions are i - j
        limits.append((f"the {config.grammar} grammar's heads", "max_relative_position", config.max_relative_position,
                       longest))
    if config.num_unrestricted_heads or config.num_unrestricted_layers:
        limits.append(("the unrestricted (hybrid) heads", "max_sequence_length", config.max_sequence_length - 1,
                       longest + 1))
    for whose, field, limit, needed in limits:
        if longest > limit:
            raise ValueError(
                f"segment_length {config.segment_length} + memory_length {memory}: a position attends up to "
                f"{longest + 1} positions (its segment's and the memory's), so the relative positions i - j of "
                f"{whose} run to {longest}, beyond their clip range ({field} {getattr(config, field)}; the "
                f"reference's range covers the segment and the memory): raise {field} to {needed} or more (the "
                "sinusoids are fixed: it adds no parameters), or shorten the segment or the memory")


def _checked_ranges(ranges, vocab_size):
    """word_start_ranges as lists [start, stop) within the vocabulary, or None; ValueError naming a bad one."""
    if ranges is None:
        return None
    checked = []
    for pair in ranges:
        if len(pair) != 2 or not 0 <= int(pair[0]) < int(pair[1]) <= vocab_size:
            raise ValueError(f"word_start_ranges: {list(pair)!r} is not a range [start, stop) of ids with "
                             f"0 <= start < stop <= vocab_size ({vocab_size})")
        checked.append([int(pair[0]), int(pair[1])])
    return checked


def word_boundary_fields(tokenizer):
    """The config fields that record where words begin in `tokenizer`'s vocabulary (word_start_ranges,
    incomplete_word_ids), read from its `word_start_mask` and `incomplete_word_ids`: whoever builds a model config
    for a tokenizer writes them, so that the saved checkpoint generates whole words without its tokenizer."""
    mask = [bool(starts) for starts in tokenizer.word_start_mask]
    ranges, start = [], None
    for index, starts in enumerate(mask + [False]):
        if starts and start is None:
            start = index
        elif not starts and start is not None:
            ranges.append([start, index])
            start = None
    return {"word_start_ranges": ranges,
            "incomplete_word_ids": sorted(int(i) for i in getattr(tokenizer, "incomplete_word_ids", ()))}


def recorded_word_boundaries(config):
    """(word_start_mask: a list of bools, one per id; incomplete_word_ids) as the config records them, or None
    when it does not (a checkpoint saved before word_start_ranges, or a config of another kind)."""
    ranges = getattr(config, "word_start_ranges", None)
    if ranges is None:
        return None
    mask = [False] * config.vocab_size
    for start, stop in ranges:
        mask[start:stop] = [True] * (stop - start)
    return mask, list(getattr(config, "incomplete_word_ids", None) or ())


def _family_configs():
    """Every family's config class (this module's and any other family's that is imported), for messages: the
    subclasses of SyntacticGrammarConfig, depth first."""
    found, pending = [], list(SyntacticGrammarConfig.__subclasses__())
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


def family_auto_classes(prefix, config_file, model_file):
    """The auto_map of a family whose classes are {prefix}Config, in the hub file `config_file` (its stem, without
    .py), and {prefix}Model and {prefix}ForCausalLM, in `model_file`."""
    return {
        "AutoConfig": f"{config_file}.{prefix}Config",
        "AutoModel": f"{model_file}.{prefix}Model",
        "AutoModelForCausalLM": f"{model_file}.{prefix}ForCausalLM",
    }


def config_fields(config_class):
    """{field: its inspect.Parameter} of a family's config class: its own, its parent families' and the base
    configs'."""
    parameters = {}
    for cls in reversed(config_class.__mro__):
        if issubclass(cls, SyntacticGrammarConfig):
            parameters.update(inspect.signature(cls.__init__).parameters)
    return {name: parameter for name, parameter in parameters.items() if name not in ("self", "kwargs")}


def check_config_fields(fields, config_class=SyntacticTransformerConfig):
    """Raise ValueError for a field `config_class` (a family's config) does not know, naming the closest ones,
    or a value whose type differs from the field's default (ints are accepted where floats are)."""
    parameters = config_fields(config_class)
    known = list(parameters)
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
