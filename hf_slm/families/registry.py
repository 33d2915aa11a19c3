"""The family registry: one record per model family, the one place that says what families exist.

A family is the unit a user picks (Transformer Grammars, DTG, paper 003's compositional SLMs, SOM, or one a
third party adds): one config class (one `model_type`), its model and tokenizer classes, the variants its
config's `grammar` field names, its presets and what its cards say. Generic code (collator, training,
evaluation, summarization, CLI, cards, publishing, Auto registration) asks this registry and the family's
record; it never names a family.

Records name their classes as "module:attribute" strings (or hold the objects): building the command line's
parser or listing presets must not import torch and transformers (seconds) before a command needs them. A
package outside hf-slm registers its family with the same public call, `hf_slm.register_family(Family(...))`.
"""

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_BUILTIN_FAMILY_MODULES = (
    "hf_slm.families.transformer_grammars",
    "hf_slm.families.dependency_grammars",
    "hf_slm.families.compositional",
    "hf_slm.families.ordered_memory",
    "hf_slm.families.recurrent_grammars",
)


def resolve(reference: Any) -> Any:
    """The object a "module:attribute" string names (imported on first use), or `reference` itself."""
    if not isinstance(reference, str):
        return reference
    module, separator, attribute = reference.partition(":")
    if not separator:
        raise ValueError(f"class reference {reference!r}: expected 'module:attribute'")
    value = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class Variant:
    """One model a family's config can describe: a grammar (its config's `grammar` value), or for a family
    without grammars (SOM) the family itself.

    name: the config's `grammar` ("tg", "nb-dn-in-m"); for a family without grammars its model_type.
    display_name: as its paper names it ("Transformer Grammar (TG)", "Nb-Dn-In-M").
    hub_tag: the hub tag of its cards.
    card_template: the file in model_cards/ its card is written from; for a family outside hf-slm, the absolute path
        of its own template (which may extend hf-slm's, e.g. `{% extends "syntactic.md" %}`).
    syntactic: it models syntax (p(x, y) over trees, or SOM's parser) rather than words alone.
    tree_format: how its trees are read and written (hf_slm/families/tree_formats.py): "brackets" (labelled PTB
        brackets), "unlabelled_brackets", "dependency" (CoNLL-U, or inline `word/head`) or "words".
    is_grammar: whether `name` is a grammar (False for a family without grammars).
    """

    name: str
    display_name: str
    hub_tag: str
    card_template: str
    syntactic: bool = True
    tree_format: str = "brackets"
    is_grammar: bool = True


