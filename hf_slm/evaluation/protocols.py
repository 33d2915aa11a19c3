"""The papers' evaluation protocols by name: `hf-slm eval ppl|sg|blimp|parse|uas|rerank --protocol paperNNN` sets what
that paper's evaluation sections set, and the results file records each setting with where it comes from
(hf_slm/cli/commands.py writes the record into the result's JSON as "protocol").

A protocol is one paper's; it applies to the models of the families whose record names that paper (Family.paper),
and another family's model is refused, naming the protocol that fits. For each evaluation the paper runs it sets
command options (`beam_size`, `max_proposals`, ...) to the paper's values; an option the command gives wins (the
record says so). An evaluation the paper does not run is refused. What the paper leaves open is listed as
a note: the command's defaults then hold. Without --protocol nothing changes.

`proposals_required`: the paper's number comes from proposal trees (p(x) >= the sum of p(x, y) over them): the command
must be given them (--proposals), as the paper's parser drew them, or draw them with a proposal parser
(--proposal-parser DIR, hf_slm/parsers/); `max_proposals` then keeps the first N per sentence (draws N unique ones).
"""

from dataclasses import dataclass, field

# The protocol's names, written out for the command line (building the parser imports nothing else).
PROTOCOL_NAMES = ("paper000", "paper001", "paper002", "paper003")
# The `hf-slm eval` commands a protocol may set.
PROTOCOL_EVALUATIONS = ("ppl", "sg", "blimp", "parse", "uas", "rerank")
REQUIRED = "required"


@dataclass(frozen=True)
class Setting:
    """One value a paper's evaluation sets: the command option it sets (argparse's name), its value, the source."""

    option: str
    value: object
    source: str


@dataclass(frozen=True)
class Protocol:
    """A paper's evaluation protocol: {evaluation: (Settings, notes)}; the notes say what the paper leaves unstated
    (the command's defaults hold) or what the command does as the paper says without an option."""

    name: str
    paper: str
    evaluations: dict = field(default_factory=dict)


_PROPOSALS_000 = "section 3.1 (footnote 4: J = 300 unique proposal trees per sentence, from a discriminative RNNG)"
_PROPOSALS_002 = "section 4.1 (300 proposal trees per sentence, sampled from Biaffine-roberta)"
_PROPOSALS_003 = "section 3.1 (300 unlabeled proposal trees per sentence, sampled from a CRF parser)"
_SEARCH_UNSTATED = "word beam and fast track: not stated (the command's defaults)"


def _proposals(count, source):
    return (Setting("proposals", REQUIRED, source), Setting("max_proposals", count, source))


PROTOCOLS = {protocol.name: protocol for protocol in (
    Protocol("paper000", "000", {
        "ppl": (_proposals(300, _PROPOSALS_000),
                ("document level: the greedy best-tree prefix of section 3.1 is --document-level's",)),
        "rerank": (_proposals(300, "section 3.2 (the 300 proposals of a discriminative RNNG)"),
                   ("bracketing F1 by EVALB's rules (section 3.2): the command's scorer (COLLINS.prm)",)),
        "sg": ((), ("section 3.3 gives no search setting for the approximate marginalization: beam, word beam and "
                    "fast track are the command's defaults",)),
    }),
    Protocol("paper001", "001", {
        "ppl": ((), ("p(x) is exact (section 4.1): nothing to set",)),
        "sg": ((), ("surprisals are exact (section 4.2): nothing to set",)),
        "parse": ((), ("with a .conllu --gold: UF1 against the converted trees Gamma (section 4.3), spans of 2+ words, "
                       "the sentence excluded, punctuation kept as Gamma holds it; with PTB trees: Table 8's EVALB UF1 "
                       "(punctuation and trivial spans ignored)",)),
    }),
    Protocol("paper002", "002", {
        "ppl": (_proposals(300, _PROPOSALS_002), ()),
        "blimp": (_proposals(300, "section 4.2 (the setup of section 4.1: 300 trees per sentence)"), ()),
        "sg": ((Setting("beam_size", 300, "section 4.2 (\"We fix the beam size at 300\")"),), (_SEARCH_UNSTATED,)),
        "uas": (_proposals(300, "section 4.3 (300 trees from Biaffine-roberta, reranked)"),
                ("punctuation: not stated (the command's rule: punctuation not scored unless "
                 "--include-punctuation)",)),
    }),
    Protocol("paper003", "003", {
        "ppl": (_proposals(300, _PROPOSALS_003),
                ("document level: the greedy best-tree prefix of section 3.1 is --document-level's",)),
        "sg": ((Setting("beam_size", 300, "section 3.2 and Appendix B (beam size 300)"),
                Setting("constraints", "paper003-sg", "section 3.2 and Appendix B (n_c = the sentence's length, "
                                                      "p_c = 3)")),
               (_SEARCH_UNSTATED,)),
    }),
)}


