"""``ordered cluster env``: the dev cluster's addresses as shell variables.

``eval "$(ordered cluster env)"`` exports ``ORDERED_BOOTSTRAP_SERVERS`` and
``ORDERED_ZOOKEEPER_CONNECT``, which every ``ordered`` command reads, and which
programs can read to find the cluster without a hard-coded port.
"""

from __future__ import annotations

import argparse
import shlex

from coordinator.kernel.errors import ClusterError
from ordered import devcluster
from ordered.cli.admin import BOOTSTRAP_ENV, ZOOKEEPER_ENV
from ordered.cli.options import cluster_dir_arguments
from ordered.cli.output import emit

__all__ = ["add_parser"]


def add_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``env`` among the ``cluster`` actions."""
    env = actions.add_parser(
        "env",
        help=f"print shell exports of ${BOOTSTRAP_ENV} and ${ZOOKEEPER_ENV} for the running "
        'cluster: eval "$(ordered cluster env)"',
    )
    cluster_dir_arguments(env)
    env.set_defaults(func=_env)


def _env(args: argparse.Namespace) -> int:
    state = devcluster.status(args.dir)
    if not state.running():
        raise ClusterError(
            f"the cluster in {state.directory} is not running; start it with `ordered cluster up`"
        )
    values = {BOOTSTRAP_ENV: state.bootstrap_servers, ZOOKEEPER_ENV: state.zookeeper_connect}
    text = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in values.items())
    emit(values, text, args.json)
    return 0
