"""The server: its listeners, its limits, its signals and its log; the protocols in `spamd`
and `milter` do the talking.

One process, one thread running an asyncio event loop: a message is scored in about a
millisecond of Python that holds the interpreter anyway, so threads would add switching and
a stack each (a thousand idle connections would be a thousand threads) and no speed, while
the loop keeps an idle connection to a few kilobytes and every time-out to one line.
Reports and lessons, which read the full model or rewrite the file, run in a worker thread
so that scoring goes on meanwhile.

Listeners are Unix sockets by default, created under a temporary name with the mode and
group asked for and renamed into place (never bound or changed through a link someone
planted), or TCP when asked, with an allow-list of client networks. Under systemd the
sockets can come from socket activation (``LISTEN_FDS``) and readiness is told through
``NOTIFY_SOCKET``. SIGHUP reads every model again; SIGTERM (and SIGINT) stop listening,
let the messages under way finish (for at most ``timeout`` seconds) and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import ipaddress
import os
import secrets
import signal
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..core.digits import ascii_number
from ..errors import ServeError
from ..store.safefiles import file_kind
from . import milter, spamd
from .models import Models
from .scoring import Service

PROTOCOLS = ("spamd", "milter")
DEFAULT_LISTEN = "spamd:unix:/run/nbspam/spamd.sock"
DEFAULT_ALLOW = ("127.0.0.1/32", "::1/128")
STREAM_LIMIT = 2 * spamd.MAX_LINE


@dataclass(frozen=True)
class Listener:
    """Where to listen and which protocol: ``spamd:unix:PATH``, ``milter:inet:HOST:PORT``."""

    protocol: str
    kind: str  # 'unix' or 'inet'
    path: str = ""
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, spec: str) -> Listener:
        protocol, _, rest = spec.partition(":")
        kind, _, address = rest.partition(":")
        if protocol not in PROTOCOLS or kind not in ("unix", "inet") or not address:
            raise ServeError(
                f"bad listener {spec!r}: use PROTOCOL:unix:PATH or PROTOCOL:inet:HOST:PORT, "
                "PROTOCOL spamd or milter"
            )
        if kind == "unix":
            return cls(protocol, kind, path=address)
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        number = ascii_number(port, 5)
        if not host or number is None or not 0 < number < 65536:
            raise ServeError(f"bad listener {spec!r}: an inet address is HOST:PORT")
        return cls(protocol, kind, host=host, port=number)

    def __str__(self) -> str:
        where = self.path if self.kind == "unix" else f"{self.host}:{self.port}"
        return f"{self.protocol}:{self.kind}:{where}"


@dataclass
class Config:
    """Everything `nbspam serve` is told; `check` refuses what cannot work."""

    model: str
    user_models: str | None = None
    listen: list[Listener] = field(default_factory=lambda: [Listener.parse(DEFAULT_LISTEN)])
    socket_mode: int = 0o660
    socket_group: str | None = None
    allow: list[str] = field(default_factory=lambda: list(DEFAULT_ALLOW))
    max_size: int = 10 << 20
    max_connections: int = 256
    timeout: float = 30.0
    idle_timeout: float = 300.0
    allow_tell: bool = False
    milter_actions: dict[str, str] = field(default_factory=dict)
    recipient_delimiter: str = ""
    syslog: bool = False

    def networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        try:
            return [ipaddress.ip_network(a, strict=False) for a in self.allow]
        except ValueError as exc:
            raise ServeError(f"bad --allow: {exc}") from None

    def gid(self) -> int:
        if self.socket_group is None:
            return -1
        try:
            return grp.getgrnam(self.socket_group).gr_gid
        except KeyError:
            raise ServeError(f"no group {self.socket_group!r} for --socket-group") from None


def check(config: Config) -> list[str]:
    """Refuse (ServeError and the other NbspamErrors) a configuration that cannot serve;
    the lines that describe it where it can. Opens nothing to listen."""
    config.networks()
    config.gid()
    milter.check_actions(config.milter_actions)
    milter.check_delimiter(config.recipient_delimiter)
    if not 0 <= config.socket_mode <= 0o777:
        raise ServeError(f"bad --socket-mode {config.socket_mode:o}")
    models = Models(config.model, config.user_models)
    loaded = models.check()
    activated = os.environ.get("LISTEN_PID") == str(os.getpid())
    for listener in [] if activated else config.listen:
        if listener.kind == "unix":
            folder = os.path.dirname(os.path.abspath(listener.path))
            if not os.path.isdir(folder):
                raise ServeError(f"no folder {folder} for the socket {listener.path}")
    labels = ", ".join(loaded.scorer.labels)
    lines = [f"model {config.model} ({labels})"]
    if config.user_models:
        lines.append(
            f"user layers {config.user_models} (over the site model, for -u or the recipient)"
        )
        if config.recipient_delimiter:
            lines.append(
                f"recipient delimiter {config.recipient_delimiter} "
                f"(alice{config.recipient_delimiter[0]}lists@ is alice's)"
            )
    if activated:
        lines.append("listen on the sockets systemd passed (LISTEN_FDS)")
    else:
        lines += [f"listen {listener}" for listener in config.listen]
    return lines


# -- logging and systemd ----------------------------------------------------------------------


def logger(use_syslog: bool) -> Callable[[str], None]:
    """One line a call: to syslog (facility mail) or to stderr."""
    if use_syslog:
        import syslog

        syslog.openlog("nbspam", syslog.LOG_PID, syslog.LOG_MAIL)
        return lambda line: syslog.syslog(syslog.LOG_INFO, line)

    def to_stderr(line: str) -> None:
        print(f"nbspam serve: {line}", file=sys.stderr, flush=True)

    return to_stderr


def notify(state: str) -> None:
    """Tell systemd ``state`` (READY=1, STOPPING=1) where it asked (NOTIFY_SOCKET)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(address)
        s.sendall(state.encode())


