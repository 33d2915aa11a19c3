"""The papers' tables of settings, and how a preset compares with them (`hf-slm presets --paper N`, the model cards'
"Differences from the paper", tests/test_paper_settings.py).

A family's record names its paper's table (Family.paper_table); the families of one paper share it. A table holds,
for every preset that is one of the paper's settings, each field of the preset ("model.hidden_size",
"training.batch_size") with the paper's value, where the paper gives it, and, where the preset holds another value on
purpose, why; a "parameters" row compares the parameter count of the preset's model with the paper's. Its notes
say what differs beyond the presets' fields (the tokenizer, the parser of the silver trees, ...).

A comparison row is "same" (the preset holds the paper's value), "differs" (another value, for the reason given),
or "unexplained": a field the table does not list, a value that differs without a reason, or a reason left over
for a value that no longer differs. tests/test_paper_settings.py holds every paper's presets to no unexplained row.

This module names no family: the tables are the families' own (hf_slm/families/*_paper.py).
"""

import math
from dataclasses import dataclass, field

# The paper gives no value for the field (the row's reason says what the preset holds instead).
NOT_GIVEN = "not given"
# The field of a table row that compares parameter counts.
PARAMETERS = "parameters"


@dataclass(frozen=True)
class PaperValue:
    """One value of a paper's table.

    value: the paper's value (NOT_GIVEN where it gives none).
    source: where the paper gives it ("Figure 9", "Table 6", "section 4"), or where it says nothing.
    reason: why the preset holds another value (empty: it holds the paper's).
    """

    value: object
    source: str
    reason: str = ""


@dataclass(frozen=True)
class ParameterCount:
    """The parameter count a paper gives for a preset's model.

    millions: the paper's count in millions, as it prints it (17.7 for "17.7M").
    source: where it gives it.
    vocab_size: the vocabulary the count is computed with (the paper's; a preset's vocabulary may come from its
        tokenizer).
    reason: why the count differs, where it does by more than the paper's rounding.
    digits: the decimals the paper prints (1 for "17.7M", 0 for "12M"): a count that rounds to its value is the same.
    """

    millions: float
    source: str
    vocab_size: int | None = None
    reason: str = ""
    digits: int = 1


@dataclass(frozen=True)
class PaperTable:
    """A paper's settings, for the presets that are its settings.

    paper: the paper ("000").
    title: what the table is ("Figure 9 and section 3").
    presets: {preset name: {field: PaperValue}}, fields named "model.X" / "training.X".
    parameters: {preset name: ParameterCount}.
    notes: (what, the paper's, this library's, why) of what differs beyond the presets' fields.
    count_parameters: a reference ("module:function") to count(model) -> the number of parameters the paper's count
        compares with (default: every parameter; a model whose weights are partly held at zero by a mask counts the
        others).
    """

    paper: str
    title: str
    presets: dict
    parameters: dict = field(default_factory=dict)
    notes: tuple = ()
    count_parameters: str | None = None


@dataclass(frozen=True)
class ComparisonRow:
    """One field of a preset beside the paper's value: status "same", "differs" or "unexplained"."""

    preset: str
    field: str
    ours: object
    paper: object
    source: str
    status: str
    reason: str = ""


_ABSENT = "(absent)"


def _same(ours, paper):
    if isinstance(ours, float) or isinstance(paper, float):
        try:
            return math.isclose(float(ours), float(paper), rel_tol=1e-9, abs_tol=0.0)
        except (TypeError, ValueError):
            return False
    return ours == paper


def _row(preset, name, ours, given):
    if given is None:
        return ComparisonRow(preset, name, ours, _ABSENT, "", "unexplained",
                             "the paper's table does not list this field")
    if ours is _ABSENT and given.value is NOT_GIVEN and given.reason:  # a paper setting the preset leaves to its defaults
        return ComparisonRow(preset, name, ours, given.value, given.source, "differs", given.reason)
    same = given.value is not NOT_GIVEN and _same(ours, given.value)
    if same and not given.reason:
        return ComparisonRow(preset, name, ours, given.value, given.source, "same")
    if not same and given.reason:
        return ComparisonRow(preset, name, ours, given.value, given.source, "differs", given.reason)
    why = ("a reason is given, but the preset holds the paper's value" if same
           else "the preset holds another value, and the table gives no reason")
    return ComparisonRow(preset, name, ours, given.value, given.source, "unexplained", why)


def preset_fields(preset):
    """{"model.X" / "training.X": value} of a preset."""
    return {f"{part}.{name}": value for part in ("model", "training") for name, value in preset[part].items()}


