"""SyntaxGym (Hu et al., 2020) scored in-process: suite JSON, prediction formulas, SG score and circuits.

A suite (the JSON format of syntaxgym-core, see ../shared/data/syntaxgym/syntaxgym-core-docs) holds items; an
item holds one sentence per condition, cut into numbered regions; predictions are formulas over region
surprisals, e.g. ``[(6;%what_nogap%) > (6;%that_nogap%)] & [(7;%what_gap%) < (7;%that_gap%)]``.

Reading a suite
    The sentence of a condition is its region contents, each stripped, empty ones left out, joined by single
    spaces; its words are the whitespace-separated tokens, and every word belongs to exactly one region. (Region
    texts of the released suites can carry stray spaces and can be empty.) The surprisal of a region is the sum
    of its words' surprisals in bits (the suites' ``metric: "sum"``, the only metric of the format). **An empty
    region has no words, so its surprisal is the empty sum, 0.** No formula of the 34 released suites refers
    to an empty region. ``(*;%cond%)`` is the sum over all regions of the condition (the sentence's surprisal,
    without the end-of-sentence cost).

Formulas (``parse_formula``)
    Our own recursive-descent parser for the grammar of syntaxgym-core, from loosest to tightest binding::

        formula    := logical
        logical    := comparison (("&" | "|") comparison)*      left-associative, one level
        comparison := sum [("<" | ">" | "=") sum]               not chainable: a < b < c is an error
        sum        := atom (("+" | "-") atom)*                  left-associative, one level
        atom       := "(" region ";%" condition "%)" | number | "(" logical ")" | "[" logical "]"
        region     := digits | "*"        condition := [A-Za-z0-9_-]+
        (a "(" opens a region reference only when a region and ";" follow it: `(0) < (1;%a%)` and
        `(1 - (1;%a%)) < 0` group with the first "(", as syntaxgym-core reads them)
        number     := [+-]?digits[.digits][e[+-]digits]   (a sign only directly before the digits)

    ``[ ]`` group like ``( )`` (the released suites group with square brackets; a bracket must be closed by
    its own kind). ``=`` is approximate: ``numpy.isclose(left, right, rtol=1e-5, atol=1e-3)``. The grammar has
    no ``*``, ``/`` or unary minus on an expression; they are parse errors. Operands are type-checked:
    ``+ - < > =`` take numbers, ``& |`` take truth values, and a formula must be a truth value. Errors are
    `FormulaError` (a ValueError) naming the formula and the 0-based position, with a caret under it.

Scoring (``evaluate_suites``)
    ``score_fn(list of word lists) -> list of per-word surprisal lists (bits)``; identical sentences are scored
    once. An item gets one truth value per prediction, combined by ``rule``:

    - ``"first"`` (default): the item is correct when the suite's *first* prediction holds. This is what the
      papers' SG score used: Hu et al. (2020) released one boolean per (model, suite, item), and their
      fgd_hierarchy results (31/72 to 45/72 True, per ../shared/data/syntaxgym/PROVENANCE.md) are implausible
      if its second prediction, the approximate equality ``(9;%what_nogap%) = (9;%that_nogap%) & ...`` (within
      1e-3 bits), also had to hold; the scorer by one of the authors (github.com/pqian11/sg-eval, score.py)
      reads only prediction 0. Only fgd_hierarchy (in the 31) and nn-nv-rpl (left out) have two predictions,
      so the rule changes one suite.
    - ``"all"``: correct when every prediction holds (the HuggingFace ``cpllab/syntaxgym`` metric's accuracy);
      fgd_hierarchy then scores about 0 for any real model.
    - ``"mean"``: the fraction of the item's predictions that hold.

    Every prediction's own accuracy is reported too. A suite's accuracy is the mean over its items; a circuit's
    is the mean of its suites' accuracies; the SG score is the mean of the suite accuracies, leaving out
    fgd-embed3, fgd-embed4 and nn-nv-rpl (the papers' 31 suites when all of them are given). 95% intervals are
    percentile bootstraps (1,000 resamples of the items within each suite, seed 0), as the error bars of paper
    000, Figure 4.
"""

import csv
import json
import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .steps import check_limit, distinct_sentences, file_names, limit_error, map_sentences, quoted_sentences

EQUALITY_RTOL = 1e-5
EQUALITY_ATOL = 1e-3

RULES = ("first", "all", "mean")