def activated_sockets() -> list[tuple[str, socket.socket]]:
    """The sockets systemd passed (LISTEN_FDS, for this process: LISTEN_PID), each with its
    protocol: its FileDescriptorName where that is 'spamd' or 'milter', else spamd."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return []
    count = int(os.environ.get("LISTEN_FDS", "0") or 0)
    names = os.environ.get("LISTEN_FDNAMES", "").split(":")
    found = []
    for i in range(count):
        name = names[i] if i < len(names) else ""
        sock = socket.socket(fileno=3 + i)
        sock.setblocking(False)
        found.append((name if name in PROTOCOLS else "spamd", sock))
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    return found


# -- sockets ----------------------------------------------------------------------------------


def unix_socket(path: str, mode: int, gid: int) -> socket.socket:
    """A listening Unix socket at ``path`` with ``mode`` and group ``gid`` (-1: the
    process's). Bound under a new random name in the same folder with no permissions for
    others, changed there (never through a link: `_set_owner_and_mode`), then renamed over
    ``path``, which may only be missing or an old socket: a link or any other file there is
    refused, never followed or replaced."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ServeError(f"cannot use socket path {path}: {exc.strerror}") from None
    if st is not None and not stat.S_ISSOCK(st.st_mode):
        raise ServeError(
            f"{path} is {file_kind(st.st_mode)}, not a socket: refused (remove it if it is yours)"
        )
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(6)}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(temporary)
        created = os.lstat(temporary)
        _set_owner_and_mode(temporary, created, mode, gid)
        os.rename(temporary, path)
        if os.lstat(path).st_ino != created.st_ino:  # swapped before the rename
            # left where it is: it may be another server's socket, started at the same time
            raise ServeError(f"{temporary} was replaced while it was made: refused")
    except (OSError, ServeError) as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(temporary)  # the socket, or what was put in its place: a name, no more
        if isinstance(exc, ServeError):
            raise
        raise ServeError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    sock.listen(socket.SOMAXCONN)
    sock.setblocking(False)
    return sock


