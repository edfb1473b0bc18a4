"""engine-log.py config LOG: print the path of a vLLM logging config
(VLLM_LOGGING_CONFIG_PATH) that is vLLM's default (and uvicorn's, which
vLLM then hands the file to) plus one handler: every
engine core a process starts (its "Initializing a V1 LLM engine" line)
also goes to LOG. Servers, workers and test processes inherit the
variable, so LOG counts a lane's engine starts whatever process made them.
engine-log.py count LOG: print how many engines LOG records."""
import copy
import json
import sys
from pathlib import Path

START = "Initializing a V1 LLM engine"


def config(log: Path) -> Path:
    from uvicorn.config import LOGGING_CONFIG as UVICORN
    from vllm.logger import DEFAULT_LOGGING_CONFIG

    conf = copy.deepcopy(DEFAULT_LOGGING_CONFIG)
    # vLLM hands the file to uvicorn too (get_uvicorn_log_config): keep
    # uvicorn's own loggers, its access log among them, as they were.
    for part in ("formatters", "handlers", "loggers"):
        conf[part].update(copy.deepcopy(UVICORN[part]))
    conf["handlers"]["engine_starts"] = {
        "class": "logging.FileHandler",
        "filename": str(log),
        "formatter": "vllm",
        "level": "INFO",
    }
    conf["loggers"]["vllm.v1.engine.core"] = {
        "handlers": ["engine_starts"],
        "level": "INFO",
        "propagate": True,  # and to the console, as before
    }
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    path = log.with_suffix(".logging.json")
    path.write_text(json.dumps(conf, indent=1))
    return path


def count(log: Path) -> int:
    if not log.is_file():
        return 0
    return sum(START in line for line in log.read_text().splitlines())


if __name__ == "__main__":
    verb, log = sys.argv[1], Path(sys.argv[2]).resolve()
    print(config(log) if verb == "config" else count(log))