@dataclass(frozen=True)
class Family:
    """What generic code needs to know of a model family (see the module docstring).

    name: a short name ("transformer_grammar").
    model_type: its config's model_type.
    paper: the paper it comes from, as the docs cite it.
    config_class, model_class, causal_lm_class: the classes (or "module:Class" references).
    grammar_classes: a reference to the {grammar name: grammar class} mapping of a family with grammars, the one
        its config class (hub code, which must find a checkpoint's grammar without hf-slm) holds as
        `grammar_classes` too; None for a family without grammars. Read without importing the config (torch).
    tokenizer_classes: the tokenizer classes a checkpoint of the family may hold; the last is the one a new model
        is trained with.
    variants: its Variants, the default (a new config's grammar) first.
    presets: a reference to its presets, {name: {"description", "model", "training"}} (None: none).
    check_tokenizer: a reference to check(config, tokenizer), which raises ValueError naming every way a tokenizer
        disagrees with a model config (ids, vocabulary, linearization).
    train: a reference to train(setup, log), which trains a model of one of the family's presets (`hf-slm train`;
        hf_slm.training.train.train checks the setup and locks the output folder first).
    card_details: a reference to details(config, parameters) -> the (label, value) rows of a card's "Model details"
        (config: config.json's dict; parameters: the count, or None).
    card_values: a reference to values(config) -> {name: value}, what the family's own card template reads beyond
        the shared values (hf_slm/publishing/model_card.py).
    preset_columns: a reference to columns(preset) -> {column: value}, what `hf-slm presets` shows of a preset
        besides its name and description.
    doubled_id_ranges: a reference to ranges(layout) -> [(start, stop), ...], the id ranges of the actions that
        close a constituent (or attach an arc), which a grammar that `duplicates_closing` expands into two
        positions (layout: a tokenizer's `action_layout` dict); training counts expanded lengths with it.
    unlabelled_trees: its tokenizers read trees without labels: a labelled tree is unlabelled for them
        (`tokenizer.unlabel`), and a tokenizer trained for it learns no labels.
    tokenizer_grammar_options: a reference to options(tokenizer) -> {option: value}, the keyword options of its
        grammars that a tokenizer's sequences fix (a grammar built for the tokenizer's ids takes them).
    tokenizer_config_fields: a reference to fields(tokenizer) -> {config field: value}, what a model config takes
        from its tokenizer beyond the id layout.
    preparation: a reference to the hook `hf-slm data prepare` runs for data of the family's own kind
        (hf_slm/data/prepare.py, "Family preparations"); None: its data is prepared from trees or words.
    collator: a reference to collator(model, tokenizer) -> the data collator that trains the model with
        transformers.Trainer (its batches give the numbers of `model(**tokenizer(...))`).
    scorer: a reference to the Scorer class (hf_slm/search/scorers.py) that `hf-slm score | parse | generate` and the
        evaluation drivers score, parse and generate with, built as scorer(model, tokenizer, **search_options):
        word-synchronous beam search (hf_slm/search/search_scorer.py) by default, or the family's own (SOM's).
    evaluations: the `hf-slm eval` commands its models support (among ppl, sg, blimp, parse, rerank, uas); the
        others say so and name these.
    train_options: the options `hf-slm train` adds for the family's presets, as (flag, argparse keywords) pairs
        (e.g. ("--min-count", {"type": int, "help": ...})); `training_setup` takes each as the field argparse names
        it (`--min-count` -> min_count). They are refused with another family's preset.
    training_setup: a reference to the TrainingSetup class (hf_slm/training/train.py) that `hf-slm train` builds for the
        family's presets (a subclass with the fields of `train_options`).
    paper_table: a reference to its paper's PaperTable (hf_slm/families/paper_settings.py: the paper's value of each
        field of the presets that are its settings, and why a preset differs), which the families of one paper share;
        None: none.
    """

    name: str
    model_type: str
    paper: str
    config_class: Any
    model_class: Any
    causal_lm_class: Any
    tokenizer_classes: tuple
    variants: tuple
    grammar_classes: Any = None
    presets: Any = None
    check_tokenizer: Any = "hf_slm.checkpoints.checks:check_grammar_tokenizer"
    train: Any = "hf_slm.training.train:train_grammar_model"
    card_details: Any = "hf_slm.publishing.model_card:model_details"
    card_values: Any = "hf_slm.publishing.model_card:no_card_values"
    preset_columns: Any = "hf_slm.families.registry:transformer_preset_columns"
    doubled_id_ranges: Any = "hf_slm.families.registry:closing_bracket_ranges"
    unlabelled_trees: bool = False
    tokenizer_grammar_options: Any = "hf_slm.families.registry:no_options"
    tokenizer_config_fields: Any = "hf_slm.families.registry:no_options"
    preparation: Any = None
    collator: Any = "hf_slm.data.collator:collator_for_model"
    scorer: Any = "hf_slm.search.search_scorer:BeamSearchScorer"
    evaluations: tuple = ("ppl", "sg", "blimp", "parse", "rerank")
    train_options: tuple = ()
    training_setup: Any = "hf_slm.training.train:TrainingSetup"
    paper_table: Any = None
    _cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)  # a replace() starts its own

    def __getattribute__(self, name: str) -> Any:
        # A class or function field is resolved (imported) when first read: the record itself stays cheap.
        if name in _REFERENCE_FIELDS:
            cache = object.__getattribute__(self, "_cache")
            if name not in cache:
                value = object.__getattribute__(self, name)
                cache[name] = tuple(resolve(v) for v in value) if isinstance(value, tuple) else resolve(value)
            return cache[name]
        return object.__getattribute__(self, name)

    def reference(self, name: str) -> Any:
        """A field as given (a "module:attribute" string stays a string): reading it imports nothing."""
        return object.__getattribute__(self, name)

    @property
    def default_tokenizer(self) -> type:
        """The tokenizer class a new model of the family is trained with."""
        return self.tokenizer_classes[-1]

    def tokenizer_class_for(self, pieces: str | None = None) -> type:
        """The tokenizer class a new model of the family is trained with when its vocabulary is `pieces` (one of a
        tokenizer class's `piece_models`: "sentencepiece", "byte_bpe", "words"); None: the default tokenizer's."""
        if pieces is None:
            return self.default_tokenizer
        for tokenizer_class in reversed(self.tokenizer_classes):  # the default first
            if pieces in tokenizer_class.piece_models:
                return tokenizer_class
        raise ValueError(f"--pieces {pieces}: the {self.name} family's tokenizers build {', '.join(self.piece_models)}; "
                         "expected one of them")

    @property
    def piece_models(self) -> tuple[str, ...]:
        """The vocabularies the family's tokenizer classes build (their `piece_models`)."""
        return tuple(name for tokenizer_class in self.tokenizer_classes for name in tokenizer_class.piece_models)

    @property
    def display_name(self) -> str:
        """The family's name in words: its variants' names ("TG", "DTG / DTG-eager / DTG-swift", ...)."""
        if len(self.variants) > 4:
            return f"{self.variants[0].display_name} and {len(self.variants) - 1} more ({self.name})"
        return " / ".join(variant.display_name for variant in self.variants)

    @property
    def grammars(self) -> tuple[str, ...]:
        """The names of the family's grammars (none for a family without grammars)."""
        return tuple(variant.name for variant in self.variants if variant.is_grammar)

    def grammar_class(self, name: str) -> type:
        """The class of the family's grammar `name`."""
        classes = self.grammar_classes or {}
        if name not in self.grammars or name not in classes:
            raise ValueError(f"the {self.name} family has no grammar {name!r}; expected one of {list(self.grammars)}")
        return classes[name]

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise ValueError(f"the {self.name} family has no variant {name!r}; expected one of "
                         f"{[variant.name for variant in self.variants]}")

    def variant_of(self, config: Any, source: str = "config") -> Variant:
        """The Variant a config (object or dict) describes: its grammar's, or the family's only one."""
        grammar = _field(config, "grammar")
        if grammar is not None and grammar in self.grammars:
            return self.variant(grammar)
        if len(self.variants) == 1 and not self.variants[0].is_grammar:
            return self.variants[0]
        raise ValueError(f"{source}: a {self.model_type} model with grammar {grammar!r}; expected one of the "
                         f"{self.name} family's grammars {list(self.grammars)}")

    def all_presets(self) -> dict[str, dict]:
        """{name: preset} of this family ({} when it has none)."""
        return self.presets or {}


