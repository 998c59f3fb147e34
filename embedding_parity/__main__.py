"""python -m embedding_parity: the same command line as compare.py."""

import sys

from embedding_parity.cli import main

sys.exit(main(prog="python -m embedding_parity"))
