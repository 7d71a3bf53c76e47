"""The app of one worker process of ``neardup serve --workers N``.

uvicorn starts each worker in a fresh process and builds its app from an import string, so
the command passes the store URL and the settings through the environment (the token by
the path of its file, never its value). Every worker opens the index itself; the store's
cross-process writer lock keeps their check-and-adds from splitting clusters, exactly as for
separate servers on one store.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from fastapi import FastAPI

from ..dedup.documents import Index
from ..errors import ConfigError
from .app import create_app
from .guard import configure
from .settings import ServiceSettings

URL_VARIABLE = "NEARDUP_SERVE_URL"
SETTINGS_VARIABLE = "NEARDUP_SERVE_SETTINGS"
TOKEN_FILE_VARIABLE = "NEARDUP_SERVE_TOKEN_FILE"
IMPORT_STRING = "neardup.service.factory:app_from_environment"


def worker_environment(url: str, settings: ServiceSettings, token_file: str | None) -> dict[str, str]:
    """What :func:`app_from_environment` reads, for the command to put in ``os.environ``."""
    values = {key: value for key, value in asdict(settings).items() if key != "token"}
    environment = {URL_VARIABLE: url, SETTINGS_VARIABLE: json.dumps(values)}
    if token_file is not None:
        environment[TOKEN_FILE_VARIABLE] = str(Path(token_file).resolve())
    return environment


def app_from_environment() -> FastAPI:
    """Open the index named by the environment (it must exist) and serve it."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        raise ConfigError(f"{URL_VARIABLE} is not set; start workers with `neardup serve URL --workers N`")
    values = json.loads(os.environ.get(SETTINGS_VARIABLE, "{}"))
    token_file = os.environ.get(TOKEN_FILE_VARIABLE)
    token = Path(token_file).read_text(encoding="utf-8").strip() if token_file else None
    settings = ServiceSettings(token=token, **values)
    configure(settings)  # this worker's connection guards
    return create_app(Index.open(url, create=False), settings, owns_index=True)
