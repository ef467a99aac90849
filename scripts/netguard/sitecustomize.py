"""Network guard for the book build: record and refuse every non-loopback connection attempt.

`make notebooks` puts this folder first on PYTHONPATH, so Python runs this file at start-up in every
process of the build (papermill, each notebook's kernel, jupyter-book). A Python audit hook
(PEP 578) sees each ``socket.connect`` and ``socket.getaddrinfo``; an attempt to reach anything but
this machine is appended to the file named by ``GITUTOR_NET_LOG`` and refused with ``OSError``, so an
offline download fails at once instead of hanging. The Makefile fails the build when the log is not
empty. Without ``GITUTOR_NET_LOG`` the hook is not installed.

One attempt is known and expected: Ray's API-server process (``ray/dashboard/dashboard.py``, started
by every local Ray, even with the dashboard off) loads ``UsageStatsHead``, whose start-up looks up
the cloud metadata hosts in :data:`KNOWN_PROBES` to name the cloud it runs on
(``ray._common.usage.usage_lib.get_cloud_from_metadata_requests``), whatever
``RAY_USAGE_STATS_ENABLED`` says; Ray has no setting that stops it. That look-up is refused all the
same, and written to ``<log>.known`` instead of the log, naming it; the same host looked up by any
other process, or any other host looked up by Ray, goes to the log and fails the build.
"""
import ipaddress
import os
import socket
import sys
import traceback

_LOG = os.environ.get("GITUTOR_NET_LOG")
#: host → what looks it up: the known probes of Ray's API-server process (see the module docstring).
KNOWN_PROBES = {"169.254.169.254": "Ray's UsageStatsHead cloud-metadata probe (Azure/AWS)",
                "metadata.google.internal": "Ray's UsageStatsHead cloud-metadata probe (GCP)"}
_RAY_API_SERVER = os.path.join("ray", "dashboard", "dashboard.py")
_LOCAL_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", socket.gethostname()}


def _own_addresses() -> set[str]:
    """This machine's own interface addresses (Linux: the kernel's local routes and IPv6 addresses):
    a connection to one never leaves the machine, and a local Ray cluster binds its processes to one."""
    own = set()
    try:
        lines = open("/proc/net/fib_trie").read().splitlines()
        own |= {above.split()[-1] for above, line in zip(lines, lines[1:]) if line.strip() == "/32 host LOCAL"}
        own |= {str(ipaddress.IPv6Address(bytes.fromhex(line.split()[0]))) for line in open("/proc/net/if_inet6")}
    except (OSError, ValueError, IndexError):
        pass  # not Linux: only loopback counts as local
    return own


def _is_local(host) -> bool:
    if host is None or isinstance(host, int):
        return True
    host = host.decode() if isinstance(host, bytes) else str(host)
    if host in _LOCAL_NAMES or host.split("%")[0] in _OWN_ADDRESSES:
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # a host name that is not this machine's
    return address.is_loopback or address.is_unspecified


def _known(host) -> str | None:
    """What the refused look-up of ``host`` is, when it is a known probe of Ray's API server."""
    host = host.decode() if isinstance(host, bytes) else str(host)
    if sys.argv and sys.argv[0].endswith(_RAY_API_SERVER):
        return KNOWN_PROBES.get(host)
    return None


def _refuse(what: str, host=None) -> None:
    known = _known(host) if host is not None else None
    if known:
        with open(_LOG + ".known", "a") as log:
            log.write(f"pid {os.getpid()} (Ray API server): {what}: refused; {known}\n")
    else:
        where = "".join(traceback.format_stack(limit=8)[:-2])
        with open(_LOG, "a") as log:
            log.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:120]}): {what}\n{where}\n")
    raise OSError(f"network access is disabled during the book build: {what}")


def _audit(event: str, args: tuple) -> None:
    if event == "socket.connect":
        sock, address = args
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
            _refuse(f"connect to {address!r}", address[0])
    elif event == "socket.getaddrinfo" and not _is_local(args[0]):
        _refuse(f"resolve {args[0]!r}", args[0])


_OWN_ADDRESSES = _own_addresses()
if _LOG:
    sys.addaudithook(_audit)
