"""A TCP forwarder: pods reach the API server on the pod bridge, the API server stays on loopback.

kube-apiserver binds one address (127.0.0.1 here). Pods only reach the host's address on their
bridge, so this process listens there and copies bytes both ways; TLS passes through untouched
(the serving certificate also names the bridge address). Run as
`python -m kafka_rebalance_dev.devenv.forward LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: forward LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT", file=sys.stderr)
        return 2
    asyncio.run(serve(args[0], int(args[1]), args[2], int(args[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
