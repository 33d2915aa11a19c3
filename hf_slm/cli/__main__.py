"""`python -m hf_slm.cli ...` (torchrun, accelerate launch); exits with the command's status."""

import sys

from .commands import main

sys.exit(main())
