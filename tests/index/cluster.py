# SPDX-License-Identifier: Apache-2.0
"""A Ray cluster on this machine: a head and a second node, each started by
`ray start` as a process of its own (in its own session, so that a test can
stop one node and leave the other)."""
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.utils import free_port

RAY = str(Path(sys.executable).parent / "ray")
# Small object stores: the shards travel as files, not as objects.
STORE = str(200 * 1024 * 1024)


def node_ip() -> str:
    from ray._private.services import get_node_ip_address
    return get_node_ip_address()


# Token authentication, as Ray 2.60 turns on for a new local cluster by
# itself and as a shared cluster should run: every process of the cluster
# and every driver has the mode and this cluster's own token (not a file
# in ~/.ray).
ENV = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


class Cluster:

    def __init__(self, temp_dir: Path, head_cpus: int = 1, node_cpus: int = 1):
        self.temp_dir = temp_dir
        self.port = free_port()
        self.address = f"{node_ip()}:{self.port}"
        self.head_cpus, self.node_cpus = head_cpus, node_cpus
        self.procs: dict[str, subprocess.Popen] = {}
        self.ids: dict[str, str] = {}

    def _start(self, name: str, *args: str) -> None:
        log = open(self.temp_dir / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats",
             "--object-store-memory", STORE, *args],
            env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> "Cluster":
        self._start("head", "--head", f"--port={self.port}",
                    f"--num-cpus={self.head_cpus}", "--include-dashboard=false",
                    f"--temp-dir={self.temp_dir / 'ray'}")
        self.wait_nodes(1)
        self.start_node()
        return self

    def start_node(self) -> None:
        self._start("node", f"--address={self.address}",
                    f"--num-cpus={self.node_cpus}")
        self.wait_nodes(2)

    def node_id(self, name: str) -> str:
        """The Ray node id of the head or the second node."""
        if name not in self.ids:
            out = subprocess.run(
                [sys.executable, "-c",
                 "import json, ray; ray.init(address='auto', logging_level='ERROR');"
                 "print(json.dumps([(n['NodeID'], 'node:__internal_head__' in "
                 "n['Resources']) for n in ray.nodes() if n['Alive']]))"],
                env={**ENV, "RAY_ADDRESS": self.address},
                capture_output=True, text=True, timeout=120, check=True)
            for node, head in json.loads(out.stdout.strip().splitlines()[-1]):
                self.ids["head" if head else "node"] = node
        return self.ids[name]

    def alive_nodes(self) -> int:
        out = subprocess.run(
            [sys.executable, "-c",
             "import ray; ray.init(address='auto', logging_level='ERROR');"
             "print(sum(n['Alive'] for n in ray.nodes()))"],
            env={**ENV, "RAY_ADDRESS": self.address},
            capture_output=True, text=True, timeout=120)
        return int(out.stdout.strip() or 0)

    def wait_nodes(self, n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"ray {name} exited: see "
                                       f"{self.temp_dir / name}.log")
            if self.alive_nodes() == n:
                return
            time.sleep(1)
        raise TimeoutError(f"{n} Ray nodes not up in {timeout} s")

    def stop_node(self, name: str = "node") -> None:
        """SIGKILL every process of the node: its raylet, its workers."""
        p = self.procs.pop(name)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def stop(self) -> None:
        for name in ("node", "head"):
            p = self.procs.pop(name, None)
            if p is None:
                continue
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