# The six circuits of Hu et al. (2020) (their notebooks/main.py), alphabetical as in their plots.
CIRCUITS = (
    "Agreement",
    "Center Embedding",
    "Garden-Path Effects",
    "Gross Syntactic State",
    "Licensing",
    "Long-Distance Dependencies",
)
# Suite-name prefixes of each circuit, for suites outside the released 34.
CIRCUIT_PREFIXES = {
    "Agreement": ("number",),
    "Center Embedding": ("center_embed",),
    "Garden-Path Effects": ("npz", "mvrr"),
    "Gross Syntactic State": ("subordination",),
    "Licensing": ("npi", "reflexive"),
    "Long-Distance Dependencies": ("fgd", "cleft"),
}
# The papers' analysis leaves these out of the SG score and of the circuits.
EXCLUDED_SUITES = ("fgd-embed3", "fgd-embed4", "nn-nv-rpl")
# The 34 released suites; None: left out of the SG score and the circuits.
SUITE_CIRCUITS = {
    "center_embed": "Center Embedding",
    "center_embed_mod": "Center Embedding",
    "cleft": "Long-Distance Dependencies",
    "cleft_modifier": "Long-Distance Dependencies",
    "fgd-embed3": None,
    "fgd-embed4": None,
    "fgd_hierarchy": "Long-Distance Dependencies",
    "fgd_object": "Long-Distance Dependencies",
    "fgd_pp": "Long-Distance Dependencies",
    "fgd_subject": "Long-Distance Dependencies",
    "mvrr": "Garden-Path Effects",
    "mvrr_mod": "Garden-Path Effects",
    "nn-nv-rpl": None,
    "npi_orc_any": "Licensing",
    "npi_orc_ever": "Licensing",
    "npi_src_any": "Licensing",
    "npi_src_ever": "Licensing",
    "npz_ambig": "Garden-Path Effects",
    "npz_ambig_mod": "Garden-Path Effects",
    "npz_obj": "Garden-Path Effects",
    "npz_obj_mod": "Garden-Path Effects",
    "number_orc": "Agreement",
    "number_prep": "Agreement",
    "number_src": "Agreement",
    "reflexive_orc_fem": "Licensing",
    "reflexive_orc_masc": "Licensing",
    "reflexive_prep_fem": "Licensing",
    "reflexive_prep_masc": "Licensing",
    "reflexive_src_fem": "Licensing",
    "reflexive_src_masc": "Licensing",
    "subordination": "Gross Syntactic State",
    "subordination_orc-orc": "Gross Syntactic State",
    "subordination_pp-pp": "Gross Syntactic State",
    "subordination_src-src": "Gross Syntactic State",
}
PAPER_SUITES = tuple(name for name, circuit in SUITE_CIRCUITS.items() if circuit is not None)  # the 31

BOOTSTRAP_SAMPLES = 1000


def circuit_of(suite_name):
    """The circuit of a suite: from the table of the 34 released suites, else by name prefix; None if none."""
    if suite_name in SUITE_CIRCUITS:
        return SUITE_CIRCUITS[suite_name]
    if suite_name in EXCLUDED_SUITES:
        return None
    for circuit, prefixes in CIRCUIT_PREFIXES.items():
        if suite_name.startswith(prefixes):
            return circuit
    return None


# ---- formulas ------------------------------------------------------------------------------------------

class FormulaError(ValueError):
    """A formula that does not parse (or does not type-check), with the 0-based position of the problem."""

    def __init__(self, formula, position, reason):
        self.formula, self.position, self.reason = formula, position, reason
        caret = " " * position + "^"
        super().__init__(f"{reason} at position {position} of formula {formula!r}\n    {formula}\n    {caret}")


NUMBER, BOOL = "number", "truth value"


class _Node:
    kind = NUMBER
    start = 0


@dataclass(eq=False)
class RegionRef(_Node):
    """Surprisal of region `region` (an int, or "*" for the whole sentence) of condition `condition`."""

    region: object
    condition: str
    start: int = 0
    kind = NUMBER

    def evaluate(self, values):
        if self.region == "*":
            return math.fsum(v for (condition, _), v in values.items() if condition == self.condition)
        return float(values[self.condition, self.region])

    def __str__(self):
        return f"({self.region};%{self.condition}%)"


@dataclass(eq=False)
class Number(_Node):
    value: float
    start: int = 0
    kind = NUMBER

    def evaluate(self, values):
        return self.value

    def __str__(self):
        return format(self.value, "g")


@dataclass(eq=False)
class BinaryOp(_Node):
    op: str
    left: _Node
    right: _Node
    start: int = 0

    @property
    def kind(self):
        return NUMBER if self.op in "+-" else BOOL

    def evaluate(self, values):
        left, right = self.left.evaluate(values), self.right.evaluate(values)
        if self.op == "+":
            return left + right
        if self.op == "-":
            return left - right
        if self.op == "<":
            return bool(left < right)
        if self.op == ">":
            return bool(left > right)
        if self.op == "=":
            return bool(np.isclose(left, right, rtol=EQUALITY_RTOL, atol=EQUALITY_ATOL))
        if self.op == "&":
            return bool(left and right)
        return bool(left or right)

    def __str__(self):
        return f"({self.left} {self.op} {self.right})"


_NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# A "(" starts a region reference only in that shape, `(6;` or `(*;`; otherwise it groups, as in `(0) < 1`.
_REGION_START_RE = re.compile(r"\(\s*(?:\d+|\*)\s*;")
_CONDITION_RE = re.compile(r"[A-Za-z0-9_-]+")
_CLOSING = {"(": ")", "[": "]"}


