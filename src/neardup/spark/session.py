"""The SparkSession of a neardup job.

Under ``spark-submit`` the session comes from spark-submit's settings (``--master``,
``--conf``); the command's own ``--master`` and ``--conf`` only add to them. A few defaults
suit this job: small input files are still cut into several splits (so every core
fingerprints), Spark's own console progress bar is off (the command reports each stage), and
in local mode the driver binds the loopback address.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

#: Defaults applied unless the caller sets them: a lower open cost lets Spark cut a few-MB
#: input into one split per core instead of one split in all.
DEFAULTS: Mapping[str, str] = {"spark.sql.files.openCostInBytes": "1048576"}
#: Applied unless ``conf`` sets them, whatever the JVM says: the command reports each stage
#: itself, and pyspark turns Spark's console bar on for the JVM it launches.
OWN: Mapping[str, str] = {"spark.ui.showConsoleProgress": "false"}
#: Local mode runs driver and executors in one JVM: on the loopback address its ports are not
#: open to the network, and a host name that does not resolve cannot stop the job.
LOCAL_DRIVER: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def session_settings(
    master: str | None,
    partitions: int | None,
    conf: Mapping[str, str] | None,
    submitted: SparkConf,
) -> dict[str, str]:
    """The settings the session gets: the defaults (and in local mode the loopback driver)
    unless ``submitted`` (the JVM's settings: spark-submit's, spark-defaults.conf) sets them,
    then OWN, then ``conf``, then the partition count. The master is ``master``, else the
    JVM's, else pyspark's local[*]."""
    chosen = master or submitted.get("spark.master", None) or "local[*]"
    defaults = {**DEFAULTS, **(LOCAL_DRIVER if chosen.startswith("local") else {})}
    settings = {key: value for key, value in defaults.items() if not submitted.contains(key)}
    settings.update(OWN)
    settings.update(conf or {})
    if partitions:
        settings["spark.sql.shuffle.partitions"] = str(partitions)
        settings["spark.sql.files.minPartitionNum"] = str(partitions)
    return settings


def _submitted(master: str | None, conf: Mapping[str, str] | None) -> SparkConf:
    """The settings the JVM starts with, read before the session exists: spark-submit's JVM
    is joined, else one is launched with ``conf`` (which may size it) and the master, as the
    session would launch it, and spark-defaults.conf is read on the way. Before a JVM is up,
    ``SparkConf()`` is empty, and a master chosen by spark-submit would go unseen."""
    launch = SparkConf().setAll(list((conf or {}).items()))
    if master:
        launch.setMaster(master)
    with _loopback_launch(master):
        SparkContext._ensure_initialized(conf=launch)
    return SparkConf()  # loaded from the JVM's system properties


@contextmanager
def _loopback_launch(master: str | None) -> Iterator[None]:
    """SPARK_LOCAL_IP=127.0.0.1 in the environment of a JVM launched here for a master given
    as local: the web UI binds by it alone (``spark.driver.bindAddress`` covers the other
    ports), and only a launch reads it. A master left to spark-defaults.conf is known only
    after the launch, so the UI of such a run follows the user's SPARK_LOCAL_IP."""
    launching = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    if not launching or not (master or "").startswith("local") or "SPARK_LOCAL_IP" in os.environ:
        yield
        return
    os.environ["SPARK_LOCAL_IP"] = LOCAL_DRIVER["spark.driver.host"]
    try:
        yield
    finally:
        del os.environ["SPARK_LOCAL_IP"]


def build_session(
    master: str | None = None,
    partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "neardup",
) -> SparkSession:
    """A session for the job (an existing one is reused, with the settings applied); the
    defaults give way to anything spark-submit or ``conf`` sets."""
    settings = session_settings(master, partitions, conf, _submitted(master, conf))
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
