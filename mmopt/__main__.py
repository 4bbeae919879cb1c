"""``python -m mmopt``: the same as the ``mmopt`` console script (and ``python -m mmopt.cli``)."""

from mmopt.cli import main

if __name__ == "__main__":  # importing this module (e.g. for doctests) must not run the command line
    raise SystemExit(main())