class _Parser:
    def __init__(self, text):
        self.text, self.pos = text, 0

    def fail(self, reason, position=None):
        raise FormulaError(self.text, self.pos if position is None else position, reason)

    def peek(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char, what):
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "the end of the formula"
            self.fail(f"expected {char!r} {what}, found {found}")
        self.pos += 1

    def require(self, node, kind, op):
        if node.kind != kind:
            self.fail(f"{op!r} takes {kind}s, but the operand here is a {node.kind}", node.start)

    def formula(self):
        node = self.logical()
        char = self.peek()
        if char in ("<", ">", "="):
            self.fail("comparisons cannot be chained; join them with '&'")
        if char in (")", "]"):
            self.fail(f"{char!r} closes no bracket")
        if char:
            self.fail(f"unexpected {char!r}")
        if node.kind != BOOL:
            self.fail("the formula is a number, not a truth value (expected a comparison with <, > or =)", node.start)
        return node

    def logical(self):
        left = self.comparison()
        while self.peek() in ("&", "|"):
            op, start = self.text[self.pos], left.start
            self.require(left, BOOL, op)
            self.pos += 1
            right = self.comparison()
            self.require(right, BOOL, op)
            left = BinaryOp(op, left, right, start)
        return left

    def comparison(self):
        left = self.sum()
        if self.peek() in ("<", ">", "="):
            op = self.text[self.pos]
            self.require(left, NUMBER, op)
            self.pos += 1
            if op in "<>" and self.text.startswith("=", self.pos):
                self.fail(f"{op + '='!r} is not an operator of the grammar (only <, > and =)", self.pos - 1)
            right = self.sum()
            self.require(right, NUMBER, op)
            return BinaryOp(op, left, right, left.start)
        return left

    def sum(self):
        left = self.atom()
        while self.peek() in ("+", "-"):
            op = self.text[self.pos]
            self.require(left, NUMBER, op)
            self.pos += 1
            right = self.atom()
            self.require(right, NUMBER, op)
            left = BinaryOp(op, left, right, left.start)
        if self.peek() in ("*", "/"):
            self.fail(f"{self.peek()!r} is not an operator of the grammar (arithmetic is + and - only)")
        return left

    def atom(self):
        char = self.peek()
        start = self.pos
        if char == "(" and _REGION_START_RE.match(self.text, self.pos):
            return self.region_reference()
        if char in ("(", "["):
            self.pos += 1
            node = self.logical()
            closing = _CLOSING[char]
            if self.peek() != closing:
                found = repr(self.peek()) if self.peek() else "the end of the formula"
                self.fail(f"expected {closing!r} to close the {char!r} at position {start}, found {found}")
            self.pos += 1
            node.start = start
            return node
        match = _NUMBER_RE.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return Number(float(match.group()), start)
        if char in ("+", "-"):
            self.fail(f"unary {char!r} is not in the grammar (only before a number, as in -1.5)")
        if not char:
            self.fail("unexpected end of the formula: expected a region reference, a number or a bracket")
        self.fail(f"expected a region reference '(<region>;%<condition>%)', a number or a bracket, found {char!r}")

    def region_reference(self):
        start = self.pos
        self.pos += 1  # "("
        self.peek()
        if self.text[self.pos] == "*":
            region = "*"
            self.pos += 1
        else:
            digits = re.match(r"\d+", self.text[self.pos:]).group()
            region = int(digits)
            self.pos += len(digits)
        self.expect(";", "after the region number of a region reference")
        self.expect("%", "before the condition name of a region reference")
        match = _CONDITION_RE.match(self.text, self.pos)
        if not match:
            self.fail("expected a condition name ([A-Za-z0-9_-]+) in a region reference")
        self.pos = match.end()
        self.expect("%", "after the condition name of a region reference")
        self.expect(")", f"to close the region reference at position {start}")
        return RegionRef(region, match.group(), start)


class Formula:
    """A parsed prediction formula: `evaluate({(condition, region_number): surprisal}) -> bool`.

    `str(formula)` is a fully parenthesized canonical form; `references` the set of (condition, region)
    pairs it reads (region an int or "*").
    """

    def __init__(self, text):
        self.text = text
        self.tree = _Parser(text).formula()

    def evaluate(self, values):
        """Whether the formula holds, given region surprisals {(condition_name, region_number): value}.

        `(*;%c%)` sums every entry of condition c, so pass all regions (empty ones as 0)."""
        return bool(self.tree.evaluate(values))

    @property
    def references(self):
        found, stack = set(), [self.tree]
        while stack:
            node = stack.pop()
            if isinstance(node, RegionRef):
                found.add((node.condition, node.region))
            elif isinstance(node, BinaryOp):
                stack += [node.left, node.right]
        return found

    def __str__(self):
        return str(self.tree)

    def __repr__(self):
        return f"Formula({self.text!r})"


def parse_formula(text):
    """Parse a SyntaxGym prediction formula (see the module docstring); raises FormulaError."""
    if not isinstance(text, str):
        raise TypeError(f"a formula is a string, got {type(text).__name__}")
    return Formula(text)


# ---- suites --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Region:
    number: int
    content: str  # as in the file
    words: tuple  # the stripped content split on whitespace; () for an empty region


