"""python -m nbspam: the same as the nbspam command."""

from .cli.fast_start import run

if __name__ == "__main__":
    run()
