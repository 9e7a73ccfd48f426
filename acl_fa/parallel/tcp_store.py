"""Root info over TCP (MASTER_ADDR / MASTER_PORT, as torchrun-style launchers set them).

Rank 0 listens on the address and answers every connection with the HCCL root info, prefixed by
a 4-byte magic and a 4-byte length (network order), until `size - 1` ranks took it or its
deadline passed; every other rank connects (retrying while rank 0 is not listening yet), reads
the bytes and closes. Nothing else crosses: it is a one-key store.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

__all__ = ["serve_root", "fetch_root"]

_MAGIC = b"AFRI"


def serve_root(host: str, port: int, root: bytes, clients: int, timeout: float) -> threading.Thread:
    """Listens now (so a bind error, e.g. the port in use, is raised here) and serves `root` to
    `clients` connections on a daemon thread (returned) for at most `timeout` seconds."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host, port))
        server.listen(max(clients, 1))
    except OSError:
        server.close()
        raise
    message = _MAGIC + struct.pack("!I", len(root)) + root
    deadline = time.monotonic() + timeout

    def run():
        served = 0
        try:
            while served < clients and time.monotonic() < deadline:
                server.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    continue
                with conn:
                    conn.settimeout(10.0)
                    try:
                        conn.sendall(message)
                        served += 1
                    except OSError:
                        pass
        finally:
            server.close()

    thread = threading.Thread(target=run, name="acl-fa root-info store", daemon=True)
    thread.start()
    return thread


def fetch_root(host: str, port: int, rank: int, timeout: float) -> bytes:
    """The root info from rank 0's store; TimeoutError naming the address when it is not served
    within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))) as s:
                data = b""
                while len(data) < 8 or len(data) < 8 + struct.unpack("!I", data[4:8])[0]:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            if data[:4] == _MAGIC and len(data) >= 8 and len(data) == 8 + struct.unpack("!I", data[4:8])[0]:
                return data[8:]
            last = f"a reply of {len(data)} bytes that is not root info"
        except OSError as exc:
            last = exc.strerror or str(exc)
        time.sleep(0.05)
    raise TimeoutError(f"rank {rank}: rank 0 did not serve the root info at {host}:{port} (MASTER_ADDR:MASTER_PORT) "
                       f"within {timeout:g} s (last attempt: {last})")