@dataclass(frozen=True)
class Condition:
    name: str
    regions: tuple

    @property
    def words(self):
        return tuple(word for region in self.regions for word in region.words)

    @property
    def text(self):
        """The sentence: non-empty stripped region contents joined by single spaces."""
        return " ".join(region.content.strip() for region in self.regions if region.content.strip())

    def region_surprisals(self, word_surprisals):
        """{region_number: sum of its words' surprisals}; an empty region gets 0."""
        if len(word_surprisals) != len(self.words):
            raise ValueError(f"condition {self.name!r}: {len(word_surprisals)} surprisals for "
                             f"{len(self.words)} words {list(self.words)}")
        totals, start = {}, 0
        for region in self.regions:
            end = start + len(region.words)
            totals[region.number] = math.fsum(float(s) for s in word_surprisals[start:end])
            start = end
        return totals


@dataclass(frozen=True)
class Item:
    number: object
    conditions: dict  # condition name -> Condition, in file order


@dataclass(frozen=True)
class Suite:
    name: str
    metric: str
    region_meta: dict
    predictions: tuple  # Formula objects
    items: tuple
    source: str = None
    meta: dict = field(default_factory=dict)

    @property
    def circuit(self):
        return circuit_of(self.name)

    @property
    def in_sg_score(self):
        return self.name not in EXCLUDED_SUITES


_KIND_NAMES = {list: "a list", str: "a string", (int, str): "an integer"}


def _field(record, key, kind, where):
    """`record[key]`, checked to be a `kind` (a key of _KIND_NAMES); else a ValueError naming `where` and the
    field."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(record).__name__}")
    if key not in record:
        raise ValueError(f"{where}: missing the field {key!r} ({_KIND_NAMES[kind]})")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: the field {key!r} is {type(value).__name__} {value!r:.40}, expected "
                         f"{_KIND_NAMES[kind]}")
    return value


def _read_suite_json(source):
    try:
        with open(source, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"suite file {str(source)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"suite file {str(source)!r} is not JSON: {error}") from None


def _suite_record(source):
    """(the suite's JSON object, the file it came from or None for a dict given)."""
    if isinstance(source, dict):
        data, origin = source, None
    else:
        origin = str(source)
        data = _read_suite_json(source)
    if not isinstance(data, dict):
        raise ValueError(f"suite {origin or ''}: expected a JSON object with meta, predictions and items, found "
                         f"{type(data).__name__}")
    return data, origin


def _suite_meta(data, origin):
    """(meta, with its name: meta.name or the file's stem), checked to be an object with the metric "sum"."""
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise ValueError(f"suite {origin or ''}: the field 'meta' is {type(meta).__name__}, expected an object")
    meta = dict(meta)
    name = meta.get("name") or (Path(origin).stem if origin else None)
    if not name:
        raise ValueError("a suite needs meta.name")
    return meta, name


def _read_prediction(prediction, place):
    if not isinstance(prediction, dict):
        raise ValueError(f"{place}: expected an object with a 'formula', found {type(prediction).__name__}")
    if prediction.get("type", "formula") != "formula":
        raise ValueError(f"{place} has type {prediction.get('type')!r}, not 'formula'")
    try:
        return parse_formula(_field(prediction, "formula", str, place))
    except FormulaError as error:
        raise FormulaError(error.formula, error.position, f"{place}: {error.reason}") from None


def _read_predictions(data, where):
    predictions = [_read_prediction(prediction, f"{where}, prediction {index}")
                   for index, prediction in enumerate(_field(data, "predictions", list, where))]
    if not predictions:
        raise ValueError(f"{where} has no predictions")
    return predictions


def _read_region_meta(data, where):
    region_meta = data.get("region_meta") or {}
    try:
        return {int(k): v for k, v in region_meta.items()}
    except (AttributeError, ValueError):
        raise ValueError(f"{where}: region_meta must map region numbers to names, got {region_meta!r:.60}") from None


def _read_region(raw_region, region_index, condition_where):
    region_where = f"{condition_where}, region {region_index}"
    number = _field(raw_region, "region_number", (int, str), region_where)
    try:
        number = int(number)
    except ValueError:
        raise ValueError(f"{region_where}: region_number {number!r} is not an integer") from None
    content = _field(raw_region, "content", str, f"{condition_where}, region {number}")
    return Region(number, content, tuple(content.split()))


def _read_condition(raw_condition, condition_index, item_where):
    """(the condition's name, the Condition), its regions numbered once each and not all empty."""
    condition_name = _field(raw_condition, "condition_name", str, f"{item_where}, condition {condition_index}")
    condition_where = f"{item_where}, condition {condition_name!r}"
    regions = tuple(_read_region(raw_region, region_index, condition_where)
                    for region_index, raw_region in enumerate(_field(raw_condition, "regions", list, condition_where)))
    numbers = [r.number for r in regions]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"{condition_where}: repeated region numbers {numbers}")
    condition = Condition(condition_name, regions)
    if not condition.words:
        raise ValueError(f"{condition_where}: every region is empty")
    return condition_name, condition


