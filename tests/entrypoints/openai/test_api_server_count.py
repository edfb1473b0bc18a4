# SPDX-License-Identifier: Apache-2.0
"""`vllm serve --api-server-count 2`, vLLM's scale-out of the HTTP side:
several API server processes accept on one port, in front of one engine.
With stock vLLM and the vllm-splade plugin, on a server with an API key,
every process must serve /embed_sparse, and lock it, as one process does:
the plugin attaches its route in each."""
import http.client
import json
import os
import re
from pathlib import Path

import pytest

from hybrid import models
from tests.conftest import ROOT
from tests.entrypoints.openai.conftest import API_KEY
from tests.utils import SpladeServer


def owner(port: int, client_port: int, pids: set[int]) -> int:
    """The pid among `pids` whose socket is the server side of the
    loopback connection from `client_port`: /proc/net/tcp's inode of
    (local :port, remote :client_port), then the pid holding that inode."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        # Inode 0: a connection the kernel holds that no process accepted.
        if (int(f[1].split(":")[1], 16) == port
                and int(f[2].split(":")[1], 16) == client_port and f[9] != "0"):
            inode = f[9]
    assert inode, f"no server socket for client port {client_port}"
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    raise AssertionError(f"socket {inode} is none of {pids}")


def post(conn: http.client.HTTPConnection, key: str | None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request("POST", "/embed_sparse",
                 json.dumps({"inputs": "sparse retrieval with vLLM"}), headers)
    r = conn.getresponse()
    return r.status, json.loads(r.read())


@pytest.fixture(scope="module")
def server():
    """A SparseEncoder folder, no flags but the scale-out, on stock vLLM
    (the unpatched build of the pin) with the plugin."""
    site = os.environ.get("SPLADE_STOCK_SITE", str(ROOT / "build/vllm-base-site"))
    folder = models.ensure_splade(ROOT / "build/models/splade-tiny",
                                  ROOT / models.SPLADE)
    # Several API servers need the engine in a process of its own.
    env = {"PYTHONPATH": site, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    with SpladeServer(str(folder), hf_overrides=None, env=env, api_key=API_KEY,
                      extra_args=("--api-server-count", "2"), timeout=300) as s:
        yield s


def test_every_api_server_process_serves_and_locks_embed_sparse(server):
    log = Path(server.log.name).read_text()
    pids = {int(p) for p in re.findall(r"\(ApiServer_\d+ pid=(\d+)\)", log)}
    assert len(pids) == 2, f"not two API servers: see {server.log.name}"
    answers: dict[int, list] = {pid: [] for pid in pids}
    denied: dict[int, set] = {pid: set() for pid in pids}
    for i in range(128):  # new connections until both processes answered both
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        # Answered, so accepted: then the owner of the server's socket.
        status, body = post(conn, None if i % 2 else API_KEY)
        if conn.sock is None:  # the server closed it: no owner to find
            continue
        pid = owner(server.port, conn.sock.getsockname()[1], pids)
        if i % 2:
            denied[pid].add(status)
        else:
            assert status == 200, body
            answers[pid].append(body)
        conn.close()
        if all(answers.values()) and all(denied.values()):
            break
    assert all(answers.values()), {p: len(a) for p, a in answers.items()}
    # Each process locks the route (401 without the key) and answers alike.
    assert denied == {pid: {401} for pid in pids}
    first = [a[0] for a in answers.values()]
    assert first[0] == first[1] and first[0][0], first
