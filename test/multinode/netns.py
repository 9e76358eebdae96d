"""Simulated hosts for the multi-node harness: Linux network namespaces
joined by a bridge that lives in a namespace of its own, so nothing of the
machine's own network is touched. Needs root and iproute2.

Each host has an address 10.<a>.<b>.<n>/24 on its eth0, a hostname of its
own (torchrun and gloo resolve it: the ranks run in a UTS namespace with
that name and /etc/netns/<ns>/hosts, which `ip netns exec` mounts over
/etc/hosts, maps every host's name to its address).
"""

import os
import shutil
import signal
import subprocess
import time


def sh(*args, check=True):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode(errors="replace").strip()))
    return p.stdout.decode()


class Host:
    def __init__(self, net, name, ns, addr):
        self.net, self.name, self.ns, self.addr = net, name, ns, addr

    def cmd(self, argv, hostname=True):
        """argv run inside this host: its network namespace, its hostname."""
        base = ["ip", "netns", "exec", self.ns]
        if hostname:
            # A UTS namespace with this host's name, then the command.
            return base + ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.name] + list(argv)
        return base + list(argv)

    def pids(self):
        out = sh("ip", "netns", "pids", self.ns, check=False)
        return [int(x) for x in out.split()]

    def kill_all(self, sig=signal.SIGKILL):
        """Sends sig to every process of this host (its namespace)."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids


class Network:
    """A bridge and hosts. prefix names everything it creates (namespaces,
    /etc/netns/<ns>) so that cleanup() removes exactly that."""

    def __init__(self, prefix, subnet):
        self.prefix = prefix
        self.subnet = subnet  # "10.a.b"
        self.bridge_ns = prefix + "-net"
        self.hosts = {}
        sh("ip", "netns", "add", self.bridge_ns)
        self._ns = [self.bridge_ns]
        sh("ip", "-n", self.bridge_ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")

    def add_host(self, name, octet):
        ns = "%s-%s" % (self.prefix, name)
        sh("ip", "netns", "add", ns)
        self._ns.append(ns)
        veth = "v%d" % octet
        sh("ip", "-n", self.bridge_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "-n", self.bridge_ns, "link", "set", veth, "master", "br0")
        sh("ip", "-n", self.bridge_ns, "link", "set", veth, "up")
        addr = "%s.%d" % (self.subnet, octet)
        sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        h = Host(self, name, ns, addr)
        self.hosts[name] = h
        return h

    def write_hosts_files(self):
        lines = ["127.0.0.1 localhost"] + ["%s %s" % (h.addr, h.name) for h in self.hosts.values()]
        for h in self.hosts.values():
            d = os.path.join("/etc/netns", h.ns)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("\n".join(lines) + "\n")

    def cleanup(self):
        """Kills every process left in the namespaces and removes them."""
        for h in self.hosts.values():
            h.kill_all()
        deadline = time.monotonic() + 10
        for h in self.hosts.values():
            while h.pids() and time.monotonic() < deadline:
                time.sleep(0.05)
        for ns in reversed(self._ns):
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(os.path.join("/etc/netns", ns), ignore_errors=True)
        self._ns = []


def leftover_namespaces(prefix):
    out = sh("ip", "netns", "list", check=False)
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]
