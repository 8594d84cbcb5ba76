"""A one-node Slurm cluster on this machine, for trying `adh run --executor slurm` (and for
tests/test_slurm.py, which runs the cluster path on it): munge, MariaDB and slurmdbd (sacct,
which submitit polls, needs the accounting database), slurmctld and slurmd, every file in one
folder.

    python scripts/slurm_cluster.py start /tmp/adh-slurm   # prints the export to use it
    export SLURM_CONF=/tmp/adh-slurm/slurm.conf
    sinfo; sbatch --wrap 'hostname'; squeue; sacct
    python scripts/slurm_cluster.py stop /tmp/adh-slurm

The node is this machine, with all its CPUs and most of its memory; its one partition, `debug`,
gives each job the whole node (OverSubscribe=EXCLUSIVE), as a measurement needs. Runs as root
(slurmd starts jobs as their users; munged listens on its default socket, /run/munge, where
sacct and sacctmgr look for it; a munged already running there, as Debian's package may start
one, is used instead). Needs Debian's slurm-wlm, slurmdbd, munge and mariadb-server
(`apt-get install slurm-wlm slurmdbd munge mariadb-server`); says so and exits 2 without them.
Slurm's own ports here are 16817-16819, MariaDB's 13306 on 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PROGRAMS = {"munged": "munge", "unmunge": "munge", "mariadbd": "mariadb-server",
            "mariadb-install-db": "mariadb-server", "slurmdbd": "slurmdbd",
            "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sinfo": "slurm-wlm",
            "sacct": "slurm-wlm", "scancel": "slurm-wlm", "sacctmgr": "slurm-wlm"}
DAEMONS = ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged")  # stopped in this order
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
DB_PORT = 13306


def slurm_conf(folder: Path, node: str, cpus: int, memory_mb: int) -> str:
    return f"""\
ClusterName=adh
SlurmctldHost={node}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/run/slurmctld.pid
SlurmdPidFile={folder}/run/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# a cancelled or timed-out task gets SIGTERM, then SIGKILL after KillWait seconds (default 30):
# submitit's tasks ignore SIGTERM, so a short wait ends them sooner
KillWait=5
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=16819
NodeName={node} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
"""


def slurmdbd_conf(folder: Path) -> str:
    return f"""\
AuthType=auth/munge
DbdHost=localhost
DbdPort=16819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={DB_PORT}
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=adh
PidFile={folder}/run/slurmdbd.pid
LogFile={folder}/log/slurmdbd.log
"""


def wait_for(what: str, ready, timeout_s: float = 30.0) -> None:
    """Poll `ready()` until it is true; SystemExit naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            sys.exit(f"slurm_cluster: {what} did not come up in {timeout_s:.0f} s")
        time.sleep(0.5)


def run(*args: str, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run a command; with `check`, exit naming it and its error output where it fails."""
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if check and done.returncode:
        sys.exit(f"slurm_cluster: {args[0]} failed: {(done.stderr or done.stdout).strip()}")
    return done


def problem() -> str | None:
    """Why a cluster cannot start here, in one line with the fix; None where it can."""
    missing = sorted({package for program, package in PROGRAMS.items()
                      if shutil.which(program) is None})
    if missing:
        return f"missing {', '.join(missing)}: apt-get install {' '.join(missing)}"
    if os.geteuid() != 0:
        return "run it as root (slurmd starts jobs as their users)"
    return None


def munge_works() -> bool:
    """Whether a munged already answers on its default socket (one the system started, as
    Debian's package does where services start): the cluster then uses it."""
    return MUNGE_SOCKET.exists() and subprocess.run(
        "munge -n | unmunge", shell=True, capture_output=True).returncode == 0


def start(folder: Path) -> dict[str, str]:
    """Start every daemon with its files under `folder` and wait until the node is idle;
    returns the environment that points Slurm's commands at it (SLURM_CONF)."""
    reason = problem()
    if reason:
        print(f"slurm_cluster: {reason}", file=sys.stderr)
        sys.exit(2)
    for sub in ("state", "spool", "log", "run", "db", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    node = socket.gethostname().split(".")[0]
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    (folder / "slurm.conf").write_text(slurm_conf(folder, node, os.cpu_count() or 1,
                                                  int(memory_mb * 0.8)))
    (folder / "slurmdbd.conf").write_text(slurmdbd_conf(folder))
    (folder / "slurmdbd.conf").chmod(0o600)  # slurmdbd refuses a password others can read

    if not munge_works():  # else every daemon here uses the running one (and its key)
        key = folder / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        run("munged", f"--key-file={key}", f"--pid-file={folder}/run/munged.pid",
            f"--log-file={folder}/log/munged.log", f"--seed-file={folder}/munge/seed", "--force")
        wait_for("munged", munge_works)

    if not (folder / "db" / "mysql").exists():
        run("mariadb-install-db", "--no-defaults", f"--datadir={folder}/db", "--user=root",
            "--auth-root-authentication-method=normal")
    socket_path = folder / "run" / "mysql.sock"
    subprocess.Popen(["mariadbd", "--no-defaults", f"--datadir={folder}/db",
                      f"--socket={socket_path}", "--bind-address=127.0.0.1", f"--port={DB_PORT}",
                      "--user=root", f"--pid-file={folder}/run/mariadbd.pid",
                      f"--log-error={folder}/log/mariadbd.log"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for("mariadbd", socket_path.exists)
    run("mariadb", "--no-defaults", "-S", str(socket_path), "-u", "root", "-e",
        "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'adh'; "
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")

    run("slurmdbd", env=env)
    wait_for("slurmdbd", lambda: run("sacctmgr", "-n", "list", "cluster", env=env,
                                     check=False).returncode == 0)
    run("sacctmgr", "-i", "add", "cluster", "adh", env=env, check=False)  # there from a restart
    run("slurmctld", env=env)
    run("slurmd", env=env)
    wait_for("the node", lambda: run("sinfo", "-h", "-o", "%T", env=env,
                                     check=False).stdout.strip() == "idle")
    return env


def gone(pid: int) -> bool:
    """Whether process `pid` has ended: no longer there, or a zombie (mariadbd's parent is the
    process that called `start`, which reaps it here if it can)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop(folder: Path) -> None:
    """Stop every daemon that `start` left pid files for under `folder`: SIGTERM, and SIGKILL
    to one still running 30 s later."""
    for daemon in DAEMONS:
        pid_file = folder / "run" / f"{daemon}.pid"
        try:
            pid = int(pid_file.read_text().split()[0])
            if not Path(f"/proc/{pid}/comm").read_text().startswith(daemon[:15]):
                continue  # a stale pid file: that number is another process now
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):  # no pid file, or the process is gone
            continue
        deadline = time.monotonic() + 30
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", type=Path, help="where its configuration, state and logs go")
    args = parser.parse_args()
    folder = args.folder.resolve()
    if args.action == "start":
        start(folder)
        print(f"export SLURM_CONF={folder / 'slurm.conf'}")
    else:
        stop(folder)


if __name__ == "__main__":
    main()
