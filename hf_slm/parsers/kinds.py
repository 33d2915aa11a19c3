"""The proposal parsers hf-slm trains, one record each, as the families are one record each.

A parser kind says what `hf-slm parser train --kind NAME` builds: its config, model and tokenizer classes, the trees
it reads and draws (constituency, labelled or not, or dependency), the tree format those are written in (the format
of the language models they serve: hf_slm/families/tree_formats.py), and its sizes. Which paper drew its proposals
from which kind: hf_slm/evaluation/protocols.py, PROPOSAL_PARSERS. Generic code (training, proposals, parsing, cards,
the Auto classes) asks the record; a package that adds a parser (a discriminative RNNG) registers its own with
`register_parser_kind`. Records name their classes as "module:attribute" strings, imported on first use.
"""

from dataclasses import dataclass, field

from ..families.registry import resolve

PARSER_TOKENIZER = "hf_slm.tokenization.tokenization_parser:ProposalParserTokenizer"
PARSER_SCORER = "hf_slm.parsers.scorer:ProposalParserScorer"
PARSER_CARD = "hf_slm.parsers.card:build_parser_card"

# Sizes: "paper" follows the parser each paper cites (Zhang, Zhou and Li 2020's CRF parser; Dozat and Manning 2017's
# biaffine parser: a 3-layer BiLSTM of 400 per direction, 100-d word and character features, MLPs of 500 and 100,
# dropout 0.33); "tiny" trains on two CPU cores in minutes (the shipped samples).
_ENCODER_SIZES = {
    "paper": dict(word_embedding_size=100, char_embedding_size=50, char_hidden_size=100, lstm_hidden_size=400,
                  lstm_layers=3, embedding_dropout=0.33, lstm_dropout=0.33, mlp_dropout=0.33),
    "tiny": dict(word_embedding_size=64, char_embedding_size=32, char_hidden_size=64, lstm_hidden_size=128,
                 lstm_layers=2, embedding_dropout=0.33, lstm_dropout=0.33, mlp_dropout=0.33),
}
_CONSTITUENCY_SIZES = {
    "paper": dict(_ENCODER_SIZES["paper"], span_mlp_size=500, label_mlp_size=100, tag_mlp_size=100),
    "tiny": dict(_ENCODER_SIZES["tiny"], span_mlp_size=128, label_mlp_size=64, tag_mlp_size=64),
}
_DEPENDENCY_SIZES = {
    "paper": dict(_ENCODER_SIZES["paper"], arc_mlp_size=500, relation_mlp_size=100),
    "tiny": dict(_ENCODER_SIZES["tiny"], arc_mlp_size=128, relation_mlp_size=64),
}
# Dozat and Manning's optimizer (Adam, betas 0.9 / 0.9, learning rate 2e-3 decayed by 0.75 every 5,000 steps),
# gradients clipped at norm 5. With a pretrained encoder: 5e-5 for the encoder, 20 times that for the scorers,
# a linear warm-up over the first tenth of the steps and a linear decay (what parsers over RoBERTa are trained with).
SCHEDULES = {
    "paper": dict(batch_size=64, max_steps=50_000, learning_rate=2e-3),
    "tiny": dict(batch_size=32, max_steps=1_500, learning_rate=2e-3),
    "pretrained": dict(batch_size=32, max_steps=10_000, learning_rate=5e-5, scorer_learning_rate_multiplier=20.0,
                       warmup_fraction=0.1),
}


def sizes_with(extra):
    """The encoder's sizes ("tiny", "paper") with a kind's own fields of each size (`extra`: {size: fields})."""
    return {size: dict(fields, **extra[size]) for size, fields in _CONSTITUENCY_SIZES.items()}


