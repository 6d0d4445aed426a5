"""Whether every node of a cluster reaches the same store: object stores do; a local path
does only on a shared filesystem (NFS, Lustre, GPFS, CephFS, ...).

On a multi-node run each process writes where it runs — DeepSpeed's rank shards, a host's
checkpoints, task data — so a path on a node's own disk leaves every node a different,
incomplete store. A path counts as shared when its filesystem is a network one (read from
this machine's mount table) or when the user says so (`$ALIGNFLOW_SHARED_STORE=1`: e.g. a
filesystem the table does not name, mounted at the same path on every node).
"""

from __future__ import annotations

import os

ENV = "ALIGNFLOW_SHARED_STORE"
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "ceph", "beegfs",
                        "glusterfs", "wekafs", "panfs", "orangefs", "fuse.ceph-fuse",
                        "fuse.juicefs", "fuse.gcsfuse", "fuse.s3fs", "fuse.goofys",
                        "fuse.mountpoint-s3", "fuse.sshfs", "fuse.glusterfs", "fuse.weka"})


def declared_shared() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")


def network_filesystem(path: str, mounts: str = "/proc/self/mounts") -> str | None:
    """The network filesystem type `path` lives on (its longest mount point), else None."""
    try:
        with open(mounts) as table:
            entries = [line.split()[1:3] for line in table if len(line.split()) >= 3]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for point, fstype in entries:
        point = point.replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind if kind in NETWORK_FS else None


def shared_across_nodes(protocol: str, root: str) -> bool:
    """Whether a store (`protocol`, `root`) is the same store on every node."""
    if protocol == "memory":
        return False
    if protocol != "file":
        return True  # s3://, gs://, ...: one store for every node
    return declared_shared() or network_filesystem(root) is not None
