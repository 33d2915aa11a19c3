"""The `hf-slm` command line (commands.py); `python -m hf_slm.cli` and the entry point run `main`."""

from .commands import main

__all__ = ["main"]
