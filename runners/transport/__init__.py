"""Remote execution: the Transport interface (types.py) and its SSH (ssh.py) and local
(local.py) implementations. Imports no Django. Only runners/transport/ssh.py imports paramiko.
"""

from runners.transport.local import LocalTransport
from runners.transport.onboarding import check_connection
from runners.transport.ssh import open_transport, scan_host_key
from runners.transport.types import (
    CheckResult,
    CommandResult,
    ConnectionReport,
    DetachedStatus,
    KillResult,
    Launch,
    SshTarget,
    Transport,
)

__all__ = [
    "CheckResult",
    "CommandResult",
    "ConnectionReport",
    "DetachedStatus",
    "KillResult",
    "Launch",
    "LocalTransport",
    "SshTarget",
    "Transport",
    "check_connection",
    "open_transport",
    "scan_host_key",
]