@dataclass(frozen=True)
class ParserKind:
    """One kind of proposal parser (module docstring).

    name: what `--kind` says ("crf", "crf-unlabeled", "biaffine").
    description: one line for `hf-slm parser train --help` and the card.
    tree_kind: "constituency" or "dependency" (the TreeFormat kind of the models it serves).
    labelled: its constituency trees carry labels (an unlabelled parser serves paper 003's models only).
    tree_format: the format its trees are written in (hf_slm/families/tree_formats.py).
    config_class, model_class, tokenizer_class: the classes (or "module:Class" references).
    scorer_class: the Scorer (hf_slm/search/scorers.py) that parses with it where a language model's would (silver
        trees, `hf-slm parse --parser`).
    card_builder: build(checkpoint_dir, repo_id, revision, license, datasets) -> its model card (`hf-slm card`).
    sizes: {size name: model config fields}; `hf-slm parser train --size`.
    model_rows: a reference to rows(config) -> the (label, value) rows of the card's "Model details" that describe the
        parser's own parts (None: a CRF parser's scorers and tree CRF, hf_slm/parsers/card.py).
    best_tree: what its best tree is, in words, for its card.
    citation: the BibTeX its card cites (None: the CRF or biaffine parser's paper, by tree kind).
    """

    name: str
    description: str
    tree_kind: str
    labelled: bool
    tree_format: str
    config_class: object
    model_class: object
    sizes: dict
    tokenizer_class: object = PARSER_TOKENIZER
    scorer_class: object = PARSER_SCORER
    card_builder: object = PARSER_CARD
    model_rows: object = None
    best_tree: str = "exact under q (CKY or Eisner over its tree CRF)"
    citation: str | None = None
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def resolved(self, name):
        """A class field, imported on first use."""
        if name not in self._cache:
            self._cache[name] = resolve(getattr(self, name))
        return self._cache[name]

    def serves(self, tree_format_name):
        """Whether this parser's trees are trees of a model whose trees are of `tree_format_name`: a constituency
        parser's serve the bracketed formats (a labelled one's are unlabelled for an unlabelled model), a dependency
        parser's the dependency format."""
        from ..families.tree_formats import tree_format

        wanted = tree_format(tree_format_name)
        if wanted.kind != self.tree_kind:
            return False
        return self.labelled or wanted.name != "brackets"


_kinds = {}


def register_parser_kind(kind, replace=False):
    """Add a ParserKind (hf-slm's own and any package's); its name must be new unless `replace`."""
    if not isinstance(kind, ParserKind):
        raise TypeError(f"register_parser_kind takes a ParserKind, got {type(kind).__name__}")
    if kind.name in _kinds and not replace:
        raise ValueError(f"a parser kind named {kind.name!r} is already registered")
    _kinds[kind.name] = kind
    return kind


def _with_families():
    """Register the kinds the families' records add (a family's package registers its own parser, RNNG's)."""
    from ..families.registry import registered_families

    registered_families()


def parser_kinds():
    """Every registered ParserKind, in registration order."""
    _with_families()
    return tuple(_kinds.values())


def parser_kind(name):
    _with_families()
    if name not in _kinds:
        raise ValueError(f"unknown parser kind {name!r}; expected one of {list(_kinds)}")
    return _kinds[name]


def parser_model_types():
    """The model_type of every registered parser's config class (a checkpoint's config.json says one of them)."""
    return sorted({kind.resolved("config_class").model_type for kind in parser_kinds()})


def kind_of_config(config, source="config"):
    """The ParserKind a parser config (object or config.json's dict) was trained as."""
    def value(name):
        return config.get(name) if isinstance(config, dict) else getattr(config, name, None)

    for kind in parser_kinds():
        config_class = kind.resolved("config_class")
        if value("model_type") == config_class.model_type and (kind.tree_kind == "dependency"
                                                                or bool(value("labelled")) == kind.labelled):
            return kind
    raise ValueError(f"{source}: model_type {value('model_type')!r} is no hf-slm proposal parser; expected one of "
                     f"{parser_model_types()}")


def is_parser_config(config):
    model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
    return model_type in parser_model_types()


register_parser_kind(ParserKind(
    name="crf",
    description="labelled span CRF constituency parser (Zhang, Zhou and Li 2020): PTB-style trees with labels and "
                "POS tags, for the models of labelled trees (paper 000's protocol until its discriminative RNNG lands)",
    tree_kind="constituency", labelled=True, tree_format="brackets",
    config_class="hf_slm.modeling.configuration_parser:ConstituencyParserConfig",
    model_class="hf_slm.modeling.modeling_crf_parser:CrfConstituencyParser",
    sizes=_CONSTITUENCY_SIZES,
))
register_parser_kind(ParserKind(
    name="crf-unlabeled",
    description="unlabelled span CRF constituency parser: paper 003's unlabelled trees without unary chains",
    tree_kind="constituency", labelled=False, tree_format="unlabelled_brackets",
    config_class="hf_slm.modeling.configuration_parser:ConstituencyParserConfig",
    model_class="hf_slm.modeling.modeling_crf_parser:CrfConstituencyParser",
    sizes=_CONSTITUENCY_SIZES,
))
register_parser_kind(ParserKind(
    name="biaffine",
    description="biaffine dependency parser with a projective tree CRF (Dozat and Manning 2017): single-root "
                "projective trees, for the models of dependency trees (paper 002)",
    tree_kind="dependency", labelled=True, tree_format="dependency",
    config_class="hf_slm.modeling.configuration_parser:DependencyParserConfig",
    model_class="hf_slm.modeling.modeling_biaffine_parser:BiaffineDependencyParser",
    sizes=_DEPENDENCY_SIZES,
))