def transformer_preset_columns(preset: dict) -> dict[str, Any]:
    """The `hf-slm presets` columns of a Transformer preset: grammar, width, depth, heads, feed-forward, vocabulary."""
    model = preset["model"]
    return {"grammar": model["grammar"], "d": model["hidden_size"], "layers": model["num_hidden_layers"],
            "heads": model["num_attention_heads"], "d_ff": model["intermediate_size"], "vocab": model["vocab_size"]}


def closing_bracket_ranges(layout: dict) -> list[tuple[int, int]]:
    """Family.doubled_id_ranges of a bracketed layout (an ActionLayout's fields): its closing nonterminals."""
    return [(layout["close_nt_start"], layout["close_nt_stop"])]


def no_options(_: Any) -> dict[str, Any]:
    """Family.tokenizer_grammar_options / tokenizer_config_fields of a family whose tokenizers fix none."""
    return {}


_REFERENCE_FIELDS = frozenset({"config_class", "model_class", "causal_lm_class", "tokenizer_classes", "grammar_classes",
                               "presets", "check_tokenizer", "train", "card_details", "card_values", "preset_columns",
                               "doubled_id_ranges", "tokenizer_grammar_options", "tokenizer_config_fields",
                               "preparation", "collator", "scorer", "training_setup", "paper_table"})


def _field(config, name):
    return config.get(name) if isinstance(config, dict) else getattr(config, name, None)


_registry: dict[str, Any] = {"families": {}, "builtins_loaded": False, "loading": False}
# Called with each family register_family adds (on_family_registered).
_registration_listeners: list[Callable[["Family"], None]] = []


def register_family(family: Family, replace: bool = False) -> Family:
    """Add a Family to the registry (the public call, for hf-slm's own families and any package's).

    Its name, model_type and grammar names must be new (a ValueError names the family that has them), unless
    `replace` swaps out the family of the same name. If transformers' Auto factories already know hf-slm's
    classes, this family's classes are registered with them at once.
    """
    if not isinstance(family, Family):
        raise TypeError(f"register_family takes a hf_slm Family record, got {type(family).__name__}")
    if not family.variants:
        raise ValueError(f"family {family.name!r} has no variants; expected at least one")
    if bool(family.grammars) != (family.reference("grammar_classes") is not None):
        raise ValueError(f"family {family.name!r}: grammar variants {list(family.grammars)} need grammar_classes (and "
                         "grammar_classes need grammar variants)")
    families = _registry["families"]
    for other in list(families.values()):
        if other.name == family.name:
            if not replace:
                raise ValueError(f"a family named {family.name!r} is already registered (replace=True swaps it)")
            continue
        if other.model_type == family.model_type:
            raise ValueError(f"family {family.name!r}: model_type {family.model_type!r} is family "
                             f"{other.name!r}'s")
        shared = sorted(set(other.grammars) & set(family.grammars))
        if shared:
            raise ValueError(f"family {family.name!r}: grammars {shared} are family {other.name!r}'s")
    families[family.name] = family
    for listener in _registration_listeners:
        listener(family)
    return family


