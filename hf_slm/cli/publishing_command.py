"""`hf-slm push DIR --repo ORG/NAME`: publish a checkpoint and say how to load exactly that commit."""

LOAD_TEMPLATE = """\
load exactly this commit (trust_remote_code runs the checkpoint's Python files: pin the revision):
  from transformers import AutoModelForCausalLM, AutoTokenizer
  model = AutoModelForCausalLM.from_pretrained("{repo}", revision="{sha}", trust_remote_code=True)
  tokenizer = AutoTokenizer.from_pretrained("{repo}", revision="{sha}", trust_remote_code=True)"""


def command_push(args):
    from huggingface_hub.errors import HfHubHTTPError

    from ..publishing.hub import push_checkpoint

    try:
        commit = push_checkpoint(args.directory, args.repo, private=args.private, revision=args.revision,
                                 commit_message=args.message, create_card=not args.no_card)
    except HfHubHTTPError as error:  # a refused token, a missing branch...: the Hub's own message, without a traceback
        lines = [line for line in str(error).splitlines()
                 if line.strip() and not line.startswith("For more information")]
        hint = ""
        if error.response is not None and error.response.status_code in (401, 403):
            hint = " (is HF_TOKEN, or the token `hf auth login` saved, allowed to write there?)"
        raise RuntimeError(f"pushing to {args.repo} failed: {'; '.join(lines)}{hint}") from error
    print(f"commit {commit.oid}")
    print(f"url    {commit.commit_url}")
    print(LOAD_TEMPLATE.format(repo=commit.repo_url.repo_id, sha=commit.oid))
    return 0


def add_publishing_commands(commands):
    """Add `push` to the `hf-slm` subcommands (an argparse subparsers object)."""
    push = commands.add_parser(
        "push",
        help="publish a checkpoint to the Hugging Face Hub (HF_TOKEN or `hf auth login`; HF_ENDPOINT for another hub)",
        description="Check a checkpoint (config, safetensors weights, hub code, tokenizer), write its model card if "
        "it has none, and upload it as one commit, leaving out pickle files and Trainer checkpoint-* folders. "
        "Prints the commit id to pin with revision=.",
    )
    push.add_argument("directory", metavar="DIR", help="checkpoint directory (saved with save_pretrained)")
    push.add_argument("--repo", required=True, metavar="ORG/NAME", help="repository (created if absent); NAME alone "
                      "means your own namespace")
    push.add_argument("--private", action="store_true", help="create the repository private")
    push.add_argument("--revision", metavar="BRANCH", help="branch to commit to (created from main if absent)")
    push.add_argument("--message", metavar="MSG", help="commit message")
    push.add_argument("--no-card", action="store_true", help="do not write README.md when the checkpoint has none")
    push.set_defaults(function=command_push)
    return push