def _check_references(predictions, conditions, item_where):
    """Every condition and region a prediction refers to is one of the item's."""
    for index, formula in enumerate(predictions):
        for condition_name, region in sorted(formula.references, key=str):
            if condition_name not in conditions:
                raise ValueError(f"{item_where}: prediction {index} ({formula.text!r}) refers to "
                                 f"condition {condition_name!r}, which the item does not have "
                                 f"({sorted(conditions)})")
            if region != "*" and region not in {r.number for r in conditions[condition_name].regions}:
                raise ValueError(f"{item_where}: prediction {index} ({formula.text!r}) refers to "
                                 f"region {region} of condition {condition_name!r}, which has no such region")


def _read_item(raw_item, item_index, where, predictions):
    item_number = raw_item.get("item_number") if isinstance(raw_item, dict) else None
    item_where = f"{where}, item {item_number if item_number is not None else f'at index {item_index}'}"
    conditions = {}
    for condition_index, raw_condition in enumerate(_field(raw_item, "conditions", list, item_where)):
        condition_name, condition = _read_condition(raw_condition, condition_index, item_where)
        if condition_name in conditions:
            raise ValueError(f"{item_where}: condition {condition_name!r} appears twice")
        conditions[condition_name] = condition
    _check_references(predictions, conditions, item_where)
    return Item(item_number, conditions)


def load_suite(source):
    """A Suite from a SyntaxGym suite JSON file (path) or its parsed dict; checks formulas and references.

    A malformed suite (not JSON, a missing or mistyped field) is a ValueError naming the file, the item, the
    condition and the field.
    """
    data, origin = _suite_record(source)
    meta, name = _suite_meta(data, origin)
    where = f"suite {name!r}" + (f" ({origin})" if origin else "")
    metric = meta.get("metric", "sum")
    if metric != "sum":
        raise ValueError(f"{where}: metric {metric!r} is not supported (only 'sum', the format's one metric)")
    predictions = _read_predictions(data, where)
    region_meta = _read_region_meta(data, where)
    items = [_read_item(raw_item, item_index, where, predictions)
             for item_index, raw_item in enumerate(_field(data, "items", list, where))]
    if not items:
        raise ValueError(f"{where} has no items")
    return Suite(name, metric, region_meta, tuple(predictions), tuple(items), origin, meta)


