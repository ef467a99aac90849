"""The book build's network guard refuses and logs connections to other machines, and only those.

The guard's audit hook is called directly (no packet ever leaves this machine): a refused attempt
raises before the socket call would run.
"""
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "scripts" / "netguard" / "sitecustomize.py"


@pytest.fixture
def guard(tmp_path, monkeypatch):
    monkeypatch.delenv("GITUTOR_NET_LOG", raising=False)  # load without installing the hook here
    spec = importlib.util.spec_from_file_location("netguard_under_test", GUARD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._LOG = str(tmp_path / "net.log")
    return module


def test_remote_connects_and_lookups_are_refused_and_logged(guard):
    with socket.socket() as sock:
        with pytest.raises(OSError, match="disabled"):
            guard._audit("socket.connect", (sock, ("192.0.2.7", 443)))
    with pytest.raises(OSError, match="disabled"):
        guard._audit("socket.getaddrinfo", ("download.pytorch.org", 443, 0, 0, 0))
    log = Path(guard._LOG).read_text()
    assert "192.0.2.7" in log and "download.pytorch.org" in log


def test_loopback_unix_sockets_and_other_events_pass(guard):
    with socket.socket() as sock:
        guard._audit("socket.connect", (sock, ("127.0.0.1", 8888)))
        guard._audit("socket.connect", (sock, ("localhost", 8888)))
    with socket.socket(socket.AF_INET6) as sock:
        guard._audit("socket.connect", (sock, ("::1", 8888, 0, 0)))
    with socket.socket(socket.AF_UNIX) as sock:
        guard._audit("socket.connect", (sock, "/tmp/some.sock"))
    guard._audit("socket.getaddrinfo", ("localhost", 80, 0, 0, 0))
    guard._audit("open", ("file.txt", "r", 0))
    assert not Path(guard._LOG).exists()


def test_this_machines_own_addresses_are_local(guard, monkeypatch):
    if sys.platform.startswith("linux"):
        assert "127.0.0.1" in guard._own_addresses()  # read from the kernel's local routes
    monkeypatch.setattr(guard, "_OWN_ADDRESSES", {"192.0.2.9"})  # e.g. where a local Ray binds
    with socket.socket() as sock:
        guard._audit("socket.connect", (sock, ("192.0.2.9", 6379)))
        with pytest.raises(OSError, match="disabled"):
            guard._audit("socket.connect", (sock, ("192.0.2.10", 6379)))


def test_the_hook_is_installed_in_a_process_started_with_the_log_variable(tmp_path):
    log = tmp_path / "net.log"
    probe = ("import socket\ntry:\n    socket.getaddrinfo('example.invalid', 80)\n"
             "except OSError as e:\n    print('disabled' in str(e))")
    env = dict(os.environ, PYTHONPATH=str(GUARD.parent), GITUTOR_NET_LOG=str(log))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True" and "example.invalid" in log.read_text()


@pytest.mark.parametrize("target, profile, guarded", [("notebooks", "quick", True), ("book", "quick", True),
                                                       ("notebooks", "full", False), ("book", "full", False),
                                                       ("smoke", "full", True)])
def test_the_guard_is_the_quick_builds_and_the_smoke_runs(target, profile, guarded):
    """`make book PROFILE=full` may download (the libraries' loaders on an online workstation); the quick
    build and the offline smoke runs may not. Read from `make -n` (the commands make would run)."""
    out = subprocess.run(["make", "-n", target, f"PROFILE={profile}", "INSTALLED=/dev/null"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    runs = [line for line in out.stdout.splitlines() if "execute_notebooks.py" in line or "smoke.py" in line]
    assert runs, out.stdout + out.stderr
    assert all(("scripts/netguard" in line) == guarded for line in runs), runs