# What each paper drew its proposal trees from: the kinds of hf-slm's parsers (hf_slm/parsers/kinds.py) of that kind,
# and the paper's words.
PROPOSAL_PARSERS = {
    "000": (("rnng-discriminative",), "a discriminative RNNG (section 3.1, footnote 4)"),
    "002": (("biaffine",), "Biaffine-roberta, a biaffine dependency parser over RoBERTa (section 4.1)"),
    "003": (("crf-unlabeled", "crf"), "a CRF constituency parser (Zhang et al. 2020), unlabelled trees (section 3.1)"),
}


def proposal_parser_note(name, kind):
    """What the results say of the parser that drew a protocol's proposals (`kind`: its kind's name): the paper's
    parser, and whether this one is of its kind (and if not, that it stands in)."""
    from ..parsers.kinds import parser_kinds

    kinds, paper_parser = PROPOSAL_PARSERS.get(protocol_named(name).paper, ((), None))
    if paper_parser is None:
        return None
    record = {"paper_drew_from": paper_parser, "drawn_by": f"a {kind} parser", "same_kind": kind in kinds}
    if not record["same_kind"]:
        available = any(other.name in kinds for other in parser_kinds())
        record["note"] = (f"the paper drew from {paper_parser}" + ("" if available else ", which hf-slm has no parser "
                          "of yet") + f"; a {kind} parser stands in, so the number is not the paper's protocol exactly")
    return record


def protocol_named(name):
    if name not in PROTOCOLS:
        raise ValueError(f"--protocol {name!r}: expected one of {sorted(PROTOCOLS)}")
    return PROTOCOLS[name]


def apply_protocol(name, evaluation, family, given):
    """Apply protocol `name` to `hf-slm eval {evaluation}` of a model of `family` (its Family record).

    given: {option: value} of the command's options, None where the command left one out. Returns
    (options, record): `given` with the protocol's values where the command left them out, and what the results file
    records (the protocol's settings, each with its source and whether the protocol or the command set it, and its
notes). ValueError: the protocol is another paper's, the paper does not run this evaluation, or it needs
    proposals the command was not given."""
    protocol = protocol_named(name)
    if family.paper != protocol.paper:
        raise ValueError(f"--protocol {name}: paper {protocol.paper}'s evaluation protocol applies to the models of "
                         f"paper {protocol.paper}'s families; this model is a {family.name} model (paper "
                         f"{family.paper}): use --protocol paper{family.paper}, or leave --protocol out")
    if evaluation not in protocol.evaluations:
        raise ValueError(f"--protocol {name}: paper {protocol.paper} runs no '{evaluation}' evaluation; its protocol "
                         f"covers eval {', '.join(protocol.evaluations)}")
    settings, notes = protocol.evaluations[evaluation]
    options, recorded = dict(given), {}
    for setting in settings:
        if setting.value == REQUIRED:
            # proposals: a file (--proposals), or drawn by a proposal parser (--proposal-parser)
            drawn = setting.option == "proposals" and given.get("proposal_parser") is not None
            if given.get(setting.option) is None and not drawn:
                alternative = " (or --proposal-parser DIR)" if setting.option == "proposals" else ""
                raise ValueError(f"--protocol {name}: eval {evaluation} needs --{setting.option.replace('_', '-')}"
                                 f"{alternative}: {setting.source}")
            recorded[setting.option] = {"value": "drawn by --proposal-parser" if drawn else "given",
                                        "source": setting.source, "from": "command"}
            continue
        if given.get(setting.option) is None:
            options[setting.option] = setting.value
            recorded[setting.option] = {"value": setting.value, "source": setting.source, "from": "protocol"}
        else:
            recorded[setting.option] = {"value": given[setting.option], "paper": setting.value,
                                        "source": setting.source, "from": "command (overrides the protocol)"}
    record = {"name": name, "paper": protocol.paper, "evaluation": evaluation, "settings": recorded,
              "notes": list(notes)}
    return options, record
