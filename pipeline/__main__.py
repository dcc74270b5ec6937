"""`python -m pipeline` is the `botstats` command."""

from .cli import main

main()