def on_family_registered(listener: Callable[[Family], None]) -> None:
    """Call `listener(family)` for every family registered from now on. hf_slm/auto_registration.py listens, so
    that a family added after the Auto classes were registered is registered with them too; the registry imports
    nothing of hf-slm above it."""
    if listener not in _registration_listeners:
        _registration_listeners.append(listener)


def unregister_family(name: str) -> None:
    """Remove a family (tests that register one of their own take it out again)."""
    _load_builtins()
    if name not in _registry["families"]:
        raise ValueError(f"no family named {name!r} is registered")
    del _registry["families"][name]


def _load_builtins():
    if _registry["builtins_loaded"] or _registry["loading"]:
        return
    _registry["loading"] = True
    try:
        for module in _BUILTIN_FAMILY_MODULES:
            importlib.import_module(module)
        _registry["builtins_loaded"] = True
    finally:
        _registry["loading"] = False


def registered_families() -> tuple[Family, ...]:
    """Every registered Family, hf-slm's own first, in registration order."""
    _load_builtins()
    return tuple(_registry["families"].values())


def family_named(name: str) -> Family:
    for family in registered_families():
        if family.name == name:
            return family
    raise ValueError(f"unknown family {name!r}; expected one of {[f.name for f in registered_families()]}")


def family_for_model_type(model_type: str, source: str = "config") -> Family:
    for family in registered_families():
        if family.model_type == model_type:
            return family
    raise ValueError(f"{source}: model_type {model_type!r} is no registered hf-slm family; expected one of "
                     f"{sorted(f.model_type for f in registered_families())}")


def family_for_config(config: Any, source: str = "config") -> Family:
    """The Family of a config (a config object or config.json's dict), by its model_type. A config object's class
    and the record each name the family's grammars (the record's are read without importing the config, for
    commands that import no torch); they must agree, or generic code would read another grammar than the model."""
    family = family_for_model_type(_field(config, "model_type"), source)
    declared = None if isinstance(config, dict) else getattr(type(config), "grammar_classes", None)
    if declared is not None:
        _check_grammars_agree(family, type(config).__name__, declared)
    return family


def _check_grammars_agree(family, config_name, declared):
    """ValueError when a config class's grammar_classes and its family record's name other grammars or classes
    (compared by name: a checkpoint's remote code holds copies of the classes)."""
    def named(classes):
        return {name: grammar.__name__ for name, grammar in (classes or {}).items()}

    if named(declared) != named(family.grammar_classes):
        raise ValueError(f"family {family.name!r}: {config_name}.grammar_classes {named(declared)} and the record's "
                         f"grammar_classes {named(family.grammar_classes)} differ; a family names its grammars once: "
                         "give the record the config's mapping")


def variant_for_config(config: Any, source: str = "config") -> Variant:
    """The Variant of a config (object or dict)."""
    return family_for_config(config, source).variant_of(config, source)


def model_identity(config):
    """What records (journals, results, cards) call a model: its Variant's name, the config's grammar (a family
    without grammars: its model_type); None without a config. A stand-in's config of no model_type (a custom
    scorer's) is called by its grammar field, if any; a model of no family (a proposal parser) by its model_type."""
    if config is None:
        return None
    model_type = _field(config, "model_type")
    if model_type is None:
        return _field(config, "grammar")
    if not any(family.model_type == model_type for family in registered_families()):
        return model_type  # a model of no family (a proposal parser) is called by its model_type
    return variant_for_config(config).name


def _class_name(reference):
    return reference.rpartition(":")[2].rpartition(".")[2] if isinstance(reference, str) else reference.__name__


