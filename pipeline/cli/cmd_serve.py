"""``mibyan serve``: the command's body (the gateway is ``pipeline.serve``)."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from pipeline import config as cfg
from stages.errors import UsageError

EXIT_OK = 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(args: argparse.Namespace) -> int:
    from pipeline.serve.agents import AgentMaker
    from pipeline.serve.app import create_app
    from pipeline.serve.gateway_config import AGENT_MODEL, serve_config
    from pipeline.serve.guard import allowed_hosts
    from pipeline.serve.pool import SessionPool
    from pipeline.serve.server import run
    home = args.home or cfg.home()
    config = serve_config(cfg.load_file(home), host=args.host, port=args.port,
                          no_auth=args.no_auth, workdir=args.workdir and Path(args.workdir),
                          toolsets=args.toolsets)
    if not config.auth and not _loopback(config.host):
        raise UsageError(f"--no-auth serves only on loopback, not on {config.host}")
    maker = AgentMaker(workdir=config.workdir, toolsets=config.toolsets, home=home,
                       model=args.model, base_url=args.base_url, provider=args.provider,
                       durability=args.durability,
                       trust_terminal_approvals=config.trust_terminal_approvals,
                       approvals=config.approvals)
    pool = SessionPool(maker, home=home, max_open=config.max_open_sessions,
                       max_busy=config.max_busy, max_retry_after=config.max_retry_after)
    app = create_app(pool, config, models=(AGENT_MODEL, maker.model))
    owners = ", ".join(sorted(set(config.tokens.values()))) or "no authentication"

    def announce(port: int) -> None:  # the bound port: --port 0 announced port 0
        print(f"mibyan serve: http://{config.host}:{port}/v1 (models {AGENT_MODEL}, "
              f"{maker.model}; tokens of {owners})", file=sys.stderr, flush=True)
        if not _loopback(config.host) and not config.allowed_hosts:
            names = ", ".join(sorted(allowed_hosts(config)))
            print(f"mibyan serve: only requests whose Host is {names} are answered; add the "
                  "names other hosts use to [serve] allowed_hosts", file=sys.stderr)
    try:
        run(app, host=config.host, port=config.port, secrets=tuple(config.tokens),
            head_timeout=config.header_timeout, bound=announce, stopping=pool.stopping)
    finally:
        pool.shutdown()
    return EXIT_OK
