"""A TCP proxy on 127.0.0.1 that can stall: while stalled it neither reads nor forwards a byte in
either direction, so every connection through it hangs as a half-open one does (the TLS
sessions stay intact: it never looks inside). `resume` lets the bytes held in the sockets'
buffers through late, as a network that recovers delivers what it held.

For tests only: one thread per direction per connection.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class StallProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.connections = 0
        threading.Thread(target=self._accept, name="stall-proxy", daemon=True).start()

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._flowing.wait()  # a connection attempt during a stall hangs too
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(source, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                self._flowing.wait()
                if not selector.select(timeout=0.2):
                    continue
                self._flowing.wait()  # stalled between readiness and the read: hold it
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            selector.close()
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