def families_of_tokenizer(tokenizer):
    """The families whose checkpoints may hold `tokenizer`, known by its class name (a checkpoint's own copy of a
    class, loaded as remote code, is another class of the same name); no class is imported."""
    name = type(tokenizer).__name__
    return tuple(family for family in registered_families()
                 if name in {_class_name(reference) for reference in family.reference("tokenizer_classes")})


def family_for_grammar(grammar: str) -> Family:
    """The Family whose config takes `grammar`; an unknown name is a ValueError listing the known ones."""
    for family in registered_families():
        if grammar in family.grammars:
            return family
    raise ValueError(f"unknown grammar {grammar!r}; expected one of {grammar_names()}")


def data_preparations():
    """{Family.preparation hook: the grammars of the families that name it} (hf_slm/data/prepare.py)."""
    hooks = {}
    for family in registered_families():
        if family.preparation is not None:
            hooks.setdefault(family.preparation, []).extend(family.grammars)
    return hooks


def grammar_names() -> list[str]:
    """Every registered grammar name, family by family."""
    return [name for family in registered_families() for name in family.grammars]


def grammar_class(name: str) -> type:
    """The grammar class called `name` (its family's config class maps it)."""
    return family_for_grammar(name).grammar_class(name)


def doubled_id_ranges(grammar, layout):
    """The [start, stop) id ranges of the actions that the grammar called `grammar` expands into two positions
    (closing actions, when its class `duplicates_closing`; Family.doubled_id_ranges says which ids those are), []
    when it expands none; `layout` is a tokenizer's `action_layout` (or a layout's `to_dict()`)."""
    if not grammar_class(grammar).duplicates_closing:
        return []
    return family_for_grammar(grammar).doubled_id_ranges(layout)


def get_grammar(name: str, layout: Any, document_level: bool = False, **options: Any) -> Any:
    """The grammar called `name` over an action layout (a dependency grammar's: a DependencyLayout, with its
    `variant`); with document_level, one sequence holds the trees of a whole document."""
    return grammar_class(name)(layout, document_level=document_level, **options)


def config_for_grammar(grammar: str | None = None, **fields: Any) -> Any:
    """A config of the family that reads `grammar` ("tg" -> TransformerGrammarConfig, ...; by default the first
    registered grammar, Transformer Grammars'). Every field must be one the config knows, with a value of its type
    (a misspelled field would otherwise be stored and silently do nothing)."""
    if grammar is None:
        grammar = grammar_names()[0]
    config_class = family_for_grammar(grammar).config_class
    config_class.check_fields(fields)
    return config_class(grammar=grammar, **fields)


def all_presets() -> dict[str, tuple[Family, dict]]:
    """{preset name: (Family, preset)} over every family; two families may not share a preset name."""
    found: dict[str, tuple[Family, dict]] = {}
    for family in registered_families():
        for name, preset in family.all_presets().items():
            if name in found:
                raise ValueError(f"preset {name!r} is both family {found[name][0].name!r}'s and {family.name!r}'s")
            found[name] = (family, preset)
    return found


def preset(name: str) -> tuple[Family, dict]:
    """(Family, preset) of the preset called `name`."""
    presets = all_presets()
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(presets)}")
    return presets[name]


def preset_config(name: str, **overrides: Any) -> Any:
    """The config of a preset (its family's class), with `overrides` (e.g. the tokenizer's id layout)."""
    family, chosen = preset(name)
    model = dict(chosen["model"], **overrides)
    if family.grammars:
        return config_for_grammar(model.pop("grammar", family.grammars[0]), **model)
    return family.config_class(**model)


def causal_lm_for_config(config: Any) -> Any:
    """A new, randomly initialized causal LM of the family that `config` belongs to."""
    return family_for_config(config).causal_lm_class(config)


def paper_table(paper: str) -> tuple[Any, dict[str, dict]]:
    """(PaperTable, {preset name: preset} of the paper's families) of paper `paper` ("000"); ValueError naming the
    papers with a table."""
    tables = {family.paper: family.paper_table for family in registered_families() if family.paper_table is not None}
    if paper not in tables:
        raise ValueError(f"paper {paper!r}: expected one of {sorted(tables)} (the papers whose families have a table)")
    # the presets of the paper's families that hold themselves to its table (RNNG, which paper 000 only reports, has none)
    presets = {name: chosen for family in registered_families()
               if family.paper == paper and family.reference("paper_table") is not None
               for name, chosen in family.all_presets().items()}
    return tables[paper], presets


def presets() -> dict[str, dict]:
    """{preset name: preset} over every family."""
    return {name: chosen for name, (_, chosen) in all_presets().items()}
