"""python -m nbspam: the same as the nbspam command."""

from .entry import run

if __name__ == "__main__":
    run()
