"""The spark-submit entry point: ``neardup spark`` as a script file.

spark-submit runs a file, not a module, so this file imports neardup absolutely::

    spark-submit --master yarn "$(python -c 'import neardup.spark.submit as m; print(m.__file__)')" \\
        dedup hdfs:///corpus/ --format jsonl --pairs hdfs:///out/pairs --clusters hdfs:///out/clusters

The arguments are those of ``neardup spark`` (``dedup INPUT ...``); errors print as one line
and exit 1, as the command does.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from neardup.cli.main import main as neardup

    neardup.main(args=["spark", *(sys.argv[1:] if argv is None else argv)], prog_name="neardup")


if __name__ == "__main__":
    main()