def _set_owner_and_mode(temporary: str, created: os.stat_result, mode: int, gid: int) -> None:
    """Give the socket just bound at ``temporary`` (``created``: its lstat) the group
    ``gid`` (-1: leave it) and the mode ``mode``, never through a link: whoever may write its
    folder may swap the name for a link between a check and a chmod, which follows links,
    and a server run as root would then change the mode of any file the link names. On
    Linux the socket is held by an O_PATH descriptor, checked, and changed through it
    (/proc/self/fd); elsewhere it is checked, then changed by its name."""
    if hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd"):
        fd = os.open(temporary, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _check_same_socket(temporary, os.fstat(fd), created)
            node = f"/proc/self/fd/{fd}"  # the inode the descriptor holds, whatever the name
            if gid != -1:
                os.chown(node, -1, gid)
            os.chmod(node, mode)
        finally:
            os.close(fd)
        return
    if gid != -1:
        os.chown(temporary, -1, gid, follow_symlinks=False)
    _check_same_socket(temporary, os.lstat(temporary), created)
    os.chmod(temporary, mode)


def _check_same_socket(temporary: str, found: os.stat_result, created: os.stat_result) -> None:
    if not stat.S_ISSOCK(found.st_mode) or found.st_ino != created.st_ino:
        raise ServeError(f"{temporary} was replaced while it was made: refused")


def inet_socket(host: str, port: int) -> socket.socket:
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = info[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(socket.SOMAXCONN)
    sock.setblocking(False)
    return sock


def _remove_socket(path: str, inode: int) -> None:
    """Remove the socket file at ``path`` if it is still the one this server made."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == inode:
            os.unlink(path)


# -- the server -------------------------------------------------------------------------------


class Connection:
    """A connection's task and whether a message is under way on it (drained on SIGTERM)."""

    def __init__(self) -> None:
        self.busy = False
        self.task: asyncio.Task | None = None


class Server:
    """The listeners and connections of one `nbspam serve`."""

    def __init__(self, config: Config, log: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.log = log or logger(config.syslog)
        self.models = Models(config.model, config.user_models)
        self.service = Service(
            self.models,
            max_size=config.max_size,
            allow_tell=config.allow_tell,
            log=self.log,
        )
        self.networks = config.networks()
        self.connections: set[Connection] = set()
        self._sockets: list[tuple[Listener | None, str, socket.socket]] = []
        self._stop: asyncio.Event | None = None
        self._inodes: dict[str, int] = {}

    def open(self) -> None:
        """Open the listeners: systemd's sockets where it passed some, else the configured."""
        activated = activated_sockets()
        if activated:
            self._sockets = [(None, protocol, sock) for protocol, sock in activated]
            return
        gid = self.config.gid()
        for listener in self.config.listen:
            if listener.kind == "unix":
                sock = unix_socket(listener.path, self.config.socket_mode, gid)
                self._inodes[listener.path] = os.lstat(listener.path).st_ino
            else:
                sock = inet_socket(listener.host, listener.port)
            self._sockets.append((listener, listener.protocol, sock))

    def close(self) -> None:
        for listener, _, sock in self._sockets:
            if listener is not None and listener.kind == "unix":
                _remove_socket(listener.path, self._inodes.get(listener.path, -1))
            sock.close()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        servers = []
        for _, protocol, sock in self._sockets:
            handler = self._handler(protocol, sock.family in (socket.AF_INET, socket.AF_INET6))
            if sock.family == socket.AF_UNIX:
                server = await asyncio.start_unix_server(handler, sock=sock, limit=STREAM_LIMIT)
            else:
                server = await asyncio.start_server(handler, sock=sock, limit=STREAM_LIMIT)
            servers.append(server)
        loop.add_signal_handler(signal.SIGTERM, self._stop.set)
        loop.add_signal_handler(signal.SIGINT, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        where = ", ".join(
            str(listener or f"{protocol}:systemd") for listener, protocol, _ in self._sockets
        )
        self.log(f"ready: model {self.config.model}, listening on {where}")
        notify("READY=1")
        await self._stop.wait()
        notify("STOPPING=1")
        for server in servers:
            server.close()
        await self._drain()
        self.log("stopped")

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _reload(self) -> None:
        self.models.forget_all()
        self.log("SIGHUP: models will be read again")

    async def _drain(self) -> None:
        """Let the messages under way finish (at most ``timeout`` seconds); cut idle
        connections at once."""
        for connection in list(self.connections):
            if not connection.busy and connection.task is not None:
                connection.task.cancel()
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.config.timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _handler(self, protocol: str, inet: bool):
        config = self.config

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if inet and not self._allowed(writer):
                self.log(f"refused: {_peer(writer)} is not in the allow-list")
                writer.close()
                return
            if len(self.connections) >= config.max_connections or self._stop.is_set():
                self.log(f"refused: {config.max_connections} connections already")
                writer.close()
                return
            connection = Connection()
            connection.task = asyncio.current_task()
            self.connections.add(connection)
            try:
                if protocol == "spamd":
                    await spamd.serve_connection(
                        self.service, reader, writer, config.timeout, connection
                    )
                else:
                    await milter.serve_connection(
                        self.service,
                        reader,
                        writer,
                        connection,
                        timeout=config.timeout,
                        idle_timeout=config.idle_timeout,
                        actions=config.milter_actions,
                        delimiter=config.recipient_delimiter,
                    )
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # a defect: logged, the connection closed, the server goes on
                self.log(f"internal error: {exc!r}")
            finally:
                self.connections.discard(connection)
                writer.close()

        return handle

    def _allowed(self, writer: asyncio.StreamWriter) -> bool:
        peer = writer.get_extra_info("peername")
        try:
            address = ipaddress.ip_address(peer[0])
        except (TypeError, ValueError, IndexError):
            return False
        if getattr(address, "ipv4_mapped", None):
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) else str(peer)


@contextlib.contextmanager
def opened(config: Config, log: Callable[[str], None] | None = None) -> Iterator[Server]:
    """A Server with its listeners open; closed (socket files removed) on the way out."""
    server = Server(config, log)
    server.models.check()
    server.open()
    try:
        yield server
    finally:
        server.close()


def serve(config: Config) -> None:
    """Run `nbspam serve` until SIGTERM or SIGINT."""
    with opened(config) as server:
        asyncio.run(server.run())
