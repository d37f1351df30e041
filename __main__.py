"""`python -m fusec ...`: the `fusec` command (`fusec/command.py`)."""

import sys

from fusec.command import main

sys.exit(main())
