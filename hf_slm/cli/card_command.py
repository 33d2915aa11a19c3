"""`hf-slm card DIR`: write a checkpoint's model card (README.md) from its config and saved results."""

from ..model_cards import DEFAULT_LICENSE


def command_card(args):
    from ..publishing.model_card import write_model_card

    path = write_model_card(args.checkpoint, output=args.output, repo_id=args.repo, revision=args.revision,
                            license=args.license, datasets=args.dataset, overwrite=args.overwrite)
    print(f"wrote {path}")
    return 0


def add_card_command(commands):
    """Add `card` to the `hf-slm` subcommands (`commands`, an argparse subparsers object)."""
    card = commands.add_parser(
        "card",
        help="write a checkpoint's model card (README.md) from its config, training record and eval_results/",
        description="Write the model card of a checkpoint folder: YAML metadata, what the model is, how to load "
        "it with a pinned revision, its size, training record and saved evaluation results.",
    )
    card.add_argument("checkpoint", metavar="DIR", help="checkpoint folder (with config.json)")
    card.add_argument("--output", metavar="FILE",
                      help="where to write (default: DIR/README.md). A card written by `hf-slm card` there is "
                      "replaced; any other file only with --overwrite")
    card.add_argument("--overwrite", action="store_true",
                      help="replace the file at the path even when `hf-slm card` did not write it (a hand-written "
                      "README.md)")
    card.add_argument("--repo", metavar="ORG/NAME", help="the hub repository, for the loading example and metadata")
    card.add_argument("--revision", metavar="SHA", help="the commit users should pin (default: a placeholder)")
    card.add_argument("--license", default=DEFAULT_LICENSE,
                      help=f"license id of the weights (default {DEFAULT_LICENSE}; the card states that the data "
                      "keeps its own terms)")
    card.add_argument("--dataset", action="append", metavar="ID",
                      help="a dataset id for the metadata (repeatable; default: the training record's data files)")
    card.set_defaults(function=command_card)
    return card
