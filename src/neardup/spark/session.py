"""The SparkSession of a neardup job.

Under ``spark-submit`` the session comes from spark-submit's settings (``--master``,
``--conf``); the command's own ``--master`` and ``--conf`` only add to them. A few defaults
suit this job: small input files are still cut into several splits (so every core
fingerprints), and the console progress bar follows ``--progress``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark import SparkConf
from pyspark.sql import SparkSession

#: Defaults applied unless the caller sets them: a lower open cost lets Spark cut a few-MB
#: input into one split per core instead of one split in all.
DEFAULTS: Mapping[str, str] = {
    "spark.sql.files.openCostInBytes": "1048576",
    "spark.ui.showConsoleProgress": "false",
}


def build_session(
    master: str | None = None,
    partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "neardup",
) -> SparkSession:
    """A session for the job (an existing one is reused, with the settings applied); the
    defaults give way to anything spark-submit or ``conf`` sets."""
    submitted = SparkConf()  # spark-submit's settings, passed as Java system properties
    settings = {key: value for key, value in DEFAULTS.items() if not submitted.contains(key)}
    settings.update(conf or {})
    if partitions:
        settings["spark.sql.shuffle.partitions"] = str(partitions)
        settings["spark.sql.files.minPartitionNum"] = str(partitions)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
