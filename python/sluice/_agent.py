"""Connection to the per-node agent: frames, requests, start on demand."""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import weakref

from . import _version, errors

VERSION = 2
MIN_VERSION = 1
MAX_FRAME = 256 << 20
MAX_HEADER = 4 << 20
ENTRY = struct.Struct("<qIIQ")
INLINE_FLAG = 1 << 31
# The most descriptors a reply may carry (a batch's memory file of mapped
# copies, a feed batch's memory file).
MAX_FDS = 4

_HEAD = struct.Struct("<II")
_SOFTWARE = "sluice-python/" + _version.__version__

# Connections opened by this process, so a forked child can drop its
# inherited copies without touching the parent's.
_live = weakref.WeakSet()


def _after_fork():
    for c in list(_live):
        c._abandon()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def agent_dir():
    """The agent directory of this user (same rule as the Go agent)."""
    d = os.environ.get("SLUICE_AGENT_DIR")
    if d:
        return d
    d = os.environ.get("XDG_RUNTIME_DIR")
    if d:
        return os.path.join(d, "sluice")
    import tempfile

    return os.path.join(tempfile.gettempdir(), "sluice-%d" % os.getuid())


_STORE_PREFIXES = ("AWS_", "S3_", "GOOGLE_", "GCS_", "AZURE_", "CLOUDSDK_")


def _store_var(k):
    return k.startswith(_STORE_PREFIXES) or k == "STORAGE_EMULATOR_HOST"


