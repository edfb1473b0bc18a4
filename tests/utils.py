# SPDX-License-Identifier: Apache-2.0
"""A vLLM server on a free loopback port, started and stopped by PID."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

SPLADE_OVERRIDES = {"architectures": ["BertSpladeSparseEmbeddingModel"]}
# The vllm-splade plugin's two entry points: its models (on by installation,
# but VLLM_PLUGINS is an allowlist) and its /embed_sparse (opt-in).
PLUGINS = "vllm_splade,vllm_splade_embed_sparse"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SpladeServer:
    """`vllm serve` of a SPLADE checkpoint, for the duration of a with."""

    def __init__(self,
                 model: str,
                 hf_overrides: Optional[dict] = SPLADE_OVERRIDES,
                 extra_args: tuple[str, ...] = (),
                 timeout: float = 180.0,
                 name: str = "splade",
                 env: Optional[dict[str, str]] = None,
                 api_key: Optional[str] = None,
                 enforce_eager: bool = True,
                 dtype: Optional[str] = "float32") -> None:
        """`enforce_eager=False`: compiled, with kernel warm-up, as a bare
        `vllm serve` starts; `dtype=None`: vLLM's default for the model."""
        self.model = name
        # With a key, every request of request() carries it unless told not.
        self.api_key = api_key
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [
            sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model,
            "--served-model-name", self.model, "--runner", "pooling",
            "--host", "127.0.0.1", "--port",
            str(self.port), *extra_args
        ]
        if dtype:
            self.args += ["--dtype", dtype]
        if enforce_eager:
            self.args += ["--enforce-eager"]
        if hf_overrides:
            self.args += ["--hf-overrides", json.dumps(hf_overrides)]
        if api_key:
            self.args += ["--api-key", api_key]
        self.timeout = timeout
        self.env = env or {}
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "SpladeServer":
        self.start()
        return self.wait_healthy()

    def start(self) -> "SpladeServer":
        """Start the server; wait_healthy() waits for it (two servers
        started before either is waited for come up together)."""
        # VLLM_PLUGINS: the vllm-splade plugin's models and its
        # /embed_sparse, as a user enables them (on the patched build its
        # models step aside).
        env = {
            **os.environ, "HF_HUB_OFFLINE": "1",
            "VLLM_PLUGINS": PLUGINS, **self.env
        }
        self.log = open(f"/tmp/splade-server-{self.port}.log", "w")
        self.proc = subprocess.Popen(self.args,
                                     env=env,
                                     stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.deadline = time.monotonic() + self.timeout
        return self

    def wait_healthy(self) -> "SpladeServer":
        assert self.proc is not None, "start() first"
        while time.monotonic() < self.deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        self.__exit__()
        raise TimeoutError(f"server not healthy in {self.timeout}s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    def health(self) -> int:
        with urllib.request.urlopen(self.url + "/health", timeout=10) as r:
            return r.status

    def request(self,
                path: str,
                body: Any = None,
                raw: Optional[bytes] = None,
                content_type: str = "application/json",
                timeout: float = 120.0,
                api_key: Optional[str] = "") -> tuple[int, bytes]:
        """POST `body` (or `raw`) to `path`. `api_key`: "" sends the
        server's key (if it has one), None none, a string that string."""
        data = raw if raw is not None else json.dumps(body).encode()
        headers = {"Content-Type": content_type}
        key = self.api_key if api_key == "" else api_key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url + path,
                                     data=data,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path: str, body: Any) -> Any:
        status, data = self.request(path, body)
        assert status == 200, (status, data[:500])
        return json.loads(data)

    def embeddings(self, texts: list[str], batch_size: int = 16) -> list:
        """/v1/embeddings of `texts`, `batch_size` texts a request."""
        vectors = []
        for i in range(0, len(texts), batch_size):
            body = self.post("/v1/embeddings", {
                "model": self.model,
                "input": texts[i:i + batch_size]
            })
            vectors += [d["embedding"] for d in body["data"]]
        return vectors


def usage_example(section: str) -> tuple[str, str]:
    """The shell and Python blocks of a section of docs/usage.md, which a
    test runs as written."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "docs/usage.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    shell = re.search(r"```bash\n(.*?)```", body, re.S).group(1)
    python = re.search(r"```python\n(.*?)```", body, re.S).group(1)
    return shell, python