def suite_files(path):
    """The suite JSON files at `path`: a file, a folder of *.json, or a folder with test_suites/json/."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ValueError(f"no SyntaxGym suites at {str(path)!r}: it does not exist; expected a suite JSON file or "
                         "a folder of them")
    files = sorted(path.glob("*.json"))
    if not files and (path / "test_suites" / "json").is_dir():
        files = sorted((path / "test_suites" / "json").glob("*.json"))
    if not files:
        raise ValueError(f"no suite JSON files (*.json) in {str(path)!r} or {str(path / 'test_suites' / 'json')!r}")
    return files


def load_suites(source):
    """Suites from a path (see `suite_files`) or an iterable of paths, dicts and Suites; sorted by name."""
    if isinstance(source, (str, Path)):
        source = suite_files(source)
    suites = [s if isinstance(s, Suite) else load_suite(s) for s in source]
    names = [s.name for s in suites]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"suite names given more than once: {repeated}")
    return sorted(suites, key=lambda s: s.name)


# ---- scoring -------------------------------------------------------------------------------------------

def _combine(results, rule):
    if rule == "first":
        return float(results[0])
    if rule == "all":
        return float(all(results))
    return float(np.mean(results))


def _bootstrap_ci(per_suite_correct, samples=BOOTSTRAP_SAMPLES, seed=0):
    """95% percentile interval of the mean of suite accuracies, resampling items within each suite."""
    if not per_suite_correct:
        return None
    rng = np.random.default_rng(seed)
    means = np.zeros(samples)
    for correct in per_suite_correct:
        correct = np.asarray(correct, dtype=float)
        draws = rng.integers(0, len(correct), size=(samples, len(correct)))
        means += correct[draws].mean(axis=1)
    means /= len(per_suite_correct)
    low, high = np.percentile(means, [2.5, 97.5])
    return [float(low), float(high)]


def _mean(values):
    return float(np.mean(values)) if len(values) else None


def _check_rule_and_limit(rule, limit):
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if limit is not None and int(limit) != limit:
        raise limit_error(limit, "items per suite")
    check_limit(limit, "items per suite")


def _checked_surprisals(score_fn, sentences):
    """{sentence: its words' surprisals as floats} from score_fn over the sentences (tuples of words), checked to
    give one list per sentence and one surprisal per word; a sentence it cannot score (None;
    hf_slm.search.beam.check_sentences) is not in it, and its items are left out."""
    scored = score_fn([list(words) for words in sentences])
    if len(scored) != len(sentences):
        raise ValueError(f"score_fn returned {len(scored)} results for {len(sentences)} sentences")
    surprisals = {}
    for words, values in zip(sentences, scored):
        if values is None:
            continue
        values = [float(v) for v in values]
        if len(values) != len(words):
            raise ValueError(f"score_fn returned {len(values)} surprisals for the {len(words)} words {list(words)}")
        surprisals[words] = values
    return surprisals


def _item_row(suite, item, surprisals, rule):
    """The row of an item (see evaluate_suites): its region surprisals, each prediction's truth and, combined by
    `rule`, whether it is correct; None when one of its sentences could not be scored."""
    if any(cond.words not in surprisals for cond in item.conditions.values()):
        return None
    regions = {name: cond.region_surprisals(surprisals[cond.words]) for name, cond in item.conditions.items()}
    values = {(name, number): v for name, totals in regions.items() for number, v in totals.items()}
    results = [formula.evaluate(values) for formula in suite.predictions]
    return {"suite": suite.name, "item": item.number, "correct": _combine(results, rule), "predictions": results,
            "regions": regions}


@dataclass
class _SuiteResult:
    """What scoring one suite's items gives: its metrics, each scored item's correctness (for the bootstrap), the
    items' rows and the items left out."""

    metrics: dict
    correct: list
    rows: list
    left_out: list


def _suite_result(suite, items, surprisals, rule):
    rows = [_item_row(suite, item, surprisals, rule) for item in items]
    left_out = [{"suite": suite.name, "item": item.number} for item, row in zip(items, rows) if row is None]
    rows = [row for row in rows if row is not None]
    correct = [row["correct"] for row in rows]
    metrics = {
        "accuracy": _mean(correct),
        "circuit": suite.circuit,
        "in_sg_score": suite.in_sg_score,
        "items": len(correct),
        "predictions": [{"formula": formula.text, "accuracy": _mean([row["predictions"][index] for row in rows])}
                        for index, formula in enumerate(suite.predictions)],
    }
    return _SuiteResult(metrics, correct, rows, left_out)


def _circuit_metrics(in_score, results):
    """{circuit: {accuracy, ci95, suites}} over the suites of the SG score (`results`: {suite name: _SuiteResult})."""
    circuits = {}
    for circuit in CIRCUITS:
        names = [name for name in in_score if results[name].metrics["circuit"] == circuit]
        circuits[circuit] = {
            "accuracy": _mean([results[name].metrics["accuracy"] for name in names]),
            "ci95": _bootstrap_ci([results[name].correct for name in names]),
            "suites": names,
        }
    return circuits


def _conditions(chosen):
    """Every condition (one sentence each) of the items chosen ({suite name: items})."""
    return [cond for items in chosen.values() for item in items for cond in item.conditions.values()]


def _sg_score(in_score, results, limit):
    """The SG score over the suites `in_score` (`results`: {suite name: _SuiteResult}), its interval, how many
    suites went in and whether they are exactly the papers' 31, every item."""
    return {
        "sg_score": _mean([results[name].metrics["accuracy"] for name in in_score]),
        "sg_score_ci95": _bootstrap_ci([results[name].correct for name in in_score]),
        "sg_score_suites": len(in_score),
        "sg_score_is_paper_31": sorted(in_score) == sorted(PAPER_SUITES) and limit is None,
    }


def _counts(suites, chosen, distinct):
    """How much was evaluated: suites, items, sentences and words, and the distinct sentences scored."""
    conditions = _conditions(chosen)
    return {
        "suites": len(suites),
        "suites_in_sg_score": sum(1 for suite in suites if suite.in_sg_score),
        "items": sum(len(items) for items in chosen.values()),
        "sentences": len(conditions),
        "words": sum(len(cond.words) for cond in conditions),
        "distinct_sentences": len(distinct),
        "distinct_sentence_words": sum(len(words) for words in distinct),
    }


def evaluate_suites(score_fn, suites, limit=None, rule="first"):
    """Score suites with `score_fn` and aggregate: per suite, per circuit, the SG score, counts.

    Args:
        score_fn: list of sentences (each a list of words) -> list of per-word surprisal lists, in bits (None
            for a sentence it cannot score: the items that hold it are left out, counted in `items_left_out`
            and named in `left_out`; a suite left with no item has accuracy None, is named in
            `suites_without_items` and counts in no mean). Called once, with every distinct sentence once (sorted
            by length).
        suites: Suites, suite files / dicts, or a path (see `load_suites`).
        limit: score only the first `limit` items of each suite.
        rule: how an item's predictions combine: "first" (the papers), "all" or "mean" (module docstring).

    Returns a JSON-serializable dict: `sg_score` (mean suite accuracy without fgd-embed3, fgd-embed4 and
    nn-nv-rpl; `sg_score_is_paper_31` says whether exactly the papers' 31 suites went in, all items, so that
    the number is comparable to the papers'), `sg_score_ci95`,
    `mean_all_suites`, `circuits` ({name: {accuracy, ci95, suites}}; accuracy None when no suite of the
    circuit was given), `suites` ({name: {accuracy, circuit, in_sg_score, items, predictions: [{formula,
    accuracy}]}}), `counts`, `rule`, `limit`, and `items`: one row per item {suite, item, correct,
    predictions: [bool], regions: {condition: {region_number: surprisal}}}.
    """
    _check_rule_and_limit(rule, limit)
    suites = load_suites(suites)
    if not suites:
        raise ValueError("no suites to evaluate")
    chosen = {suite.name: suite.items[:limit] for suite in suites}
    distinct = distinct_sentences(cond.words for cond in _conditions(chosen))
    surprisals = _checked_surprisals(score_fn, distinct)
    results = {suite.name: _suite_result(suite, chosen[suite.name], surprisals, rule) for suite in suites}
    suite_metrics = {name: result.metrics for name, result in results.items()}
    # A suite whose every item is left out (a sentence the scorer cannot score) has no accuracy: it is named, and
    # every mean is over the suites that were scored.
    scored = [name for name, m in suite_metrics.items() if m["accuracy"] is not None]
    in_score = [suite.name for suite in suites if suite.in_sg_score and suite.name in scored]
    metrics = {
        **_sg_score(in_score, results, limit),
        "mean_all_suites": _mean([suite_metrics[name]["accuracy"] for name in scored]),
        "circuits": _circuit_metrics(in_score, results),
        "suites": suite_metrics,
        "rule": rule,
        "limit": limit,
        "units": "bits",
        "counts": _counts(suites, chosen, distinct),
        "items": [row for result in results.values() for row in result.rows],
    }
    metrics.update(_left_out(results, scored))
    return metrics


def _left_out(results, scored):
    """What could not be scored, where there is any: items with a sentence the scorer could not score
    (`items_left_out`, `left_out`) and suites left with no item (`suites_without_items`, not in `scored`)."""
    fields = {}
    left_out = [entry for result in results.values() for entry in result.left_out]
    if left_out:
        fields["items_left_out"] = len(left_out)
        fields["left_out"] = left_out
    without_items = [name for name in results if name not in scored]
    if without_items:
        fields["suites_without_items"] = without_items
    return fields


def format_summary(metrics):
    """A few lines for a terminal: SG score, circuits, suites."""
    def number(value, ci=None):
        if value is None:
            return "   n/a"
        text = f"{value:6.3f}"
        return text + (f"  [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    what = "the papers' 31 suites" if metrics["sg_score_is_paper_31"] else f"{metrics['sg_score_suites']} suites"
    if metrics.get("limit"):
        what += f", first {metrics['limit']} items each"
    lines = [f"SG score ({what}, rule {metrics['rule']!r}): {number(metrics['sg_score'], metrics['sg_score_ci95'])}"]
    for circuit, values in metrics["circuits"].items():
        lines.append(f"  {circuit:<28} {number(values['accuracy'], values['ci95'])}  ({len(values['suites'])} suites)")
    lines.append("suites:")
    for name, values in metrics["suites"].items():
        note = "" if values["in_sg_score"] else "  (not in the SG score)"
        if values["accuracy"] is None:
            note = "  (every item left out: in no mean)"
        lines.append(f"  {name:<28} {number(values['accuracy'])}  ({values['items']} items){note}")
    return "\n".join(lines)


# ---- outputs -------------------------------------------------------------------------------------------

def write_suite_csv(metrics, path):
    """One row per suite: suite, circuit, in_sg_score, items, accuracy, prediction_<i>_accuracy."""
    width = max(len(m["predictions"]) for m in metrics["suites"].values())
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["suite", "circuit", "in_sg_score", "items", "accuracy"]
                        + [f"prediction_{i + 1}_accuracy" for i in range(width)])
        for name, m in metrics["suites"].items():
            predictions = [p["accuracy"] for p in m["predictions"]]
            writer.writerow([name, m["circuit"] or "", m["in_sg_score"], m["items"], m["accuracy"]]
                            + predictions + [""] * (width - len(predictions)))
    return Path(path)


def write_item_csv(metrics, path):
    """One row per item: suite, item, correct (under the rule), prediction_<i> (True/False)."""
    width = max((len(row["predictions"]) for row in metrics["items"]), default=0)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["suite", "item", "correct"] + [f"prediction_{i + 1}" for i in range(width)])
        for row in metrics["items"]:
            writer.writerow([row["suite"], row["item"], row["correct"]] + row["predictions"]
                            + [""] * (width - len(row["predictions"])))
    return Path(path)


