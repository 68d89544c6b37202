"""The SparkSession the checker runs in.

Local mode (``local[2]``) by default, but whatever the user configured outside this code wins:
``--master``/``master=`` first, then a session that is already running (a notebook, the pyspark
shell), then a JVM launched by ``spark-submit``, then ``PYSPARK_SUBMIT_ARGS``, ``SPARK_MASTER`` /
``SPARK_DRIVER_MEMORY`` and ``spark-defaults.conf``. Our defaults only fill in keys nobody set:
few shuffle partitions (traces of a test run are small), no web UI, UTC, errors-only logging.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
APP_NAME = "zabray-check"

# Settings that only take effect when the driver JVM starts.
_LAUNCH_DEFAULTS: dict[str, str] = {
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
# Session settings, applied after start unless already configured.
_SQL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.debug.maxToStringFields": "200",
}

_LOG4J2 = """\
# zabray check: Spark warnings and errors only, minus the known noise. Set
# spark.driver.extraJavaOptions (-Dlog4j2.configurationFile=...) yourself to override.
# The root level stays WARN: in PySpark, Spark announces any other level on stderr.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.window.name = org.apache.spark.sql.execution.window
logger.window.level = error
logger.strings.name = org.apache.spark.sql.catalyst.util.SparkStringUtils
logger.strings.level = error
logger.cache.name = org.apache.spark.sql.execution.CacheManager
logger.cache.level = error
"""


def _log4j_file() -> Path:
    """A log4j2 config file for the driver JVM, in the temp dir (rewritten only if it differs)."""
    path = Path(tempfile.gettempdir()) / f"zabray-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)
    return path


def _defaults_conf() -> dict[str, str]:
    """``spark-defaults.conf`` from ``SPARK_CONF_DIR`` or ``SPARK_HOME/conf``, if any."""
    dirs = [os.environ.get("SPARK_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        dirs.append(os.path.join(os.environ["SPARK_HOME"], "conf"))
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, "spark-defaults.conf")):
            out: dict[str, str] = {}
            for line in Path(d, "spark-defaults.conf").read_text().splitlines():
                parts = re.split(r"[\s=]+", line.strip(), maxsplit=1)
                if parts[0] and not parts[0].startswith("#"):
                    out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
            return out
    return {}


def external_settings() -> dict[str, str]:
    """Spark settings given outside this code, lowest precedence first (later ones win)."""
    out = _defaults_conf()
    if os.environ.get("SPARK_MASTER"):
        out["spark.master"] = os.environ["SPARK_MASTER"]
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        out["spark.driver.memory"] = os.environ["SPARK_DRIVER_MEMORY"]
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    flags = {"--master": "spark.master", "--driver-memory": "spark.driver.memory",
             "--driver-java-options": "spark.driver.extraJavaOptions"}
    for i, arg in enumerate(args[:-1]):
        if arg in flags:
            out[flags[arg]] = args[i + 1]
        elif arg == "--conf" and "=" in args[i + 1]:
            key, _, value = args[i + 1].partition("=")
            out[key] = value
    return out


def get_session(master: str | None = None, *, app_name: str = APP_NAME,
                conf: Mapping[str, str] | None = None) -> SparkSession:
    """Return the active SparkSession, or start one with the precedence in the module docstring.

    ``conf`` entries are applied as if the user had set them (they beat our defaults, not
    ``master``). A session that is already running is returned as is: its JVM settings can no
    longer change, so a different ``master`` only logs a warning.
    """
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if master and master != running:
            log.warning("a SparkSession is already running on %s; ignoring master=%s", running, master)
        return active

    builder = SparkSession.builder.appName(app_name)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit launched the JVM with its conf
    given = {**external_settings(), **(dict(conf) if conf else {})}
    if master:
        builder = builder.master(master)
    elif not submitted and "spark.master" not in given:
        builder = builder.master(DEFAULT_MASTER)
    if not submitted:
        for key, value in {**_LAUNCH_DEFAULTS, **_SQL_DEFAULTS}.items():
            if key not in given:
                builder = builder.config(key, value)
        if "spark.driver.extraJavaOptions" not in given:
            builder = builder.config("spark.driver.extraJavaOptions",
                                     f"-Dlog4j2.configurationFile=file:{_log4j_file()}")
        chosen = master or given.get("spark.master", DEFAULT_MASTER)
        if chosen.startswith("local") and "spark.driver.host" not in given:
            # No hostname lookups in local mode: quieter, and works without a resolvable hostname.
            builder = builder.config("spark.driver.host", "127.0.0.1")
            builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
        if chosen.startswith("local") and "spark.pyspark.python" not in given and not os.environ.get("PYSPARK_PYTHON"):
            # Python workers (the history checks' UDFs) run this interpreter: zabray and pyarrow are here.
            os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if submitted:
        # Under spark-submit only fill SQL settings the submitted conf left unset.
        set_keys = {k for k, _ in spark.sparkContext.getConf().getAll()}
        for key, value in _SQL_DEFAULTS.items():
            if key not in set_keys and key not in given:
                spark.conf.set(key, value)
    log.info("SparkSession on %s (Spark %s)", spark.sparkContext.master, spark.version)
    return spark