def store_env(environ=None):
    """The store settings of this process: the variables the agent uses to
    open this job's stores (endpoints, regions, profiles, keys of S3, GCS
    and Azure). Sent with every open; the agent never uses another job's."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if _store_var(k)}


def find_binary():
    """Path of the sluice binary: $SLUICE_BIN, next to the package, or PATH."""
    b = os.environ.get("SLUICE_BIN")
    if b:
        if not os.access(b, os.X_OK):
            raise errors.AgentError("SLUICE_BIN=%s is not an executable file" % b)
        return b
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "bin", "sluice"), os.path.join(here, "sluice")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    b = shutil.which("sluice")
    if b:
        return b
    raise errors.AgentError(
        "cannot find the sluice binary: set SLUICE_BIN, put it on PATH, "
        "or install it as %s" % os.path.join(here, "bin", "sluice")
    )


def start_agent(directory, timeout):
    """Starts an agent for directory unless one runs; exactly one wins.

    ``sluice agent --detach`` returns once an agent serves the directory
    (this one or a concurrent winner); the lock in the directory decides.
    """
    cmd = [find_binary(), "agent", "--dir", directory, "--detach"]
    idle = os.environ.get("SLUICE_AGENT_IDLE_TIMEOUT")
    if idle:
        cmd += ["--idle-timeout", idle]
    try:
        # The agent serves every job of this user on the node: it must not
        # inherit this job's S3 settings (each open sends its own). GCS and
        # Azure settings stay: those drivers read only the agent's
        # environment, and the agent refuses jobs whose settings differ.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        res = subprocess.run(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise errors.AgentError("starting the agent (%s) took longer than %.0fs" % (" ".join(cmd), timeout))
    except OSError as e:
        raise errors.AgentError("cannot run %s: %s" % (cmd[0], e))
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).decode("utf-8", "replace").strip()
        raise errors.AgentError("starting the agent failed (exit %d): %s" % (res.returncode, msg))


class Connection:
    """One connection to the agent. Not shared between processes."""

    def __init__(self, directory=None, timeout=30.0, start=True, start_timeout=30.0):
        # Absolute, so that a chdir of this process does not lose it.
        self.directory = os.path.abspath(directory or agent_dir())
        self.path = os.path.join(self.directory, "agent.sock")
        self.timeout = timeout
        self.pid = os.getpid()
        self.sock = None
        self._head = bytearray(8)
        deadline = time.monotonic() + start_timeout
        last_start = None
        delay = 0.005
        while True:
            try:
                self._connect()
                hello = self.call(
                    {"op": "hello", "version": VERSION, "min_version": MIN_VERSION, "software": _SOFTWARE, "pid": self.pid},
                    "hello",
                )
                break
            except (FileNotFoundError, ConnectionRefusedError, errors.AgentError) as e:
                # No agent, or one that is exiting (idle) as we connect.
                self.close()
                if not start:
                    raise errors.AgentError("no agent serves %s: %s" % (self.path, e)) from None
                now = time.monotonic()
                if now > deadline:
                    raise errors.AgentError("no agent came up on %s within %.0fs: %s" % (self.path, start_timeout, e)) from None
                if last_start is None or now - last_start > 1.0:
                    start_agent(self.directory, start_timeout)
                    last_start = now
                # A concurrent winner may hold the lock but not listen yet.
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        _live.add(self)
        self.agent_pid = hello.get("pid")
        self.version = hello.get("version")
        self.software = hello.get("software") or ""
        # What the agent's build offers (agentapi.Hello.Features); an
        # agent of an older release announces nothing.
        feats = hello.get("features")
        self.features = frozenset(f for f in feats if isinstance(f, str)) if isinstance(feats, list) else frozenset()
        _, _, agent_release = self.software.partition("/")
        if agent_release and agent_release != _version.__version__:
            import warnings

            warnings.warn(
                "the sluice agent on %s is release %s, this Python client is %s (protocol %s works, but "
                "restart the agent with the matching binary to get this release's behaviour)"
                % (self.path, agent_release, _version.__version__, self.version)
            )

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except BaseException:
            s.close()
            raise
        self.sock = s

    def _abandon(self):
        # In a forked child: close our copy of the descriptor only. The
        # parent's connection stays open (close on a dup'd fd sends nothing).
        s, self.sock = self.sock, None
        if s is not None:
            try:
                os.close(s.detach())
            except OSError:
                pass

    def __del__(self):
        if self.__dict__.get("sock") is not None:
            if self.pid == os.getpid():
                self.close()
            else:
                self._abandon()

    def close(self):
        s, self.sock = self.sock, None
        if s is not None:
            try:
                s.close()
            except OSError:
                pass

    def _recv_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise errors.AgentError("the agent closed the connection (it died or was stopped)")
            got += k
        return buf

    def send(self, header):
        """Sends one request; its reply must be read with recv."""
        if self.sock is None or os.getpid() != self.pid:
            raise errors.AgentError("connection to the agent is closed")
        h = json.dumps(header, separators=(",", ":")).encode()
        try:
            self.sock.sendall(_HEAD.pack(4 + len(h), len(h)) + h)
        except OSError as e:
            self.close()
            raise errors.AgentError("connection to the agent failed: %s" % e) from None

    def _recv_head_fds(self, fds):
        """Reads a reply's 8 length bytes with the descriptors that came
        with them (SCM_RIGHTS), appended to fds: read without ancillary
        data, the kernel would close them."""
        head = b""
        while len(head) < 8:
            msg, got, flags, _ = socket.recv_fds(self.sock, 8 - len(head), MAX_FDS)
            fds.extend(got)
            if flags & getattr(socket, "MSG_CTRUNC", 8):
                raise errors.ProtocolError("the agent sent more than %d descriptors with a reply" % MAX_FDS)
            if not msg:
                raise errors.AgentError("the agent closed the connection (it died or was stopped)")
            head += msg
        return head

    def recv(self, want, fds=None):
        """Reads one reply: (header dict, body memoryview). With fds (a
        list), the descriptors that came with the reply are appended to
        it, open: the caller closes them, also when recv raises."""
        if self.sock is None:
            raise errors.AgentError("connection to the agent is closed")
        try:
            head = self._recv_exact(8) if fds is None else self._recv_head_fds(fds)
            total, hlen = _HEAD.unpack(head)
            if total < 4 or total > MAX_FRAME or hlen > MAX_HEADER or hlen > total - 4 or hlen < 2:
                raise errors.ProtocolError("malformed frame from the agent (length %d, header %d)" % (total, hlen))
            rest = self._recv_exact(total - 4)
        except socket.timeout:
            self.close()
            raise errors.AgentError("the agent did not answer %r within %.0fs" % (want, self.timeout)) from None
        except errors.SluiceError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise errors.AgentError("connection to the agent failed: %s" % e) from None
        view = memoryview(rest)
        try:
            reply = json.loads(bytes(view[:hlen]))
        except ValueError as e:
            raise errors.ProtocolError("bad reply header: %s" % e) from None
        op = reply.get("op") if isinstance(reply, dict) else None
        if op == "error":
            raise errors.from_reply(reply.get("code"), reply.get("message", ""))
        if op != want:
            raise errors.ProtocolError("reply op %r, want %r" % (op, want))
        return reply, view[hlen:]

    def roundtrip(self, header, want):
        """Sends header, returns (reply header, body memoryview)."""
        self.send(header)
        return self.recv(want)

    def call(self, header, want=None, timeout=None):
        """Sends header and returns the reply header. timeout, if given,
        replaces the connection's read deadline for this request."""
        if timeout is None or self.sock is None:
            return self.roundtrip(header, want or "ok")[0]
        self.sock.settimeout(max(timeout, self.timeout))
        try:
            return self.roundtrip(header, want or "ok")[0]
        finally:
            if self.sock is not None:
                self.sock.settimeout(self.timeout)


def parse_entries(reply, body):
    """Decodes a batch body into (entries, inline) after bounds checks."""
    n = reply["n"]
    if n < 0 or n * ENTRY.size > len(body):
        raise errors.ProtocolError("batch of %d entries does not fit %d bytes" % (n, len(body)))
    table = body[: n * ENTRY.size]
    inline = body[n * ENTRY.size :]
    entries = list(ENTRY.iter_unpack(table)) if n else []
    return entries, inline
