"""python -m nbspam: the same as the nbspam command."""

from .entry import main

if __name__ == "__main__":
    main()
