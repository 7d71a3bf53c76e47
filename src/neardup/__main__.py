"""``python -m neardup``: the ``neardup`` command, for environments without the console script."""

from .cli.main import main

if __name__ == "__main__":
    main(prog_name="neardup")
