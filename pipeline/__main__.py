"""`python -m pipeline` is the `botstats` command."""

from .cli import main

if __name__ == "__main__":
    main()