def compare_preset(table, name, preset, count=None):
    """The ComparisonRows of preset `name` against `table`: each field of the preset and of the table's column, and
    its parameter count when `count` (vocab_size -> the count) is given and the table gives one."""
    ours = preset_fields(preset)
    given = table.presets.get(name, {})
    rows = [_row(name, key, ours.get(key, _ABSENT), given.get(key)) for key in sorted(set(ours) | set(given))]
    expected = table.parameters.get(name)
    if expected is not None and count is not None:
        counted = count(expected.vocab_size)
        shown = f"{counted:,} ({counted / 1e6:.1f}M)"
        # The paper prints millions with one decimal: a count that rounds to it is the paper's.
        same = round(counted / 1e6, expected.digits) == expected.millions
        status = "same" if same and not expected.reason else "differs" if not same and expected.reason else "unexplained"
        reason = expected.reason if status != "unexplained" else (
            "a reason is given, but the count is the paper's" if same else "the count differs, and the table gives no "
                                                                          "reason")
        source = expected.source + (f", vocabulary {expected.vocab_size:,}" if expected.vocab_size else "")
        paper = f"{expected.millions:.{expected.digits}f}M"
        rows.append(ComparisonRow(name, PARAMETERS, shown, paper, source, status, reason))
    return rows


def compare_table(table, presets, count=None):
    """Every ComparisonRow of the table's presets (`presets`: {name: preset}); a preset of the table that does not
    exist is one unexplained row. `count(name, vocab_size)` counts a preset's parameters (None: not compared)."""
    rows = []
    for name in table.presets:
        if name not in presets:
            rows.append(ComparisonRow(name, "(preset)", _ABSENT, name, table.title, "unexplained",
                                      "the table lists a preset that does not exist"))
            continue
        rows.extend(compare_preset(table, name, presets[name],
                                   None if count is None else (lambda vocab, name=name: count(name, vocab))))
    return rows


def differences_text(table, name, preset):
    """The card's "Differences from the paper" lines of preset `name` (no parameter count: that needs the model):
    each field that differs, with its reason, then the table's notes."""
    lines = []
    for row in compare_preset(table, name, preset) if name is not None and name in table.presets else ():
        if row.status != "same":
            lines.append(f"`{row.field}`: {_shown(row.ours)} here, {_shown(row.paper)} in paper {table.paper} "
                         f"({row.source}): {row.reason}")
    lines.extend(f"{what}: {ours} here, {paper} in paper {table.paper}: {why}" for what, paper, ours, why in table.notes)
    return lines


def _shown(value):
    return value if isinstance(value, str) else repr(value)


def format_comparison(table, rows, other_presets=()):
    """`hf-slm presets --paper N`'s text: the table's rows preset by preset, then its notes, then the family presets
    that are none of the paper's settings."""
    lines = [f"paper {table.paper}: {table.title}"]
    headers = ("field", "preset", "paper", "source", "")
    for preset in dict.fromkeys(row.preset for row in rows):
        chosen = [row for row in rows if row.preset == preset]
        cells = [(row.field, _shown(row.ours), _shown(row.paper), row.source,
                  {"same": "", "differs": f"differs: {row.reason}", "unexplained": f"UNEXPLAINED: {row.reason}"}[
                      row.status]) for row in chosen]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers[:4])]
        lines.append("")
        lines.append(preset)
        lines.append("  " + "  ".join(f"{h:<{w}}" for h, w in zip(headers, widths)))
        for cell in cells:
            lines.append("  " + "  ".join(f"{c:<{w}}" for c, w in zip(cell, widths)) + ("  " + cell[4] if cell[4]
                                                                                         else ""))
    if table.notes:
        lines.append("")
        lines.append("beyond the presets' fields:")
        for what, paper, ours, why in table.notes:
            lines.append(f"  {what}: paper {paper}; here {ours}: {why}")
    if other_presets:
        lines.append("")
        lines.append("presets of these families that are none of the paper's settings: " + ", ".join(other_presets))
    unexplained = sum(row.status == "unexplained" for row in rows)
    lines.append("")
    lines.append(f"{sum(row.status == 'differs' for row in rows)} differences, each with its reason; "
                 f"{unexplained} unexplained")
    return "\n".join(lines)


def count_preset_parameters(name, vocab_size=None, table=None):
    """The parameter count of preset `name`'s model (with `vocab_size` instead of the preset's, when given), built on
    PyTorch's meta device (no memory, no initialization), counted as `table.count_parameters` says (default: every
    parameter)."""
    import torch

    from .registry import causal_lm_for_config, preset_config, resolve

    config = preset_config(name, **({} if vocab_size is None else {"vocab_size": vocab_size}))
    with torch.device("meta"):
        model = causal_lm_for_config(config)
    if table is not None and table.count_parameters is not None:
        return resolve(table.count_parameters)(model)
    return sum(parameter.numel() for parameter in model.parameters())