def plot_circuits(metrics, path, title=None):
    """Bar chart of circuit accuracies and the SG score with 95% bootstrap intervals (like paper 000, Fig. 4)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = list(metrics["circuits"]) + ["SG score"]
    entries = list(metrics["circuits"].values()) + [{"accuracy": metrics["sg_score"], "ci95": metrics["sg_score_ci95"],
                                                     "suites": [None] * metrics["sg_score_suites"]}]
    heights = [e["accuracy"] if e["accuracy"] is not None else 0.0 for e in entries]
    figure = Figure(figsize=(9, 4.8))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    colors = ["#4C72B0"] * len(metrics["circuits"]) + ["#DD8452"]
    positions = np.arange(len(labels))
    axes.bar(positions, heights, color=colors)
    for x, height, entry in zip(positions, heights, entries):
        if entry["accuracy"] is None:
            axes.text(x, 0.015, "n/a", ha="center", va="bottom", fontsize=8)
            continue
        top = height
        if entry["ci95"]:
            low, top = entry["ci95"]
            axes.errorbar(x, height, yerr=[[max(height - low, 0)], [max(top - height, 0)]], color="black", capsize=4)
        axes.text(x, top + 0.015, f"{height:.2f}\n({len(entry['suites'])})", ha="center", va="bottom", fontsize=8)
    axes.set_xticks(positions)
    axes.set_xticklabels([textwrap.fill(label, 14) for label in labels], fontsize=8)
    axes.set_ylim(0, 1.2)
    axes.set_ylabel("accuracy")
    axes.grid(axis="y", alpha=0.3)
    subtitle = f"rule {metrics['rule']!r}, (n) = suites, bars: 95% bootstrap CI"
    if metrics.get("limit"):
        subtitle += f", first {metrics['limit']} items per suite"
    axes.set_title((title or "SyntaxGym by circuit") + "\n" + subtitle, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return Path(path)


def _model_directory(model):
    name = str(getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "") or "")
    return Path(name) if name and Path(name).is_dir() else None


def run_syntaxgym(model, tokenizer, suites_dir, output_dir=None, limit=None, batch_size=8, rule="first",
                  progress=True, overwrite=False, on_error="skip", scorer=None, **beam_options):
    """SyntaxGym for a language model: word surprisals (bits) from its Scorer (hf_slm/search/scorers.py;
    word-synchronous beam search for the families with grammars, exact from the logits for SOM), then `evaluate_suites`.
    Writes into `output_dir` (default: `<model dir>/eval_results` when the model was loaded from a local folder, else
    nothing is written), named by the suites (results.result_stem, e.g. `sg-syntaxgym` for
    ../shared/data/syntaxgym/test_suites/json, `-limit<N>` added with a limit): `<stem>.json` (metrics without the
    per-item rows, with the model, data and options; see results.save_results), `<stem>.csv` (per-suite accuracy),
    `<stem>_items.csv` (per item and prediction), `<stem>.png` (bar chart by circuit) and the journal
    `<stem>.journal.jsonl` of the sentences scored so far, from which an interrupted run resumes (`overwrite`
    discards it and starts over).

    scorer: the Scorer (default: the model's family's, with `beam_options`, BeamSearchOptions fields such as
    beam_size, word_beam_size, fast_track; they must then be left out). What it records of how it computes the
    surprisals (`Scorer.recorded_options`: the beam options, or SOM's "surprisals") joins the options. on_error:
    "skip" leaves out the items of a sentence that cannot be scored (see `evaluate_suites`); "raise" stops.
    Returns the metrics of `evaluate_suites` with `files`: {kind: path} of what was written.
    """
    from ..search.scorers import scorer_of
    from .results import evaluation_run, results_directory, save_results

    scorer = scorer_of(model, tokenizer, scorer, **beam_options)
    suites = load_suites(suites_dir)
    model_dir = _model_directory(model)
    directory = results_directory(model_dir, output_dir) if output_dir is not None or model_dir is not None else None
    options = {"limit": limit, "batch_size": batch_size, "rule": rule, "units": "bits", **scorer.recorded_options}
    files = {}
    with evaluation_run(directory, "sg", suites_dir, model, options, limit=limit, overwrite=overwrite) as run:

        def surprisals(sentences):  # None: left out (named in a warning)
            return scorer.surprisals(sentences, bits=True, batch_size=batch_size, progress=False, on_error=on_error,
                                     sources=quoted_sentences(sentences))

        def score_fn(sentences):
            return map_sentences(surprisals, sentences, batch_size, run, progress, "SyntaxGym")

        metrics = evaluate_suites(score_fn, suites, limit=limit, rule=rule)
        if run is not None:
            data = {"suites_dir": str(suites_dir), "suite_names": [s.name for s in suites], **metrics["counts"]}
            summary = {key: value for key, value in metrics.items() if key != "items"}
            files["json"] = save_results(run.directory, "sg", summary, model, data, options, stem=run.stem)
            files["csv"] = write_suite_csv(metrics, run.path(".csv"))
            files["items_csv"] = write_item_csv(metrics, run.path("_items.csv"))
            name = str(getattr(model.config, "_name_or_path", "") or "model")
            files["png"] = plot_circuits(metrics, run.path(".png"), title=f"SyntaxGym by circuit: {name}")
    metrics["files"] = file_names(files)
    return metrics


__all__ = [
    "CIRCUITS", "CIRCUIT_PREFIXES", "EXCLUDED_SUITES", "PAPER_SUITES", "RULES", "SUITE_CIRCUITS", "Condition",
    "Formula", "FormulaError", "Item", "Region", "Suite", "circuit_of", "evaluate_suites", "format_summary",
    "load_suite", "load_suites", "parse_formula", "plot_circuits", "run_syntaxgym", "suite_files",
    "write_item_csv", "write_suite_csv",
]
