"""A separate process that starts an embedded Weaviate with retrieval.engine.server.connect, for the
orphan-server and data-directory-lock tests in tests/test_faults.py.

    python fault_server.py DATA_DIR PORT GRPC_PORT

Prints "SERVING <server pid> <own pid>" once its server answers (it holds the data directory's lock from
then on), then obeys lines on stdin: "restart" connects again (after its server was killed: the same
process may start a new one on its own data directory), "exit" closes the client (stopping the server).
Errors are printed as "ERROR <type>: <message>". Kill it with SIGKILL to play a crashed run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from weaviate.classes.config import DataType, Property

from retrieval.config import load_settings
from retrieval.engine.server import connect


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def server_pid(client) -> int:
    return client._connection.embedded_db.process.pid  # the Popen of weaviate-client's embedded mode


def main() -> int:
    data_dir, port, grpc_port = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    settings = load_settings(
        env={}, config_file=None, data_dir=data_dir, embedded_port=port, embedded_grpc_port=grpc_port, collection="Orphan"
    )
    clients = []
    command = "start"
    while command:
        if command in ("start", "restart"):
            try:
                client = connect(settings)
                clients.append(client)
                if not client.collections.exists("Orphan"):
                    client.collections.create("Orphan", properties=[Property(name="note", data_type=DataType.TEXT)])
                say(f"SERVING {server_pid(client)} {os.getpid()}")
            except Exception as exc:
                say(f"ERROR {type(exc).__name__}: {exc}")
        elif command == "exit":
            break
        command = sys.stdin.readline().strip()
    for client in clients:
        client.close()
    say("CLOSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
